"""The instruction-driven FPGA model family: which quantities of ``calibration/measurements/u280_glitches.csv`` the
engine (:mod:`fpga.instruction.engine`) predicts, and how.

Quantities (subject = an instruction design name; conditions ``prefetch_ratio``, ``baseline_ratio``,
``input_tokens``, ``output_tokens``, ``ctx``):

* ``decode_s_per_token`` [s] -- mean decode step over ``output_tokens`` steps after an ``input_tokens`` prompt
  (the step at the middle of every window of ``DECODE_STRIDE`` steps simulated, the mean of those: the decode step
  is affine in the context to within 0.2 %, so this is the full mean to ~0.02 %, docs/instruction.md);
* ``decode_speedup`` [x] -- decode step at ``ctx`` cached tokens, ``baseline_ratio`` over ``prefetch_ratio``;
* ``prefill_s`` [s] -- prefill of ``input_tokens``;
* ``best_prefetch_ratio`` [ratio] -- the ratio (1..8, among those that fit the buffers) with the fastest decode
  step at ``ctx``;
* ``hbm_utilization`` [fraction] -- HBM bytes / (time x board peak) over the decode of ``decode_s_per_token``
  (role ``fitted-derived``: the bytes are fixed by the design and the time is the fitted decode point, so the
  value is an identity of the fit, not a prediction);
* ``decode_tokens_per_s_per_w`` [tokens/s/W] -- decode tokens per second per watt of board power.

Free parameters: four for four fitted points (zero degrees of freedom) -- two by least squares (below), the
requests in flight per channel picked by a profile on the same points, and the 6 MiB weight buffer inferred from
the best ratio (:data:`CHOICES`). Least-squares parameters (few and physical): the datamover's per-request latency before a request reaches the HBM
switch, and the MM-mode efficiency of the MPE (prefill). Fixed: requests in flight per channel (chosen by
:func:`profile_outstanding`, a discrete profile of the same fit), the scheduler's issue cost and the MV overhead
(not identifiable from these measurements; estimates). The least-squares fit (:mod:`calibration.fit`) needs a
model that moves with its parameters; a discrete-event model does not at the scale of a finite-difference step, so
:func:`predict` interpolates the engine linearly between grid points of the fitted parameters (1 cycle of request
latency, 0.2 % of MM efficiency). The engine itself uses the request latency rounded to a whole cycle (the decode
step moves by about 0.25 % per cycle, so a committed value differs from its rounded use by at most ~0.13 %).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from pathlib import Path

from calibration.family import Family, register
from calibration.fit import FitResult, Param, fit
from calibration.measurements import MEASUREMENTS_DIR, Measurement, expect_quantity, load_measurements
from fpga.instruction.design import CALIBRATION_FAMILY, InstructionDesign

CONDITIONS = ("prefetch_ratio", "baseline_ratio", "input_tokens", "output_tokens", "ctx")
UNITS = {
    "decode_s_per_token": "s",
    "decode_speedup": "x",
    "prefill_s": "s",
    "best_prefetch_ratio": "ratio",
    "hbm_utilization": "fraction",
    "decode_tokens_per_s_per_w": "tokens/s/W",
}
DECODE_STRIDE = 32
SWEEP_RATIOS = range(1, 9)
#: Interpolation grid of the fitted parameters (see :func:`_designs`); integer fields step by 1.
GRID = {"datamover.request_latency_cycles": 1.0, "mpe.mm_efficiency": 0.002}

PARAMS = (
    Param(
        "datamover.request_latency_cycles",
        30.0,
        0.0,
        200.0,
        "cycles",
        "datamover latency of one request before it reaches the HBM switch (descriptor, address generation, "
        "AXI interconnect); the HBM's own latency is in fpga/hbm/channel.py",
    ),
    Param("mpe.mm_efficiency", 0.8, 0.3, 1.0, "", "fraction of the MPE's MAC peak reached in MM (prefill) mode"),
)
FIXED = {"datamover.outstanding": 2.0, "scheduler.issue_cycles": 4.0, "mpe.mv_overhead_cycles": 0.0}
FIXED_DOCS = {
    "datamover.outstanding": "requests in flight per channel, chosen by profile_outstanding: with 2 the decode "
    "points fit to 0.4 %, with 3 to 1 %, with 1 or 4 they miss by 14-16 %",
    "scheduler.issue_cycles": "fetch + decode + scoreboard + dispatch per instruction [estimate]; not identifiable: "
    "decode time does not change below ~40 cycles per instruction",
    "mpe.mv_overhead_cycles": "extra MPE occupancy per MV [estimate 0]; not identifiable from these points",
}


CHOICES = {
    "datamover.outstanding": "2 requests in flight per channel, picked by profile_outstanding: the least-squares fit "
    "repeated with 1, 2, 3, 4 on the same fitted points, the best kept",
    "buffers.weight_bytes": "the 6 MiB on-chip weight buffer of the glitches-u280 design, inferred from the published "
    "best prefetch ratio 4 (the fitted point glitches-u280-best-ratio): the largest ratio "
    "that fits the buffer is the best one (docs/instruction.md)",
}


class _Family(Family):
    """The family, with its measurements in ``u280_glitches.csv``."""

    @property
    def measurements_path(self) -> Path:
        return MEASUREMENTS_DIR / "u280_glitches.csv"


@functools.lru_cache(maxsize=4)
def _base_design(name: str) -> InstructionDesign:
    """The design as its TOML says, the calibrated fields filled with the committed values or the initial ones."""
    from calibration.params import params_path
    from fpga.instruction.design import load_design

    if not params_path(CALIBRATION_FAMILY).exists():  # first fit: start from the initial values
        return load_design(name, calibrated={**FIXED, **{p.name: p.initial for p in PARAMS}})
    return load_design(name)


def _engine(design: InstructionDesign, k: int):  # noqa: ANN202
    return _engine_cached(design, k)


@functools.lru_cache(maxsize=256)
def _engine_cached(design: InstructionDesign, k: int):  # noqa: ANN202
    from fpga.instruction.engine import InstructionEngine

    return InstructionEngine(design, prefetch_ratio=k)


def _designs(values: Mapping[str, float], subject: str) -> list[tuple[float, InstructionDesign]]:
    """(weight, design) pairs whose weighted results interpolate the model multi-linearly between grid points of
    the parameters (:data:`GRID`): the engine is a discrete-event model, piecewise constant in its parameters at the
    scale of a finite-difference step, so the fit sees the interpolant."""
    base = _base_design(subject)
    out: list[tuple[float, dict[str, float]]] = [(1.0, {})]
    for name, v in values.items():
        step = GRID.get(name)
        if step is None:
            out = [(w, {**p, name: v}) for w, p in out]
            continue
        lo = math.floor(v / step + 1e-9)
        frac = v / step - lo
        nxt = []
        for w, p in out:
            nxt.append((w * (1 - frac), {**p, name: lo * step}))
            if frac > 1e-9:
                nxt.append((w * frac, {**p, name: (lo + 1) * step}))
        out = nxt
    return [(w, base.with_params(p)) for w, p in out if w > 0]


def _check(pt: Measurement) -> None:
    expect_quantity(pt, UNITS, "the instruction-FPGA model")


def decode_contexts(n_in: int, n_out: int) -> range:
    """Contexts simulated for the mean of ``n_out`` decode steps after ``n_in`` prompt tokens."""
    from hwmodel.quantities import window_contexts

    return window_contexts(n_in, n_out, DECODE_STRIDE)


def _one(design: InstructionDesign, pt: Measurement) -> float:
    k = pt.integer("prefetch_ratio", 1)
    q = pt.quantity
    llm = design.llm_spec
    if q != "prefill_s" and llm.heads == llm.kv_heads and design.mpe.mm_efficiency != 1.0:
        # a multi-head-attention decode step has no MM instruction: share the cached engines across MM efficiencies
        return _one(design.with_params({"mpe.mm_efficiency": 1.0}), pt)
    if q == "prefill_s":
        return _engine(design, k).prefill_s(pt.integer("input_tokens"))
    if q == "decode_speedup":
        ctx = pt.integer("ctx")
        return _engine(design, pt.integer("baseline_ratio", 1)).decode_s(ctx) / _engine(design, k).decode_s(ctx)
    if q == "best_prefetch_ratio":
        return float(best_ratio(design, pt.integer("ctx")))
    n_in, n_out = pt.integer("input_tokens"), pt.integer("output_tokens")
    eng = _engine(design, k)
    if q == "hbm_utilization":
        runs = [eng.decode(c) for c in decode_contexts(n_in, n_out)]
        return sum(r.hbm_bytes for r in runs) / sum(r.seconds for r in runs) / eng.board.hbm.peak_bw_bytes_per_s
    # the one implementation the API and the CLI also call
    from hwmodel.quantities import decode_window

    w = decode_window(eng, n_in, n_out)
    return w.seconds_per_token if q == "decode_s_per_token" else w.tokens_per_s_per_w


def best_ratio(design: InstructionDesign, ctx: int, ratios: range | list[int] = SWEEP_RATIOS) -> int:
    """The prefetch ratio with the fastest decode step at ``ctx`` among those that fit the buffers."""
    from fpga.instruction.prefetch import prefetch_fits

    times = {k: _engine(design, k).decode_s(ctx) for k in ratios if prefetch_fits(design, design.llm_spec, k)}
    return min(times, key=lambda k: (times[k], k))


def predict(values: Mapping[str, float], pt: Measurement) -> float:
    """The engine's value of ``pt.quantity`` for ``pt``'s conditions under parameter ``values``."""
    _check(pt)
    if pt.quantity == "best_prefetch_ratio":  # piecewise constant: no interpolation
        rounded = {n: float(round(v)) if n != "mpe.mm_efficiency" else v for n, v in values.items()}
        return _one(_designs(rounded, pt.subject)[0][1], pt)
    return sum(w * _one(d, pt) for w, d in _designs(values, pt.subject))


def profile_outstanding(
    points: list[Measurement] | None = None, candidates: tuple[int, ...] = (1, 2, 3, 4)
) -> dict[int, FitResult]:
    """The fit repeated with each candidate number of requests in flight (a discrete parameter)."""
    pts = points if points is not None else load_measurements(FAMILY.measurements_path)
    return {n: fit(pts, predict, PARAMS, fixed={**FIXED, "datamover.outstanding": float(n)}) for n in candidates}


def _reset() -> None:
    _base_design.cache_clear()
    _engine_cached.cache_clear()


def as_deployed(values: Mapping[str, float]) -> dict[str, float]:
    """The values as an InstructionDesign holds them: integer fields (cycles) rounded, as ``with_params`` does.
    The fit itself interpolates between grid points (:func:`_designs`); reports and studies run the rounded design,
    so ``hwmodel calibrate`` and ``hwmodel fpga prefetch-sweep`` print the same numbers."""
    return {n: (float(round(v)) if n in GRID and n != "mpe.mm_efficiency" else v) for n, v in values.items()}


FAMILY = register(
    _Family(
        name=CALIBRATION_FAMILY,
        rank=1,
        description="instruction-driven FPGA decode (fpga.instruction.engine): scheduler, scoreboard, datamover on the HBM "
        "channel model, MPE, SFU",
        params=PARAMS,
        fixed=dict(FIXED),
        fixed_docs=FIXED_DOCS,
        conditions=CONDITIONS,
        predict=predict,
        reset=_reset,
        choices=CHOICES,
        as_deployed=as_deployed,
    )
)

__all__ = ["FAMILY", "predict", "best_ratio", "profile_outstanding"]
