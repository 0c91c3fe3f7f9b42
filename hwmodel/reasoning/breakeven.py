"""When does the FPGA draft (T1) pay off? T1+T2 speedup over T2 alone versus the draft's decode time per token,
with the break-even marked (issue 17; docs/reasoning.md "T1 break-even").

Two families of points, replayed on the same traces (configuration 1 by default, with backtracking, the first
``limit`` problems of each dataset):

* **design points** -- the published-like draft (FlexLLM's deployed design adapted to Qwen2.5-0.5B W8A8,
  ``fpga/designs/flexllm-draft-u280.toml``) with its linear engine's MACs, its attention MACs, its weight ports, its
  clock and its board varied, each simulated by the cycle-level streaming model (per-token times every
  :data:`DESIGN_CTX_GRID` contexts); plus our own optimized ``draft-u280``;
* **speed points** -- ``draft-u280``'s own per-token times (decode, ingest, prefill) multiplied by a factor
  (:class:`ScaledDraft`), at its own power per phase, so energy scales with time: a dense, monotone curve on which
  the break-even is found by linear interpolation between the two factors that bracket a speedup of 1.

The x axis is the draft's mean decode time per token over contexts 0..1023 (where the drafted tokens of the four
datasets mostly fall: prompts of 100-150 tokens, answers of 300-650). T2 replays the same problems with the draft on
the baseline's GPU server. Nothing here is fitted; the study reads no published value.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hwmodel.engine import Capability, Phase
from hwmodel.reasoning.costs import TimedEngine
from hwmodel.reasoning.metrics import summarize
from hwmodel.reasoning.platform import Platform
from hwmodel.reasoning.runner import run_trace
from hwmodel.workload.datasets import DATASETS
from hwmodel.workload.generator import DEFAULT_SEED

X_CTX = 1024  # the x axis: mean decode time per token over contexts 0 .. X_CTX - 1
DESIGN_CTX_GRID = 64  # design points: contexts between exact token simulations (the reproduction's draft uses 16)
SPEED_FACTORS = (0.75, 1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0)
#: (label, engine field changes {engine: {field: value}}, clock_hz, board) of the design points
DESIGN_POINTS: tuple[tuple[str, dict[str, dict[str, Any]], float, str], ...] = (
    ("FlexLLM-derived (as published: 1,024 MACs, 16 ports), 200 MHz", {}, 200e6, "u280"),
    ("FlexLLM-derived, 300 MHz projection", {}, 300e6, "u280"),
    ("FlexLLM-derived, 512 linear MACs", {"linear": {"lanes": 512}}, 200e6, "u280"),
    ("FlexLLM-derived, 2,048 linear MACs", {"linear": {"lanes": 2048}}, 200e6, "u280"),
    ("FlexLLM-derived, 8 weight ports", {"linear": {"ports": 8}}, 200e6, "u280"),
    ("FlexLLM-derived, 4x attention MACs", {"attn": {"lanes": 256}}, 200e6, "u280"),
    ("FlexLLM-derived, 4x attention MACs, 300 MHz", {"attn": {"lanes": 256}}, 300e6, "u280"),
    ("FlexLLM-derived on V80, 300 MHz", {}, 300e6, "v80"),
)


class ScaledDraft:
    """A draft device whose every time is ``factor`` x a built draft's (:class:`TimedEngine`), at the same power
    per phase (a speed point of the study; not a design)."""

    CAPABILITIES = frozenset(
        {Capability.DECODER, Capability.PREFILLER, Capability.INGESTER, Capability.POWERED, Capability.CONTEXT_BOUND}
    )

    def __init__(self, base: TimedEngine, factor: float) -> None:
        if not factor > 0:
            raise ValueError(f"speed factor must be > 0, got {factor}")
        self.base, self.factor = base, float(factor)
        self.name = f"{base.name} x{factor:g}"
        self.max_ctx = base.max_ctx

    def decode_steps_s(self, ctx0: int, n: int) -> list[float]:
        self.base.decode_span_s(ctx0, n)
        cum = self.base.cum_table
        return [(cum[c + 1] - cum[c]) * self.factor for c in range(ctx0, ctx0 + n)]

    def decode_s(self, ctx: int) -> float:
        return self.base.decode_span_s(ctx, 1) * self.factor

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        return float(self.base.ingest_times(ctx, n_tokens).sum()) * self.factor

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        return self.base.prefill_s(n_tokens, ctx) * self.factor

    def power_w(self, phase: Phase) -> float:
        return self.base.power_w(phase)


def mean_token_s(engine: TimedEngine, ctx_hi: int = X_CTX) -> float:
    """The x axis: mean decode time per token over contexts 0 .. ctx_hi - 1."""
    return engine.decode_span_s(0, ctx_hi) / ctx_hi


_DESIGN_ENGINES: dict[str, TimedEngine] = {}  # design_engine's memo (per process)


def design_engine(
    changes: dict[str, dict[str, Any]], clock_hz: float, board: str, design: str = "flexllm-draft-u280"
) -> TimedEngine:
    """The cycle-level streaming draft of ``design`` with engine fields changed, at ``clock_hz`` on ``board``
    (memoized per process, so the reproduction's warm-up and the study share its per-token samples)."""
    key = json.dumps([design, changes, float(clock_hz), board], sort_keys=True)
    te = _DESIGN_ENGINES.get(key)
    if te is None:
        te = _DESIGN_ENGINES[key] = _build_design_engine(changes, clock_hz, board, design)
    return te


def _build_design_engine(changes: dict[str, dict[str, Any]], clock_hz: float, board: str, design: str) -> TimedEngine:
    from fpga.streaming import engine as streaming
    from hwmodel.sampled import ContextSampledEngine

    d = streaming.load_design(design)
    unknown = set(changes) - {e.name for e in d.engines}
    if unknown:
        raise ValueError(f"design {design} has no engine {sorted(unknown)}")
    engines = tuple(dataclasses.replace(e, **changes.get(e.name, {})) for e in d.engines)
    d = dataclasses.replace(d, engines=engines, board=board)
    # tables filled on demand (initial_ctx=0): the same canonical chunks as a table built at once, so the same times
    return TimedEngine(
        ContextSampledEngine(streaming.StreamingEngine(d, clock_hz=clock_hz), DESIGN_CTX_GRID, prefill="tokenwise"),
        initial_ctx=0,
    )


@dataclasses.dataclass(frozen=True)
class BreakEvenPoint:
    series: str  # "design" (a simulated design) or "speed" (draft-u280 with its times scaled)
    label: str
    token_s: float  # the x axis
    latency_total_s: float
    speedup_over_t2: float  # T2 latency / T1+T2 latency, same problems
    energy_ratio_to_t2: float  # energy per token T1+T2 / T2

    def as_row(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class BreakEven:
    config: str
    problems: int
    t2_token_s: float  # the GPU draft's x value (T2's draft)
    t2_latency_total_s: float
    points: tuple[BreakEvenPoint, ...]
    breakeven_token_s: float  # x at which T1+T2 is as fast as T2 (nan if not bracketed)
    breakeven_energy_ratio: float  # energy ratio there (interpolated)

    def rows(self) -> list[dict[str, Any]]:
        return [p.as_row() for p in self.points]


def _crossing(points: Sequence[BreakEvenPoint]) -> tuple[float, float]:
    """Linear interpolation of (x, energy ratio) where the speed curve's speedup crosses 1."""
    pts = sorted(points, key=lambda p: p.token_s)
    for a, b in zip(pts, pts[1:]):
        if (a.speedup_over_t2 - 1.0) * (b.speedup_over_t2 - 1.0) <= 0 and a.speedup_over_t2 != b.speedup_over_t2:
            w = (a.speedup_over_t2 - 1.0) / (a.speedup_over_t2 - b.speedup_over_t2)
            return (
                a.token_s + w * (b.token_s - a.token_s),
                a.energy_ratio_to_t2 + w * (b.energy_ratio_to_t2 - a.energy_ratio_to_t2),
            )
    return math.nan, math.nan


def warm_targets(
    *,
    config: str = "config1",
    datasets: Sequence[str] = DATASETS,
    seed: int = DEFAULT_SEED,
    limit: int | None = 25,
    designs: Sequence[tuple[str, dict[str, dict[str, Any]], float, str]] = DESIGN_POINTS,
    build: Any = None,
    bound_limit: int | None | bool = False,
) -> list[tuple[TimedEngine, int]]:
    """(timed engine, context bound) of the cycle-level drafts :func:`run_breakeven` with the same arguments
    replays on (:mod:`hwmodel.reasoning.warmup` simulates their samples ahead, over the study's workers).

    ``bound_limit``: bound the contexts by the traces cut at this limit instead of ``limit`` (the reproduction
    passes its study's, whose traces it has already generated and which hold at least the break-even's problems;
    a sample the bound misses is simulated on demand)."""
    from hwmodel.reasoning.study import study_replays, study_traces
    from hwmodel.reasoning.warmup import context_bound

    if build is None:
        from hwmodel.reasoning.system import build_platform as build
    lim = limit if bound_limit is False else bound_limit
    bound = max(
        [X_CTX]
        + [
            context_bound(study_traces(d, config, seed, lim)[1].problems, study_replays(d, config, seed, lim)[1])
            for d in datasets
        ]
    )
    out = [(build(config, "heteroreason").draft, bound)]
    out += [(design_engine(changes, clock, board), bound) for _label, changes, clock, board in designs]
    return out


def run_breakeven(
    *,
    config: str = "config1",
    datasets: Sequence[str] = DATASETS,
    seed: int = DEFAULT_SEED,
    limit: int | None = 25,
    factors: Sequence[float] = SPEED_FACTORS,
    designs: Sequence[tuple[str, dict[str, dict[str, Any]], float, str]] = DESIGN_POINTS,
    build: Any = None,
) -> BreakEven:
    """The study (module docstring). ``build(config, policy, draft=None) -> Platform`` (default: the system's
    :func:`~hwmodel.reasoning.system.build_platform`; tests pass their own)."""
    from hwmodel.reasoning.study import study_traces

    if build is None:
        from hwmodel.reasoning.system import build_platform as build
    traces = [study_traces(d, config, seed, limit)[1] for d in datasets]

    def replay(policy: str, pf: Platform) -> tuple[float, float]:
        rows = [r for t in traces for r in run_trace(t, policy, pf, config)]
        s = summarize(rows)
        return s.latency_total_s, s.energy_per_token_j

    t2_pf = build(config, "step-ahead")
    t2_lat, t2_ept = replay("step-ahead", t2_pf)
    points: list[BreakEvenPoint] = []

    def add(series: str, label: str, pf: Platform) -> None:
        lat, ept = replay("heteroreason", pf)
        points.append(BreakEvenPoint(series, label, mean_token_s(pf.draft), lat, t2_lat / lat, ept / t2_ept))

    hr = build(config, "heteroreason")
    for f in factors:
        add("speed", f"draft-u280 times x{f:g}", dataclasses.replace(hr, draft=TimedEngine(ScaledDraft(hr.draft, f))))
    add("design", "draft-u280 (our optimized design), 200 MHz", hr)
    for label, changes, clock, board in designs:
        base = build(config, "heteroreason", draft="fpga-v80" if board == "v80" else None)
        pf = dataclasses.replace(base, draft=design_engine(changes, clock, board))
        add("design", label, pf)
    x, e = _crossing([p for p in points if p.series == "speed"])
    return BreakEven(
        config, sum(len(t.problems) for t in traces), mean_token_s(t2_pf.draft), t2_lat, tuple(points), x, e
    )


def write_plot(path: Path, study: BreakEven) -> None:
    """T1+T2 speedup over T2 vs the draft's decode time per token, break-even marked (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5), dpi=110)
    sp = sorted((p for p in study.points if p.series == "speed"), key=lambda p: p.token_s)
    ax.plot(
        [1e3 * p.token_s for p in sp],
        [p.speedup_over_t2 for p in sp],
        "-o",
        color="tab:blue",
        ms=3,
        label="draft-u280, times scaled",
    )
    for p in study.points:
        if p.series == "design":
            ax.plot(1e3 * p.token_s, p.speedup_over_t2, "s", color="tab:orange", ms=5)
            ax.annotate(
                p.label.replace("FlexLLM-derived", "FL"),
                (1e3 * p.token_s, p.speedup_over_t2),
                fontsize=6,
                xytext=(3, 3),
                textcoords="offset points",
            )
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.axvline(1e3 * study.t2_token_s, color="tab:green", ls=":", label="T2's GPU draft (vLLM on RTX 3090)")
    if not math.isnan(study.breakeven_token_s):
        ax.axvline(
            1e3 * study.breakeven_token_s,
            color="tab:red",
            ls="--",
            label=f"break-even {1e3 * study.breakeven_token_s:.2f} ms/token",
        )
    ax.set_xlabel(f"FPGA draft decode time per token, mean over contexts 0-{X_CTX - 1} (ms)")
    ax.set_ylabel("T1+T2 speedup over T2 (latency)")
    ax.set_title(f"T1 break-even, {study.config}, with backtracking, {study.problems} problems", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
