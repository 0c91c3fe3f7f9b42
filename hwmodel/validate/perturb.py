"""Bands of the rows no calibration family computes in place: system A, system B, HBM, HBM peer (the perturbation
bands). Each uncertain input (a *knob*) is moved to its ends, the area's rows are recomputed in a fresh process,
and every predicted row gets ``[lo, hi]`` from how far it moved. :mod:`hwmodel.validate.bands` does the same for
calibration-family rows by linearisation; a replay cannot be linearised cheaply, so here it is done by runs.

Knobs, for the three sources of docs/validation.md ("Bands"):

* (a) **fitted parameters**: for each calibration family an area depends on (GPU, FPGA instruction, FPGA power),
  the principal directions of its least-squares covariance (:func:`hwmodel.validate.bands.covariance`, in relative
  units); along each, the parameters move by +Z sd (one run; clipped to their bounds). A GPU direction that moves
  none of the area's *proxy* quantities (the device figures its rows are built from: decode step, prefill, decode
  power of the area's GPUs) by more than :data:`SCREEN` is not rerun: its largest proxy deviation is taken instead
  (an upper bound of what it can do to a ratio of those figures). The HBM model's one fitted input (the page-hit
  latency) moves by +-Z x :data:`hwmodel.validate.bands.MEASUREMENT_SIGMA` of the figure it reproduces;
* (b) **measured hosts**: the x86 server's eager-issue cost at the Qwen benchmark server's fitted value (one run);
* (c) **[estimate] spec fields**: the U280 board's ``[estimate]`` fields (HBM switch and clock-crossing latencies,
  halved and doubled as :func:`hwmodel.studies.sensitivity.field_range` does, moved together since each adds
  cycles: two runs), the GPU family's fixed ``[estimate]`` per-sequence host cost (halved / doubled: batch > 1 only,
  so screened by the proxies like (a)).

A row's band, from ``d = ln(value at the end / value at the nominal)`` at the *band setting* (system A: the first
:data:`SYSTEM_A_LIMIT` problems of each dataset, configuration 1; system B: :data:`SYSTEM_B_REQUESTS` requests per
point): the (a) deviations add in quadrature (``s``, a linearised 95 % interval, as :mod:`hwmodel.validate.bands`);
each (b)/(c) knob adds its worst deviation down and up (``one at a time`` ends, combined *all together*, linearised,
without a further run): ``[y exp(-s + sum down), y exp(s + sum up)]``, ``y`` the row's own value at its own setting.

Not varied, and said so in every band: ``[estimate]`` fields of the FPGA designs (those of the instruction design
are absorbed by its family's fit; a streaming design's are what ``hwmodel fpga decode --sensitivity`` varies), the
systems' own estimates (API call overhead), and the workload fits (rejection rates, backtracking hazards: they
shape the traces, not the timing).

``hwmodel validate --record-bands`` runs this (minutes) and writes :data:`RECORDED_PATH`; ``hwmodel validate``
attaches the recorded relative band to each row (by :func:`band_key`, the id without setting and role), as it
attaches the recorded full-study values.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hwmodel.errors import HwmodelError
from hwmodel.validate.rows import check, row_id

ROOT = Path(__file__).resolve().parents[2]
RECORDED_PATH = Path(__file__).resolve().parent / "recorded_bands.json"
SCREEN = 0.002  # a covariance direction moving no proxy by more than 0.2 % is not rerun
MIN_STEP = 1e-3  # a direction moving no parameter by 0.1 % is not a direction
SYSTEM_A_LIMIT = 2
SYSTEM_B_REQUESTS = 30
#: the U280's [estimate] fields (fpga/boards/u280.toml), each a latency in cycles
U280_ESTIMATES = ("hbm.lateral_hop_cycles", "hbm.switch_latency_cycles", "hbm.cdc_sync_cycles")
AREAS = ("HBM", "system A", "system B")
COMBINED = (
    "(a) covariance directions in quadrature, (b)/(c) and the HBM fitted input one-at-a-time ends added all together "
    "(linearised; hwmodel/validate/perturb.py)"
)
#: what an area's band does not vary (said in every band)
NOT_VARIED = {
    "HBM": "the DRAM timings (JEDEC / gem5 / PG276 values, sourced, not [estimate])",
    "system A": "the FPGA designs' [estimate] fields (their --sensitivity band), the system spec's own estimates "
    "(API call overhead), the workload fits (rejection rates, backtracking hazards: they shape the traces)",
    "system B": "the instruction design's [estimate] fields (absorbed by the fpga-instruction fit), card prices "
    "([M], not [estimate])",
}


@dataclasses.dataclass(frozen=True)
class End:
    """One run: parameter values by family, spec-file fields, and how the run's deviations combine."""

    label: str
    params: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)
    specs: Mapping[str, Mapping[str, float]] = dataclasses.field(default_factory=dict)  # file -> {dotted: value}
    board: Mapping[str, float] = dataclasses.field(default_factory=dict)  # in-process U280 field overrides


@dataclasses.dataclass(frozen=True)
class Knob:
    """An uncertain input: ``kind`` ``"a"`` (one run, quadrature) or ``"bc"`` (one or two ends, worst case);
    ``proxy_dev``: the largest proxy deviation of a screened (not rerun) direction, else None."""

    name: str
    kind: str
    ends: tuple[End, ...]
    proxy_dev: float | None = None


def band_key(r: Mapping[str, Any]) -> str:
    """The id a band is recorded under: the row's id at the full setting, without its role (a role relabelled by
    the table keeps its band)."""
    return row_id({**r, "setting": "", "role": ""})


# ------------------------------------------------------------------------------------------------ knobs
def _family_directions(name: str) -> list[tuple[str, dict[str, float]]]:
    """(label, parameter values) at +Z sd along each principal direction of family ``name``'s covariance."""
    from hwmodel.validate.bands import Z, committed_covariance

    fam, values, cov = committed_covariance(name)
    scale = np.array([abs(values[p.name]) or 1.0 for p in fam.params])
    lam, vec = np.linalg.eigh(cov / np.outer(scale, scale))
    out = []
    for i in np.argsort(-lam):
        step = Z * math.sqrt(max(lam[i], 0.0)) * vec[:, i]
        if np.max(np.abs(step)) < MIN_STEP:
            continue
        moved = {}
        for j, p in enumerate(fam.params):
            moved[p.name] = min(max(values[p.name] * (1.0 + step[j]), p.lower), p.upper)
        main = ", ".join(f"{p.name} {100 * step[j]:+.1f} %" for j, p in enumerate(fam.params) if abs(step[j]) >= 0.01)
        out.append((f"{name} covariance direction {len(out) + 1} ({main or 'small moves'})", moved))
    return out


def _proxies(area: str) -> list[Callable[[Mapping[str, float]], float]]:
    """The device figures an area's rows are built from, as functions of the GPU family's values."""
    from gpu.latency import GpuEngine
    from gpu.params import GpuParams
    from hwmodel.engine import Phase

    if area == "system A":
        engines = [
            ("rtx3090", llm, fw)
            for llm in ("qwen2.5-0.5b", "skywork-prm-7b", "qwen2.5-math-7b")
            for fw in ("vllm-eager", "vllm")
        ] + [("orin-nano", "qwen2.5-0.5b", "edge-w8a8")]
        points = (("decode", 600), ("prefill", 300), ("power", 0))
    else:
        engines = [("a100-40gb", "llama2-7b", "hf")]
        points = (
            ("decode", 256),
            ("decode", 1536),
            ("decode", 4096),
            ("prefill", 128),
            ("prefill", 3072),
            ("power", 0),
        )

    def fn(gpu: str, llm: str, fw: str, what: str, n: int) -> Callable[[Mapping[str, float]], float]:
        def f(v: Mapping[str, float]) -> float:
            e = GpuEngine(gpu, llm, fw, weight_bits=8 if fw == "edge-w8a8" else 16, params=GpuParams.of(dict(v)))
            if what == "decode":
                return e.decode_s(n)
            if what == "prefill":
                return e.prefill_s(n)
            return e.power_w(Phase.DECODE)

        return f

    return [fn(g, m, fw, what, n) for g, m, fw in engines for what, n in points]


def knobs(area: str) -> list[Knob]:
    """The knobs of ``area`` (module docstring), GPU directions screened by the area's proxies."""
    from calibration.params import load_values
    from hwmodel.params import params_path

    gpu = load_values(params_path("gpu"))
    out: list[Knob] = []
    if area == "HBM":
        from hwmodel.specs import library
        from hwmodel.validate.bands import MEASUREMENT_SIGMA, Z

        h = library().board("u280").hbm
        hit = h.latency_page_hit_cycles
        d = max(1, round(Z * MEASUREMENT_SIGMA * hit))
        out.append(
            Knob(
                f"hbm fitted input latency_page_hit_cycles {hit} +- {d} (Z x {MEASUREMENT_SIGMA:.0%})",
                "bc",
                (
                    End("low", board={"latency_page_hit_cycles": hit - d}),
                    End("high", board={"latency_page_hit_cycles": hit + d}),
                ),
            )
        )
        for field in U280_ESTIMATES:
            name = field.split(".")[1]
            x = int(getattr(h, name))
            out.append(
                Knob(
                    f"u280 {field} [estimate] {x // 2}..{2 * x}",
                    "bc",
                    (End("low", board={name: x // 2}), End("high", board={name: 2 * x})),
                )
            )
        return out
    proxies = _proxies(area)
    base = [f(gpu) for f in proxies]

    def dev(values: Mapping[str, float]) -> float:
        return max(abs(math.log(f(values) / b)) for f, b in zip(proxies, base))

    for label, moved in _family_directions("gpu"):
        full = {**gpu, **moved}
        dv = dev(full)
        out.append(Knob(label, "a", (End("+Z sd", params={"gpu": moved}),), None if dv > SCREEN else dv))
    fams = ("fpga-instruction",) if area == "system B" else ("fpga-power",)
    if area == "system B":
        fams += ("fpga-power",)
    for fam in fams:
        for label, moved in _family_directions(fam):
            out.append(Knob(label, "a", (End("+Z sd", params={fam: moved}),)))
    host = {**gpu, "c_op_host_s": gpu["c_op_host_qwen_s"]}
    out.append(
        Knob(
            "measured hosts: c_op_host_s at c_op_host_qwen_s's value",
            "bc",
            (End("swap", params={"gpu": {"c_op_host_s": gpu["c_op_host_qwen_s"]}}),),
            None if dev(host) > SCREEN else dev(host),
        )
    )
    c = gpu["c_seq_vllm_s"]
    lo, hi = {**gpu, "c_seq_vllm_s": c / 2}, {**gpu, "c_seq_vllm_s": 2 * c}
    dv = max(dev(lo), dev(hi))
    out.append(
        Knob(
            f"gpu fixed c_seq_vllm_s [estimate] {c / 2 * 1e6:.0f}..{2 * c * 1e6:.0f} us",
            "bc",
            (End("low", params={"gpu": {"c_seq_vllm_s": c / 2}}), End("high", params={"gpu": {"c_seq_vllm_s": 2 * c}})),
            None if dv > SCREEN else dv,
        )
    )
    if area == "system A":  # the streaming drafts run on the U280's HBM
        from hwmodel.specs import library

        h = library().board("u280").hbm
        ends = []
        for side, f in (("low", lambda x: x // 2), ("high", lambda x: 2 * x)):
            ends.append(
                End(
                    side,
                    specs={"fpga/boards/u280.toml": {k: f(int(getattr(h, k.split(".")[1]))) for k in U280_ESTIMATES}},
                )
            )
        out.append(
            Knob(
                "u280 [estimate] HBM latencies (" + ", ".join(U280_ESTIMATES) + ") halved / doubled together",
                "bc",
                tuple(ends),
            )
        )
    return out


# ------------------------------------------------------------------------------------------------ one run
def edit_toml_value(text: str, dotted: str, value: float) -> str:
    """``text`` with the ``value`` of field ``section.name`` (``{ value = X, source = ... }``) replaced."""
    section, _, name = dotted.rpartition(".")
    lines = text.splitlines(keepends=True)
    current = ""
    for i, line in enumerate(lines):
        m = re.match(r"\s*\[([^\]]+)\]\s*$", line)
        if m:
            current = m.group(1).strip()
            continue
        if current == section and re.match(rf"\s*{re.escape(name)}\s*=", line):
            new = repr(value) if isinstance(value, float) else str(int(value))
            lines[i], n = re.subn(r"value\s*=\s*[^,}]+", f"value = {new}", line, count=1)
            if n:
                return "".join(lines)
    raise HwmodelError(f"perturbation: field '{dotted}' not found")


def environment(end: End, work: Path) -> dict[str, str]:
    """The environment of a run at ``end``: a copy of the parameter files and of the edited spec files."""
    from hwmodel.params import params_dir

    env = dict(os.environ)
    if end.params:
        pdir = work / "params"
        pdir.mkdir(parents=True, exist_ok=True)
        for f in params_dir().glob("*.json"):
            shutil.copy(f, pdir / f.name)
        for fam, vals in end.params.items():
            path = pdir / f"{fam}.json"
            doc = json.loads(path.read_text())
            for k, v in vals.items():
                section = "params" if k in doc["params"] else "fixed"
                doc[section][k]["value"] = float(v)
            path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
        env["HWMODEL_PARAMS_DIR"] = str(pdir)
    if end.specs:
        sdir = work / "specs"
        sdir.mkdir(parents=True, exist_ok=True)
        for rel, fields in end.specs.items():
            text = (ROOT / rel).read_text()
            for k, v in fields.items():
                text = edit_toml_value(text, k, v)
            (sdir / Path(rel).name).write_text(text)
        env["HWMODEL_SPEC_PATH"] = os.pathsep.join(
            [str(sdir)] + [p for p in env.get("HWMODEL_SPEC_PATH", "").split(os.pathsep) if p]
        )
    return env


def area_rows(area: str, board: Mapping[str, float] | None = None) -> dict[str, float]:
    """{band key: model value} of ``area``'s predicted rows at the band setting (in this process)."""
    if area == "system A":
        from hwmodel.reasoning import validation as a

        rows = a.rows(configs=("config1",), limit=SYSTEM_A_LIMIT)
    elif area == "system B":
        from hwmodel.serving import validation as b

        rows = b.rows(requests=SYSTEM_B_REQUESTS)
    else:
        from hwmodel.validate import hbm

        rows = hbm.rows(board_fields=board or {})
    return {band_key(check(r)): float(r["model"]) for r in rows if r["role"] == "predicted"}


def run_end(area: str, end: End) -> dict[str, float]:
    """The area's rows at ``end``: in this process for an in-process board override, else in a fresh process."""
    if end.board:
        return area_rows(area, end.board)
    with tempfile.TemporaryDirectory(prefix="hwmodel-band-") as tmp:
        env = environment(end, Path(tmp))
        res = subprocess.run(
            [sys.executable, "-m", "hwmodel.validate.perturb", area],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    if res.returncode != 0:
        raise HwmodelError(f"perturbation run '{area}' at {end.label}: {res.stderr.strip().splitlines()[-1:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------------------ bands
def combine(
    nominal: Mapping[str, float], runs: Sequence[tuple[Knob, Sequence[Mapping[str, float]]]]
) -> dict[str, tuple[float, float]]:
    """Relative ends ``(lo / y, hi / y)`` of every row of ``nominal`` (module docstring)."""
    out = {}
    for k, y in nominal.items():
        sq = 0.0
        down = up = 0.0
        for knob, results in runs:
            if knob.proxy_dev is not None:
                d = [knob.proxy_dev]
            else:
                d = [math.log(r[k] / y) if r.get(k, 0) > 0 and y > 0 else 0.0 for r in results]
            if knob.kind == "a":
                sq += max(x * x for x in d)
            else:
                if knob.proxy_dev is not None:
                    down, up = down - d[0], up + d[0]
                else:
                    down += min(0.0, *d)
                    up += max(0.0, *d)
        s = math.sqrt(sq)
        out[k] = (math.exp(-s + down), math.exp(s + up))
    return out


def _journal(area: str, end: End) -> Path | None:
    """Where one run's rows are kept (the project's cache directory, as the serving engine tables): keyed by the
    area, the run's overrides, the band setting and the source of every model it runs; None without a cache."""
    import hashlib

    from hwmodel.numba_cache import cache_root

    root = cache_root()
    if root is None:
        return None
    h = hashlib.sha256(repr((area, end.params, end.specs, end.board, SYSTEM_A_LIMIT, SYSTEM_B_REQUESTS)).encode())
    for d in ("hwmodel", "gpu", "fpga", "interconnect", "calibration"):
        for f in sorted((ROOT / d).rglob("*")):
            if f.suffix in (".py", ".json", ".toml", ".csv") and f.is_file() and "validate" not in f.parts:
                h.update(str(f.relative_to(ROOT)).encode() + f.read_bytes())
    return root / "validate-bands" / f"{h.hexdigest()[:24]}.json"


def compute(
    area: str, log: Callable[[str], None] = lambda m: None, jobs: int = 1, journaled_only: bool = False
) -> dict[str, Any]:
    """The recorded bands of ``area``: per row key, relative ends; and how they were computed (``jobs``: runs at
    once, each its own process). Each run's rows are journaled (:func:`_journal`), so a rerun skips them;
    ``journaled_only``: run nothing, use the journaled runs, and name every knob whose runs are missing."""
    from concurrent.futures import ThreadPoolExecutor

    ks = knobs(area)
    todo = [(None, End("nominal"))] + [(k, e) for k in ks if k.proxy_dev is None for e in k.ends]
    for k in ks:
        if k.proxy_dev is not None:
            log(f"{area}: {k.name}: screened (proxy {100 * k.proxy_dev:.3f} %)")

    def one(item: tuple[Knob | None, End]) -> dict[str, float] | None:
        k, e = item
        path = _journal(area, e)
        if path is not None and path.is_file():
            return json.loads(path.read_text())
        if journaled_only:
            return None
        log(f"{area}: {k.name if k else 'nominal'}: {e.label}")
        res = run_end(area, e)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(res))
        return res

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(one, todo))
    nominal = results[0]
    if nominal is None:
        raise HwmodelError(f"perturbation bands of {area}: the nominal run is not journaled")
    by_knob: dict[str, list[dict[str, float]]] = {}
    missing: set[str] = set()
    for (k, _e), res in zip(todo[1:], results[1:]):
        assert k is not None
        if res is None:
            missing.add(k.name)
        else:
            by_knob.setdefault(k.name, []).append(res)
    runs = [(k, by_knob.get(k.name, [])) for k in ks if k.name not in missing]
    ks_done = [k for k, _ in runs]
    rel = combine(nominal, runs)
    setting = {
        "system A": f"first {SYSTEM_A_LIMIT} problems per dataset, config1",
        "system B": f"{SYSTEM_B_REQUESTS} requests per point",
        "HBM": "the rows' own set-up",
    }[area]
    how = (
        f"perturbation at the band setting ({setting}): "
        + "; ".join(
            k.name + (f" (screened: proxies move {100 * k.proxy_dev:.2f} %)" if k.proxy_dev is not None else "")
            for k in ks_done
        )
        + (f"; NOT RUN in this recording (rerun --record-bands): {'; '.join(sorted(missing))}" if missing else "")
        + ". "
        + COMBINED
        + "; not varied: "
        + NOT_VARIED[area]
    )
    return {
        "how": how,
        "knobs": [k.name for k in ks_done],
        "not_run": sorted(missing),
        "rows": {k: list(v) for k, v in rel.items()},
    }


def record(
    areas: Sequence[str] = AREAS, path: Path = RECORDED_PATH, log: Callable[[str], None] = print, jobs: int = 1
) -> Path:
    """Compute the bands of ``areas`` and write them (other areas' entries kept)."""
    doc = load(path) or {
        "doc": "hwmodel validate --record-bands: relative bands (lo / model, hi / model) of the rows whose band "
        "needs reruns (hwmodel/validate/perturb.py), keyed by the row's id without setting and role",
        "areas": {},
    }
    for a in areas:
        doc["areas"][a] = compute(a, log, jobs=1 if a == "HBM" else jobs)
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load(path: Path = RECORDED_PATH) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def attach(rows: Sequence[dict[str, Any]], path: Path = RECORDED_PATH) -> None:
    """Give every row without a band its recorded one (``model_band`` = its value x the recorded relative ends)."""
    doc = load(path)
    if doc is None:
        return
    for r in rows:
        if r.get("model_band") is not None or r["role"] != "predicted":
            continue
        area = "HBM" if r["area"] == "HBM peer" else r["area"]
        entry = doc["areas"].get(area)
        rel = entry["rows"].get(band_key(r)) if entry else None
        if rel is None:
            continue
        r["model_band"] = [r["model"] * rel[0], r["model"] * rel[1]]
        r["band_sources"] = entry["how"]


if __name__ == "__main__":  # one run of an area's rows (env set by run_end): prints {key: value}
    print(json.dumps(area_rows(sys.argv[1])))
