"""The streaming decode model's study: the built-in designs over contexts and the kernel-clock sweep of
draft-u280 with 512- and 256-bit ports (`hwmodel reproduce streaming`)."""

from __future__ import annotations

import functools
from typing import Any

TOKEN_FIELDS = (
    "design",
    "ctx",
    "clock_mhz",
    "cycles",
    "seconds",
    "tokens_per_s",
    "hbm_bytes",
    "achieved_bw_bytes_per_s",
    "hbm_utilization",
    "ports_utilization",
    "bandwidth_floor_s",
)


def token_row(res: Any) -> dict[str, Any]:
    """The headline figures of one simulated token (a TokenResult of fpga/streaming/engine.py), in
    :data:`TOKEN_FIELDS` order."""
    return {k: res.clock_hz / 1e6 if k == "clock_mhz" else getattr(res, k) for k in TOKEN_FIELDS}


CONTEXTS = (0, 512, 1024, 2048, 4096)  # the built-in designs at these contexts (each within its max_ctx)
CLOCK_SWEEP_CTX = 512
CLOCKS_MHZ = (150, 200, 225, 250, 300, 350, 400, 450)
POINT_FN = "hwmodel.studies.streaming:study_point"


@functools.cache
def _engine(name: str) -> Any:
    from fpga.streaming.engine import StreamingEngine

    return StreamingEngine(name)


@functools.cache
def _port_variants() -> tuple[Any, Any]:
    """draft-u280 (512-bit ports) and its 256-bit-port variant."""
    import dataclasses

    from fpga.streaming.engine import load_design

    d512 = load_design("draft-u280")
    d256 = d512.with_engine("linear", port_width_bits=256).with_engine("attn", port_width_bits=256)
    return d512, dataclasses.replace(d256, name="draft-u280-256bit")


def study_point(spec: dict[str, Any]) -> dict[str, Any]:
    """One point of the study: a built-in design's token at a context (``kind="design"``), or draft-u280's decode
    time with 512- and 256-bit ports at one kernel clock (``kind="clock"``)."""
    if spec["kind"] == "design":
        return token_row(_engine(spec["design"]).token(spec["ctx"]))
    from fpga.streaming.engine import simulate_token

    f, ctx = spec["clock_mhz"], spec["ctx"]
    d512, d256 = _port_variants()
    r512 = simulate_token(d512, ctx, clock_hz=f * 1e6)
    r256 = simulate_token(d256, ctx, clock_hz=f * 1e6)
    return {
        "clock_mhz": f,
        "ctx": ctx,
        "t512_s": r512.seconds,
        "util512": r512.hbm_utilization,
        "t256_s": r256.seconds,
        "util256": r256.hbm_utilization,
    }


def points() -> list[tuple[str, dict[str, Any]]]:
    """The study's points: every built-in design at :data:`CONTEXTS` within its context limit, then the clock
    sweep."""
    from fpga.streaming.design import design_names, load_design

    pts: list[tuple[str, dict[str, Any]]] = []
    for name in design_names():
        max_ctx = load_design(name).max_ctx
        pts += [(f"{name}@{c}", {"kind": "design", "design": name, "ctx": c}) for c in CONTEXTS if c <= max_ctx]
    pts += [(f"clock@{f}", {"kind": "clock", "clock_mhz": f, "ctx": CLOCK_SWEEP_CTX}) for f in CLOCKS_MHZ]
    return pts


def run_study(workers: int | None = 1) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The study through the one runner (:func:`hwmodel.studies.runner.run_points`): (design rows, clock-sweep
    rows), each in the order of :func:`points`; identical whatever the worker count."""
    from hwmodel.studies.runner import run_points

    pts = points()
    res = run_points(POINT_FN, pts, workers=workers, start_method="fork")
    # the runner hands results back as its journal holds them (keys sorted): put the columns back in their order
    rows = [_ordered(res.results[k]) for k, spec in pts if spec["kind"] == "design"]
    sweep = [_ordered(res.results[k], CLOCK_FIELDS) for k, spec in pts if spec["kind"] == "clock"]
    return rows, sweep


CLOCK_FIELDS = ("clock_mhz", "ctx", "t512_s", "util512", "t256_s", "util256")


def _ordered(row: dict[str, Any], fields: tuple[str, ...] = TOKEN_FIELDS) -> dict[str, Any]:
    return {k: row[k] for k in fields}
