"""An interactive, self-contained Pareto explorer for a sweep (`hwmodel sweep` -> explorer.html).

One HTML file with the sweep's feasible points and fronts embedded as JSON and a small inline script (no network,
no library): choose the front and the two axes (any metric or numeric parameter), hover a marker to see the whole
design point (every parameter and metric), click it to pin it. Each point of the chosen front is one
``circle.front`` marker, the other feasible points are ``circle.point`` markers, and a two-objective front is
joined by its staircase line.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from hwmodel.dse.report import SweepReport, front_name
from hwmodel.report.html import json_for_script, page


def _num(v: Any) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)) and math.isfinite(float(v)):
        return float(v)
    return None


def explorer_data(rep: SweepReport) -> dict[str, Any]:
    """The data the page embeds: feasible points (params + metrics), numeric axes, fronts as point positions."""
    plan = rep.plan
    feas_pos = [i for i, r in enumerate(rep.rows) if r.feasible]
    index_of = {pos: k for k, pos in enumerate(feas_pos)}
    points = []
    for pos in feas_pos:
        r = rep.rows[pos].row
        points.append(
            {
                "id": r.point_id,
                "params": {k: v for k, v in r.params.items()},
                "metrics": {k: _num(v) for k, v in r.metrics.items()},
            }
        )
    metrics = list(plan.evaluator.metric_names)
    numeric_params = [
        p for p in plan.param_names if points and all(_num(pt["params"].get(p)) is not None for pt in points)
    ]
    fronts = [
        {
            "name": front_name(objs),
            "objectives": list(objs),
            "sense": [plan.sense[m] for m in objs],
            "points": [index_of[p] for p in idx],
        }
        for objs, idx in rep.fronts.items()
    ]
    return {"sweep": plan.name, "metrics": metrics, "params": numeric_params, "points": points, "fronts": fronts}


_SCRIPT = r"""
const D = JSON.parse(document.getElementById('data').textContent);
const W = 860, H = 520, M = {l: 80, r: 20, t: 20, b: 56};
const svgNS = 'http://www.w3.org/2000/svg';
const axes = D.metrics.map(m => ['metrics', m]).concat(D.params.map(p => ['params', p]));
const sel = {front: document.getElementById('front'), x: document.getElementById('xaxis'),
             y: document.getElementById('yaxis')};
function opt(s, v, t) { const o = document.createElement('option'); o.value = v; o.textContent = t; s.appendChild(o); }
D.fronts.forEach((f, i) => opt(sel.front, i, f.objectives.join(' vs ')));
if (!D.fronts.length) opt(sel.front, -1, '(no front)');
axes.forEach(([k, n], i) => { opt(sel.x, i, n); opt(sel.y, i, n); });
function axisIndex(name) { return axes.findIndex(a => a[1] === name); }
function val(pt, a) { const v = pt[a[0]][a[1]]; return (typeof v === 'number') ? v : (v === true ? 1 : (v === false ? 0 : null)); }
function fmt(v) { return (typeof v === 'number') ? (Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3) ? v.toExponential(4) : +v.toPrecision(6)) : String(v); }
function tick(v) { return (Math.abs(v) >= 1e4 || (v !== 0 && Math.abs(v) < 1e-3)) ? v.toExponential(2) : String(+v.toPrecision(3)); }
function tipText(pt) {
  const rows = Object.entries(pt.params).map(([k, v]) => `${k} = ${fmt(v)}`)
    .concat(Object.entries(pt.metrics).map(([k, v]) => `${k}: ${v === null ? '-' : fmt(v)}`));
  return `point ${pt.id}\n` + rows.join('\n');
}
function chooseFront() {
  const f = D.fronts[+sel.front.value];
  if (f) { sel.x.value = axisIndex(f.objectives[0]); sel.y.value = axisIndex(f.objectives[1] || f.objectives[0]); }
  draw();
}
function draw() {
  const svg = document.getElementById('plot'); while (svg.firstChild) svg.removeChild(svg.firstChild);
  const ax = axes[+sel.x.value], ay = axes[+sel.y.value];
  const f = D.fronts[+sel.front.value]; const onFront = new Set(f ? f.points : []);
  const pts = D.points.map((p, i) => ({i, p, x: val(p, ax), y: val(p, ay)})).filter(q => q.x !== null && q.y !== null);
  const xs = pts.map(q => q.x), ys = pts.map(q => q.y);
  const lo = a => a.length ? Math.min(...a) : 0, hi = a => a.length ? Math.max(...a) : 1;
  let [x0, x1, y0, y1] = [lo(xs), hi(xs), lo(ys), hi(ys)];
  if (x0 === x1) { x0 -= 1; x1 += 1; } if (y0 === y1) { y0 -= 1; y1 += 1; }
  const px = (x1 - x0) * 0.04, py = (y1 - y0) * 0.04; x0 -= px; x1 += px; y0 -= py; y1 += py;
  const sx = v => M.l + (v - x0) / (x1 - x0) * (W - M.l - M.r), sy = v => H - M.b - (v - y0) / (y1 - y0) * (H - M.t - M.b);
  const el = (n, a) => { const e = document.createElementNS(svgNS, n); for (const k in a) e.setAttribute(k, a[k]); svg.appendChild(e); return e; };
  el('line', {x1: M.l, y1: H - M.b, x2: W - M.r, y2: H - M.b, stroke: '#555'});
  el('line', {x1: M.l, y1: M.t, x2: M.l, y2: H - M.b, stroke: '#555'});
  for (let k = 0; k <= 4; k++) {
    const vx = x0 + (x1 - x0) * k / 4, vy = y0 + (y1 - y0) * k / 4;
    el('text', {x: sx(vx), y: H - M.b + 18, 'text-anchor': 'middle', 'font-size': 11}).textContent = tick(vx);
    el('text', {x: M.l - 6, y: sy(vy) + 4, 'text-anchor': 'end', 'font-size': 11}).textContent = tick(vy);
  }
  el('text', {x: (M.l + W - M.r) / 2, y: H - 12, 'text-anchor': 'middle', 'font-size': 13}).textContent = ax[1];
  const yl = el('text', {x: 16, y: (M.t + H - M.b) / 2, 'text-anchor': 'middle', 'font-size': 13,
                         transform: `rotate(-90 16 ${(M.t + H - M.b) / 2})`}); yl.textContent = ay[1];
  const front = pts.filter(q => onFront.has(q.i)).sort((a, b) => a.x - b.x || a.y - b.y);
  if (f && f.objectives.length === 2 && front.length > 1 && ax[1] === f.objectives[0] && ay[1] === f.objectives[1]) {
    el('polyline', {points: front.map(q => `${sx(q.x)},${sy(q.y)}`).join(' '), fill: 'none', stroke: '#d95f02',
                    'stroke-width': 1.5, 'stroke-dasharray': '4 3'});
  }
  const tip = document.getElementById('tip'), pinned = document.getElementById('pinned');
  for (const q of pts) {
    const isF = onFront.has(q.i);
    const c = el('circle', {cx: sx(q.x), cy: sy(q.y), r: isF ? 6 : 3.5, class: isF ? 'front' : 'point',
                            fill: isF ? '#d95f02' : '#9aa5b8', 'fill-opacity': isF ? 0.95 : 0.6,
                            stroke: isF ? '#7a3300' : 'none', 'data-point': q.p.id});
    c.addEventListener('mouseenter', ev => { tip.textContent = tipText(q.p); tip.style.display = 'block';
      tip.style.left = (ev.pageX + 14) + 'px'; tip.style.top = (ev.pageY + 10) + 'px'; });
    c.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
    c.addEventListener('click', () => { pinned.textContent = tipText(q.p); });
  }
  document.getElementById('count').textContent =
    `${pts.length} feasible points shown, ${front.length} on the front` + (f ? ` (${f.objectives.join(', ')})` : '');
}
sel.front.addEventListener('change', chooseFront); sel.x.addEventListener('change', draw); sel.y.addEventListener('change', draw);
chooseFront();
"""

_BODY = """
<p>Choose a front and the axes; hover a marker for its design point, click to pin it.</p>
<p><label>front <select id="front"></select></label> &nbsp; <label>x <select id="xaxis"></select></label> &nbsp;
<label>y <select id="yaxis"></select></label> &nbsp; <span id="count"></span></p>
<svg id="plot" width="860" height="520" viewBox="0 0 860 520" style="background:#fff;border:1px solid #dde1e8"></svg>
<pre id="pinned" style="font-size:12px"></pre>
<pre id="tip" style="display:none;position:absolute;background:#fffbe6;border:1px solid #d9c36a;padding:6px 8px;
font-size:12px;pointer-events:none;margin:0"></pre>
<script type="application/json" id="data">{data}</script>
"""


def write_explorer(rep: SweepReport, path: Path) -> Path:
    """Write the explorer page for ``rep`` to ``path`` (normally ``<out>/explorer.html``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = explorer_data(rep)
    n = len(data["points"])
    body = _BODY.replace("{data}", json_for_script(data))
    path.write_text(
        page(
            f"Pareto explorer: {rep.plan.name}",
            f"{n} feasible points, {len(data['fronts'])} fronts",
            body,
            script=_SCRIPT,
        ),
        encoding="utf-8",
    )
    return path
