"""The ``reasoning-replay`` evaluator: an FPGA draft design judged end to end, inside the system-A replay.

A point is a streaming draft design (the ``streaming-decode`` parameters: ``design``, ``clock_mhz``,
``<engine>.<field>``, precisions, timing constants...) placed in a system-A configuration (``config``: the PRM and
target GPUs, links, KVMU) under an FPGA-draft policy (``heteroreason`` or ``heteroreason-reprefill``), and the
first ``problems`` problems of a ``dataset``'s trace (generated with ``seed``, with or without ``backtracking``)
replayed through the discrete-event simulator (:mod:`hwmodel.reasoning`). The draft engine is the project's
:class:`fpga.streaming.engine.StreamingEngine` of that design, its per-token times simulated every ``ctx_grid`` contexts
(:class:`hwmodel.reasoning.costs.ContextSampledEngine`, as the reproduction does), and the draft's prompt-KV
migration follows the design's board and KV precision.

Metrics: latency per problem (mean and total), goodput, system energy per committed token (all devices, idle
included), the speculation-stall ratio, the communication share, the draft's utilisation, the speedup over the
three-GPU baseline replaying the same problems (computed once per process), the draft's per-token latency at
ctx 512, and the draft design's resource, HBM and timing metrics and constraints (as ``streaming-decode``).

Cost: a new draft design needs a few hundred token simulations (every ``ctx_grid`` contexts up to the longest
context the problems reach, decode and ingest) plus the replay: 1-2 s of CPU per point for 50 MATH500 problems.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from hwmodel.dse import streaming_eval as se
from hwmodel.dse.evaluators import Evaluator, Metric, Param, Screen, register
from hwmodel.dse.space import Params, Scalar

VERSION = "1"
FPGA_POLICIES = ("heteroreason", "heteroreason-reprefill")
DRAFT_CTX = 512
#: streaming-decode parameters that do not apply here (the LLM is the configuration's draft, ctx comes from the
#: replay)
_NOT_HERE = ("ctx", "llm", "design", "clock_mhz")


def _config_names() -> tuple[str, ...]:
    from hwmodel.reasoning.system import system_names

    return tuple(system_names())


def _datasets() -> tuple[str, ...]:
    from hwmodel.workload.datasets import DATASETS

    return tuple(DATASETS)


def _default_seed() -> int:
    from hwmodel.workload.generator import DEFAULT_SEED

    return DEFAULT_SEED


PARAMS: tuple[Param, ...] = (
    Param("config", str, choices=_config_names(), default="config1", doc="system-A configuration"),
    Param("policy", str, choices=FPGA_POLICIES, default="heteroreason", doc="FPGA-draft policy"),
    Param("dataset", str, choices=_datasets(), default="math500"),
    Param("problems", int, low=1, default=50, doc="first N problems of the dataset's trace"),
    Param("backtracking", bool, default=True, doc="replay the trace with backtracking"),
    Param("seed", int, low=0, default=_default_seed(), doc="trace generator seed"),
    Param("ctx_grid", int, low=1, default=16, doc="contexts between exact FPGA token simulations"),
    Param("design", str, required=False, doc="draft design (default: the configuration's)"),
    Param("clock_mhz", float, low=1.0, required=False, unit="MHz", doc="draft clock (default: the configuration's)"),
    *(p for p in se.PARAMS if p.name not in _NOT_HERE),
)

METRICS: tuple[Metric, ...] = (
    Metric("latency_per_problem_s", "s", "mean latency of a problem", low=0.0),
    Metric("latency_total_s", "s", "latency summed over the problems", low=0.0),
    Metric("goodput_tokens_per_s", "1/s", "committed tokens / latency", low=0.0),
    Metric("energy_per_token_j", "J", "all devices' energy per committed token, idle included", low=0.0),
    Metric("energy_total_j", "J", low=0.0),
    Metric("stall_ratio", "", "draft idle waiting for a verdict / latency", low=0.0, high=1.0),
    Metric("comm_share", "", "communication time / latency", low=0.0),
    Metric("util_draft", "", "draft device busy / span", low=0.0, high=1.0),
    Metric("speedup_vs_baseline", "", "three-GPU baseline latency / this latency, same problems", low=0.0),
    Metric("draft_token_s", "s", f"draft decode time of one token at ctx {DRAFT_CTX}", low=0.0),
    *(
        m
        for m in se.METRICS
        if m.name
        not in ("latency_s", "tokens_per_s", "cycles", "energy_per_token_j", "power_w", "hbm_bw_util", "ports_bw_util")
    ),
)

CONSTRAINTS = dict(se.CONSTRAINTS)


def _system(name: str) -> Any:
    from hwmodel.reasoning.system import load_system

    return load_system(name)


def _accelerator(sys_: Any) -> Any:
    """The configuration's device of the FPGA-draft policies' draft (design and clock defaults of a point)."""
    from hwmodel.reasoning.policies import policy

    return sys_.device(policy(FPGA_POLICIES[0]).draft_device)


def _stream_params(p: Params) -> Params:
    """The streaming-decode parameters of the point's draft (design and clock from the configuration if absent)."""
    sys_ = _system(str(p["config"]))
    q = {k: v for k, v in p.items() if se.EVALUATOR.param(k) is not None and k not in ("ctx", "llm")}
    q.setdefault("design", _accelerator(sys_).design)
    q.setdefault("clock_mhz", _accelerator(sys_).clock_hz / 1e6)
    q["ctx"] = DRAFT_CTX
    return se.EVALUATOR.complete(q)


def _check_space(values: Mapping[str, tuple[Scalar, ...]]) -> Iterable[tuple[str, str]]:
    configs = [_system(str(c)) for c in values.get("config", ("config1",))]
    designs = values.get("design") or tuple(_accelerator(s).design for s in configs)
    yield from se._check_space({**values, "design": designs})
    for d in designs:
        try:
            llm = se._base(str(d)).llm
        except Exception:  # noqa: BLE001 - already reported by the streaming check
            return
        for s in configs:
            if llm != s.draft_llm:
                yield "design", f"a draft design for {s.name}'s draft LLM {s.draft_llm} ({d} runs {llm})"


@functools.lru_cache(maxsize=32)
def _traces(dataset: str, config: str, seed: int, problems: int, backtracking: bool) -> tuple[Any, Any]:
    from hwmodel.reasoning.study import study_replays, study_traces

    k = 1 if backtracking else 0
    return study_traces(dataset, config, seed, problems)[k], study_replays(dataset, config, seed, problems)[k]


@functools.lru_cache(maxsize=32)
def _baseline_latency_s(dataset: str, config: str, seed: int, problems: int, backtracking: bool) -> float:
    from hwmodel.reasoning.metrics import summarize
    from hwmodel.reasoning.runner import run_trace
    from hwmodel.reasoning.system import build_platform

    trace, replays = _traces(dataset, config, seed, problems, backtracking)
    return summarize(
        run_trace(trace, "baseline", build_platform(config, "baseline"), config, replays=replays)
    ).latency_total_s


def evaluate(p: Params) -> dict[str, float]:
    """Replay the point's problems with its draft design on the FPGA (module docstring)."""
    from fpga.streaming.engine import StreamingEngine
    from hwmodel.reasoning.costs import TimedEngine
    from hwmodel.reasoning.metrics import summarize
    from hwmodel.reasoning.runner import run_trace
    from hwmodel.reasoning.system import build_platform, prompt_migrations_to
    from hwmodel.sampled import ContextSampledEngine
    from hwmodel.specs import library

    q = _stream_params(p)
    st = se._static(q)
    design = dataclasses.replace(st.design, clock_hz=st.run_hz)
    config, sys_ = str(p["config"]), _system(str(p["config"]))
    engine = StreamingEngine(design, validate=False)
    draft = TimedEngine(ContextSampledEngine(engine, int(p["ctx_grid"])), initial_ctx=0)
    base = build_platform(config, str(p["policy"]))
    board = library().board(design.board)
    platform = dataclasses.replace(
        base,
        draft=draft,
        prompt_migration=prompt_migrations_to(sys_, board.name, int(design.kv_bits)),
        device_names={
            **base.device_names,
            "draft": f"{board.display_name} ({design.name} @ {design.clock_hz / 1e6:.0f} MHz)",
        },
    )
    key = (str(p["dataset"]), config, int(p["seed"]), int(p["problems"]), bool(p["backtracking"]))
    trace, replays = _traces(*key)
    s = summarize(run_trace(trace, str(p["policy"]), platform, config, replays=replays))
    return {
        **st.exact,
        "fits_hbm": se._fits_hbm(dataclasses.replace(st.design, clock_hz=1.0)),
        "latency_per_problem_s": s.latency_mean_s,
        "latency_total_s": s.latency_total_s,
        "goodput_tokens_per_s": s.goodput_tokens_per_s,
        "energy_per_token_j": s.energy_per_token_j,
        "energy_total_j": s.energy_total_j,
        "stall_ratio": s.stall_ratio,
        "comm_share": s.comm_share,
        "util_draft": s.util_draft,
        "speedup_vs_baseline": _baseline_latency_s(*key) / s.latency_total_s,
        "draft_token_s": engine.decode_s(DRAFT_CTX),
    }


def screen(p: Params) -> Screen:
    """The draft design's resources, clocks, ports and capacity, exactly (as ``streaming-decode``)."""
    return Screen(exact=se._static(_stream_params(p)).exact)


EVALUATOR = register(
    Evaluator(
        name="reasoning-replay",
        version=VERSION,
        doc="FPGA draft designs evaluated inside the system-A reasoning replay (hwmodel.reasoning)",
        params=PARAMS,
        metrics=METRICS,
        evaluate=evaluate,
        screen=screen,
        constraints=CONSTRAINTS,
        extra_param=se._engine_param,
        check_space=_check_space,
    )
)
