"""How host time grows with work, for each simulator: measured at several sizes in one run, fitted by least squares.

    python benchmarks/bench_growth.py [--out growth.png] [--only streaming,dse,serving,system-a] [--small]
                                      [--json growth.json]

* streaming engine (fpga.streaming.engine, ``draft-u280``): ``t`` tokens decoded one after another from context ``c``
  (each a fresh token program and fast-engine run, nothing memoized); fit ``host_s = a + b*tokens +
  d*tokens*ctx`` (per-token cost and its growth with the context);
* DSE (``hwmodel sweep`` machinery, 2 worker processes, benchmarks/bench_dse.py's grid at 1..4 clocks): fit
  ``host_s = a + b*points`` (``a``: planning and pool start-up; ``60/b``: points per minute at scale);
* serving (hwmodel.serving.scale, A100 + 7 x U280 nodes, Poisson 0.6 requests/s per node): fit
  ``host_s = a + b*requests + d*requests*nodes``;
* system A (``hwmodel reason run`` replay of math500 problems, heteroreason on config1, engine memos warm): fit
  ``host_s = a + b*problems``.

Each simulator runs once at its smallest size first (imports, Numba loads, memos; not fitted). Printed per
simulator: the sizes and host times, the fitted coefficients (per-unit costs), the largest relative residual of the
fit and the growth it states (*linear* in the fitted terms when every size is within :data:`LINEAR_RESIDUAL` of the
fit), and the per-unit cost at a stated reference size (per token at context 1024, per design point, per request
on 8 nodes, per problem); the PNG plots host time against work with the fit, ``--json`` writes the same figures
(``benchmarks/table.py`` puts them into the README's speed table). ``--small`` runs smaller sizes that still
over-determine each fit (more sizes than coefficients). Host times depend on the machine and its load: quote
them with the machine's state.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

Size = dict[str, int]


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def streaming_run(s: Size) -> None:
    from fpga.streaming.engine import simulate_token

    for i in range(s["tokens"]):
        simulate_token("draft-u280", s["ctx"] + i)


def dse_run(s: Size) -> None:
    from bench_dse import SPEC

    from hwmodel.dse import load_plan, run_sweep

    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "g.toml"
        spec.write_text(SPEC.format(clocks=s["clocks"], evaluator="streaming-decode"))
        plan = load_plan(spec)
        s["points"] = len(plan.points)
        run_sweep(plan, Path(tmp) / "out", workers=2, progress=False)


def serving_run(s: Size) -> None:
    from hwmodel.serving.scale import run_scale, scale_point

    run_scale(scale_point(nodes=s["nodes"], requests=s["requests"]))


def system_a_run(s: Size) -> None:
    import hwmodel as hw

    hw.replay(hw.generate_trace("math500", limit=s["problems"]), "heteroreason", "config1")


@dataclasses.dataclass(frozen=True)
class Simulator:
    """How one simulator is timed: ``sizes`` (the first is the warm-up, not fitted; ``small``: a quick subset that
    still over-determines the fit), the fit's terms as functions of a size, the work axis of the plot, and the
    reference size at which the per-unit cost is stated (``unit`` names it)."""

    run: Callable[[Size], None]
    sizes: list[Size]
    small: list[Size]
    terms: dict[str, Callable[[Size], float]]
    work: Callable[[Size], float]
    label: str
    unit: str
    per_unit: Callable[[dict[str, float]], float]


SIMULATORS: dict[str, Simulator] = {
    "streaming": Simulator(
        streaming_run,
        [
            {"tokens": 2, "ctx": 0},
            {"tokens": 4, "ctx": 0},
            {"tokens": 4, "ctx": 2048},
            {"tokens": 8, "ctx": 512},
            {"tokens": 8, "ctx": 4096},
            {"tokens": 16, "ctx": 1024},
        ],
        [
            {"tokens": 2, "ctx": 0},
            {"tokens": 3, "ctx": 0},
            {"tokens": 3, "ctx": 2048},
            {"tokens": 6, "ctx": 512},
            {"tokens": 6, "ctx": 2048},
            {"tokens": 4, "ctx": 1024},
        ],
        {"s per token": lambda s: s["tokens"], "s per token per context token": lambda s: s["tokens"] * s["ctx"]},
        lambda s: s["tokens"] * (s["ctx"] + 1),
        "tokens x (context + 1)",
        "host s per token at context 1024",
        lambda c: c["s per token"] + 1024 * c["s per token per context token"],
    ),
    "dse": Simulator(
        dse_run,
        [{"clocks": 1}, {"clocks": 1}, {"clocks": 2}, {"clocks": 3}, {"clocks": 4}],
        [{"clocks": 1}, {"clocks": 1}, {"clocks": 2}, {"clocks": 3}],
        {"s per point": lambda s: s["points"]},
        lambda s: s["points"],
        "design points",
        "host s per design point (2 workers)",
        lambda c: c["s per point"],
    ),
    "serving": Simulator(
        serving_run,
        [
            {"nodes": 2, "requests": 200},
            {"nodes": 2, "requests": 1000},
            {"nodes": 8, "requests": 1000},
            {"nodes": 8, "requests": 4000},
            {"nodes": 32, "requests": 4000},
        ],
        [
            {"nodes": 2, "requests": 200},
            {"nodes": 2, "requests": 500},
            {"nodes": 8, "requests": 500},
            {"nodes": 8, "requests": 2000},
            {"nodes": 16, "requests": 2000},
            {"nodes": 4, "requests": 1000},
        ],
        {"s per request": lambda s: s["requests"], "s per request per node": lambda s: s["requests"] * s["nodes"]},
        lambda s: s["requests"] * s["nodes"],
        "requests x nodes",
        "host s per request on 8 nodes",
        lambda c: c["s per request"] + 8 * c["s per request per node"],
    ),
    "system-a": Simulator(
        system_a_run,
        [{"problems": 5}, {"problems": 10}, {"problems": 20}, {"problems": 40}, {"problems": 80}],
        [{"problems": 5}, {"problems": 10}, {"problems": 20}, {"problems": 40}],
        {"s per problem": lambda s: s["problems"]},
        lambda s: s["problems"],
        "problems",
        "host s per problem",
        lambda c: c["s per problem"],
    ),
}


def fit(
    sizes: Sequence[Size], times: Sequence[float], terms: dict[str, Callable[[Size], float]]
) -> tuple[dict[str, float], float]:
    """Least squares ``time = a + sum(coef * term)``; returns the coefficients (``start-up s`` first) and the
    largest relative residual."""
    a = np.array([[1.0] + [f(s) for f in terms.values()] for s in sizes])
    y = np.asarray(times)
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    resid = float(np.max(np.abs(a @ coef - y) / y))
    return dict(zip(["start-up s", *terms], (float(c) for c in coef))), resid


#: the largest relative residual under which the growth is called linear in the fitted terms
LINEAR_RESIDUAL = 0.15


def measure(name: str, small: bool = False) -> dict:
    """Time ``name`` at each of its sizes (the first a warm-up), fit it, and state the growth."""
    sim = SIMULATORS[name]
    sizes = [dict(s) for s in (sim.small if small else sim.sizes)]
    warm = _timed(lambda: sim.run(sizes[0]))
    times = []
    for s in sizes[1:]:
        times.append(_timed(lambda s=s: sim.run(s)))
        print(f"{name}: {s} -> {times[-1]:.2f} s", flush=True)
    coef, resid = fit(sizes[1:], times, sim.terms)
    per_unit = sim.per_unit(coef)
    growth = "linear" if resid <= LINEAR_RESIDUAL else "not linear"
    terms = ", ".join(f"{k} {v:.3g}" for k, v in coef.items())
    print(
        f"{name}: warm-up {warm:.2f} s (not fitted); fit: {terms}; largest relative residual {100 * resid:.1f} %: "
        f"{growth} in {' and '.join(k.removeprefix('s ') for k in sim.terms)}; {sim.unit} {per_unit:.3g}",
        flush=True,
    )
    return {
        "sizes": sizes[1:],
        "host_s": [round(t, 4) for t in times],
        "warm_up_s": round(warm, 4),
        "coefficients": coef,
        "max_relative_residual": resid,
        "growth": growth,
        "unit": sim.unit,
        "per_unit_s": per_unit,
    }


def plot(results: dict[str, dict], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.6), squeeze=False)
    for ax, (name, r) in zip(axes[0], results.items()):
        sim = SIMULATORS[name]
        x = [sim.work(s) for s in r["sizes"]]
        coef = r["coefficients"]
        pred = [coef["start-up s"] + sum(coef[k] * f(s) for k, f in sim.terms.items()) for s in r["sizes"]]
        ax.plot(x, r["host_s"], "o", label="measured")
        ax.plot(x, pred, "x", label=f"fit (max resid {100 * r['max_relative_residual']:.0f} %)")  # two terms: points
        ax.set_xlabel(sim.label)
        ax.set_ylabel("host s")
        ax.set_title(f"{name}: {r['growth']}, {r['per_unit_s']:.3g} {sim.unit.removeprefix('host ')}", fontsize=8)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("growth.png"), help="PNG of host time against work")
    ap.add_argument("--only", default=",".join(SIMULATORS), help="comma-separated subset of " + ", ".join(SIMULATORS))
    ap.add_argument("--small", action="store_true", help="smaller sizes, fewer of them (a quick check)")
    ap.add_argument("--json", type=Path, default=None, help="also write the sizes, times and fits as JSON")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = set(names) - set(SIMULATORS)
    if unknown:
        ap.error(f"--only: unknown simulator(s) {', '.join(sorted(unknown))}; choose from {', '.join(SIMULATORS)}")
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    results = {name: measure(name, args.small) for name in names}
    plot(results, args.out)
    print(f"wrote {args.out}")
    if args.json:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        args.json.write_text(
            json.dumps({"cpus": os.cpu_count(), "load_average": load, "simulators": results}, indent=2)
        )
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
