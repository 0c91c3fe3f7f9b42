"""How host time grows with work, for each simulator: measured at several sizes in one run, fitted by least squares.

    python benchmarks/bench_growth.py [--out growth.png] [--only streaming,dse,serving,system-a] [--small]

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
simulator: the sizes and host times, the fitted coefficients (per-unit costs), and the largest relative residual
of the fit (how linear the growth is); the PNG plots host time against work with the fit. Host times depend on
the machine and its load: quote them with the machine's state.
"""

from __future__ import annotations

import argparse
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
        spec.write_text(SPEC.format(clocks=s["clocks"]))
        plan = load_plan(spec)
        s["points"] = len(plan.points)
        run_sweep(plan, Path(tmp) / "out", workers=2, progress=False)


def serving_run(s: Size) -> None:
    from hwmodel.serving.scale import run_scale, scale_point

    run_scale(scale_point(nodes=s["nodes"], requests=s["requests"]))


def system_a_run(s: Size) -> None:
    import hwmodel as hw

    hw.replay(hw.generate_trace("math500", limit=s["problems"]), "heteroreason", "config1")


#: simulator -> (run, sizes (the first is the warm-up), fit terms as functions of a size, work axis, its label)
SIMULATORS: dict[
    str, tuple[Callable[[Size], None], list[Size], dict[str, Callable[[Size], float]], Callable[[Size], float], str]
] = {
    "streaming": (
        streaming_run,
        [
            {"tokens": 2, "ctx": 0},
            {"tokens": 4, "ctx": 0},
            {"tokens": 4, "ctx": 2048},
            {"tokens": 8, "ctx": 512},
            {"tokens": 8, "ctx": 4096},
            {"tokens": 16, "ctx": 1024},
        ],
        {"s per token": lambda s: s["tokens"], "s per token per context token": lambda s: s["tokens"] * s["ctx"]},
        lambda s: s["tokens"] * (s["ctx"] + 1),
        "tokens x (context + 1)",
    ),
    "dse": (
        dse_run,
        [{"clocks": 1}, {"clocks": 1}, {"clocks": 2}, {"clocks": 3}, {"clocks": 4}],
        {"s per point": lambda s: s["points"]},
        lambda s: s["points"],
        "design points",
    ),
    "serving": (
        serving_run,
        [
            {"nodes": 2, "requests": 200},
            {"nodes": 2, "requests": 1000},
            {"nodes": 8, "requests": 1000},
            {"nodes": 8, "requests": 4000},
            {"nodes": 32, "requests": 4000},
        ],
        {"s per request": lambda s: s["requests"], "s per request per node": lambda s: s["requests"] * s["nodes"]},
        lambda s: s["requests"] * s["nodes"],
        "requests x nodes",
    ),
    "system-a": (
        system_a_run,
        [{"problems": 5}, {"problems": 10}, {"problems": 20}, {"problems": 40}, {"problems": 80}],
        {"s per problem": lambda s: s["problems"]},
        lambda s: s["problems"],
        "problems",
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=Path("growth.png"), help="PNG of host time against work")
    ap.add_argument("--only", default=",".join(SIMULATORS), help="comma-separated subset of " + ", ".join(SIMULATORS))
    ap.add_argument("--small", action="store_true", help="the first three fitted sizes only (a quick check)")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = set(names) - set(SIMULATORS)
    if unknown:
        ap.error(f"--only: unknown simulator(s) {', '.join(sorted(unknown))}; choose from {', '.join(SIMULATORS)}")
    sys.path.insert(0, str(Path(__file__).resolve().parent))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.6), squeeze=False)
    for ax, name in zip(axes[0], names):
        run, sizes, terms, work, label = SIMULATORS[name]
        sizes = [dict(s) for s in sizes[: 4 if args.small else None]]
        warm = _timed(lambda: run(sizes[0]))
        times = []
        for s in sizes[1:]:
            times.append(_timed(lambda s=s: run(s)))
            print(f"{name}: {s} -> {times[-1]:.2f} s", flush=True)
        coef, resid = fit(sizes[1:], times, terms)
        per_unit = ", ".join(f"{k} {v:.3g}" for k, v in coef.items())
        print(
            f"{name}: warm-up {warm:.2f} s (not fitted); fit: {per_unit}; largest relative residual "
            f"{100 * resid:.1f} %",
            flush=True,
        )
        x = [work(s) for s in sizes[1:]]
        ax.plot(x, times, "o", label="measured")
        pred = [coef["start-up s"] + sum(coef[k] * f(s) for k, f in terms.items()) for s in sizes[1:]]
        ax.plot(x, pred, "x", label=f"fit (max resid {100 * resid:.0f} %)")  # a fit may have two terms: points
        ax.set_xlabel(label)
        ax.set_ylabel("host s")
        ax.set_title(name)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
