"""One implementation per reported quantity: the power, energy, efficiency, latency and throughput figures that the
API (:mod:`hwmodel.api`), the CLI (``--json``), the validation rows (:mod:`calibration`) and the docs print.

Every figure here is computed from an engine's own model, never typed:

* :func:`decode_power_w` -- board power while decoding one token **at the given context** (the GPU model's
  ``decode_power_w(ctx)``; the instruction-driven FPGA's power model over the simulated run at ``ctx``; the
  streaming FPGA's power model over the token at ``ctx``); engines with only a per-phase power fall back to
  ``power_w(Phase.DECODE)`` (their reference point);
* :func:`prefill_power_w` -- board power during a prefill of ``n_tokens`` after ``ctx``;
* :func:`decode_point` -- one decode step at ``ctx``: seconds, tokens/s, power, energy per token, tokens/s/W;
* :func:`decode_window` -- the mean over a generation of ``output_tokens`` decode steps after an ``input_tokens``
  prompt, the way published single-device figures are quoted (GLITCHES' "decode ms/token" and "token/s/W" after a
  1,536-token prefill): mean step time, energy-weighted power, tokens per joule. GPU engines evaluate every step
  (vectorized); other engines simulate the step at the middle of every window of :data:`DECODE_STRIDE` steps (the
  decode step is affine in the context to within 0.2 % on the instruction-driven FPGA, docs/instruction.md).

A test (``tests/test_quantities.py``) checks that the API, the CLI's ``--json`` and the validation row of the same
point agree over GPU, streaming and instruction-driven engines.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hwmodel.engine import Phase
from hwmodel.errors import HwmodelError

#: decode steps per simulated step in :func:`decode_window` for engines without a vectorized decode
DECODE_STRIDE = 32


def _inner(eng: Any) -> Any:
    """The engine behind a wrapper: context sampling (:class:`hwmodel.sampled.ContextSampledEngine`, whose times
    are interpolated but whose power is the engine's)."""
    from hwmodel.sampled import ContextSampledEngine

    while isinstance(eng, ContextSampledEngine):
        eng = eng.engine
    return eng


def engine_kind(eng: Any) -> str:
    """ "gpu", "instruction", "streaming" or "other": which power model answers for this engine."""
    e = _inner(eng)
    if hasattr(e, "decode_power_w") and hasattr(e, "decode_energy_j"):
        return "gpu"
    mod = type(e).__module__
    if mod == "fpga.instruction.engine":
        return "instruction"
    if mod == "fpga.streaming.engine":
        return "streaming"
    return "other"


def _phase_power(eng: Any, phase: Phase) -> float:
    try:
        return float(eng.power_w(phase))
    except (AttributeError, NotImplementedError):
        return math.nan


def decode_power_w(eng: Any, ctx: int) -> float:
    """Board power (W) while decoding one token after ``ctx`` cached tokens."""
    e, kind = _inner(eng), engine_kind(eng)
    if kind == "gpu":
        return float(e.decode_power_w(ctx))
    if kind == "instruction":
        from fpga.instruction.power import run_power_w

        return float(run_power_w(e, e.decode(ctx)))
    if kind == "streaming":
        from fpga.streaming.power import token_power_w

        return float(token_power_w(e.design, e.token(ctx)))
    return _phase_power(eng, Phase.DECODE)


def prefill_power_w(eng: Any, n_tokens: int, ctx: int = 0) -> float:
    """Board power (W) during a prefill of ``n_tokens`` new tokens after ``ctx`` cached ones."""
    e, kind = _inner(eng), engine_kind(eng)
    if kind == "gpu":
        return float(e.prefill_cost(n_tokens, ctx).power_w)
    if kind == "instruction":
        from fpga.instruction.power import run_power_w

        return float(run_power_w(e, e.prefill(n_tokens, ctx)))
    return _phase_power(eng, Phase.PREFILL)  # the streaming design streams a prefill token by token: its phase power


@dataclasses.dataclass(frozen=True)
class DecodeFigures:
    """Decode figures of one engine: a single step (``input_tokens`` = context, ``output_tokens`` = 1) or the mean
    over a generation window (fields and units: :mod:`hwmodel.result_fields`)."""

    engine: str
    input_tokens: int
    output_tokens: int
    seconds_per_token: float
    power_w: float
    steps_simulated: int

    @property
    def tokens_per_s(self) -> float:
        return 1.0 / self.seconds_per_token

    @property
    def energy_per_token_j(self) -> float:
        return self.seconds_per_token * self.power_w

    @property
    def tokens_per_s_per_w(self) -> float:
        return 1.0 / self.energy_per_token_j

    def to_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "tokens_per_s": self.tokens_per_s,
            "energy_per_token_j": self.energy_per_token_j,
            "tokens_per_s_per_w": self.tokens_per_s_per_w,
        }


def decode_point(eng: Any, ctx: int) -> DecodeFigures:
    """One decode step after ``ctx`` cached tokens."""
    if ctx < 0:
        raise HwmodelError(f"ctx must be >= 0, got {ctx}")
    return DecodeFigures(str(eng.name), int(ctx), 1, float(eng.decode_s(ctx)), decode_power_w(eng, ctx), 1)


def window_contexts(input_tokens: int, output_tokens: int, stride: int = DECODE_STRIDE) -> range:
    """Contexts simulated for the mean of ``output_tokens`` decode steps after ``input_tokens`` prompt tokens: the
    middle step of every window of ``stride`` steps."""
    return range(input_tokens + min(stride, output_tokens) // 2, input_tokens + output_tokens, stride)


def decode_window(eng: Any, input_tokens: int, output_tokens: int, stride: int = DECODE_STRIDE) -> DecodeFigures:
    """The mean decode figures of ``output_tokens`` steps after an ``input_tokens`` prompt (steps at contexts
    ``input_tokens .. input_tokens + output_tokens - 1``; one simulated step per ``stride`` on engines without a
    vectorized decode)."""
    if input_tokens < 0 or output_tokens < 1:
        raise HwmodelError(
            f"a decode window needs input_tokens >= 0 and output_tokens >= 1, got {input_tokens} and {output_tokens}"
        )
    e = _inner(eng)
    if engine_kind(eng) == "gpu":
        import numpy as np

        steps = np.asarray(e.decode_steps_s(input_tokens, output_tokens), dtype=float)
        total_s = float(np.sum(steps))
        power = float(e.decode_energy_j(input_tokens, output_tokens)) / total_s
        return DecodeFigures(str(eng.name), input_tokens, output_tokens, float(np.mean(steps)), power, output_tokens)
    ctxs = window_contexts(input_tokens, output_tokens, stride)
    times = [float(eng.decode_s(c)) for c in ctxs]
    energy = sum(decode_power_w(eng, c) * t for c, t in zip(ctxs, times, strict=True))
    return DecodeFigures(
        str(eng.name), input_tokens, output_tokens, sum(times) / len(times), energy / sum(times), len(times)
    )


def prefill_figures(eng: Any, n_tokens: int, ctx: int = 0) -> dict[str, float]:
    """A prefill's ``seconds``, ``power_w``, ``energy_j`` and ``tokens_per_s``."""
    if n_tokens < 1 or ctx < 0:
        raise HwmodelError(f"prefill needs n_tokens >= 1 and ctx >= 0, got {n_tokens} and {ctx}")
    s = float(eng.prefill_s(n_tokens, ctx))
    p = prefill_power_w(eng, n_tokens, ctx)
    return {"seconds": s, "power_w": p, "energy_j": s * p, "tokens_per_s": n_tokens / s}
