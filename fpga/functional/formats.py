"""Fixed-point formats, constants and lookup tables of the W8A8 datapath (docs/w8a8.md, sections 2 and 3).

Tables and constants are built once at load time in IEEE float64 with numpy, rounded half to even
(``numpy.rint``); at run time only their integer values are used.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Fractional bits of each fixed-point quantity (docs/w8a8.md, section 3).
F_R = 12  # residual stream
F_A = 12  # q, k, v, attention output
F_M = 12  # gate, up, SiLU
F_S = 12  # attention scores (also the exp2 table's index width)
F_L = 12  # logits
F_T = 14  # RoPE cos/sin tables
F_P = 15  # softmax numerators and sigmoid (Q0.15)

EXP2_BITS = F_S
SIG_STEP_BITS = 6  # sigmoid table step 2**-6
SIG_RANGE = 16  # sigmoid table covers [-16, 16]
L2E = int(np.rint(math.log2(math.e) * 2**15))  # 47274
EPS_BITS = 40
#: Largest context an int32 P.V accumulator holds: T * 127 * 127 < 2**31.
MAX_CONTEXT = (2**31 - 1) // (127 * 127)


@dataclass(frozen=True)
class Scale:
    """A load-time constant as a 15-bit mantissa and a power-of-two exponent: ``m * 2**e``."""

    m: int
    e: int


def frexp15(value: float) -> Scale:
    """``value`` (float64, >= 0) as ``rint(f * 2**15) * 2**(E - 15)`` where ``value = f * 2**E``, ``0.5 <= f < 1``."""
    if value == 0.0:
        return Scale(0, 0)
    f, e = math.frexp(float(value))
    return Scale(int(np.rint(f * 2**15)), e - 15)


def qk_constant(head_dim: int) -> Scale:
    """C_QK = 1 / (127**2 * sqrt(head_dim)): the query scale's factor for attention scores."""
    return frexp15(1.0 / (16129.0 * math.sqrt(head_dim)))


PV_CONSTANT = frexp15(1.0 / 16129.0)


def eps_fix(rms_norm_eps: float) -> int:
    """RMSNorm epsilon in units of 2**-40."""
    return int(np.rint(np.float64(rms_norm_eps) * 2.0**EPS_BITS))


def exp2_table() -> np.ndarray:
    """EXP2[f] = rint(2**15 * 2**(-f / 4096)), f = 0..4095 (int32)."""
    f = np.arange(2**EXP2_BITS, dtype=np.float64)
    return np.rint(2.0**15 * np.exp2(-f / 2**EXP2_BITS)).astype(np.int32)


def sigmoid_table() -> np.ndarray:
    """SIG[j] = rint(2**15 / (1 + exp(16 - j / 64))), j = 0..2048 (int32)."""
    j = np.arange(2 * SIG_RANGE * 2**SIG_STEP_BITS + 1, dtype=np.float64)
    return np.rint(2.0**15 / (1.0 + np.exp(SIG_RANGE - j / 2**SIG_STEP_BITS))).astype(np.int32)


def rope_tables(head_dim: int, rope_theta: float, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """COS, SIN (positions x head_dim/2, int32 in Q1.14) of the half-rotation RoPE (Hugging Face Qwen2)."""
    i = np.arange(head_dim // 2, dtype=np.float64)
    inv_freq = np.float64(rope_theta) ** (-(2.0 * i) / head_dim)
    angle = np.arange(positions, dtype=np.float64)[:, None] * inv_freq[None, :]
    scale = 2.0**F_T
    return np.rint(np.cos(angle) * scale).astype(np.int32), np.rint(np.sin(angle) * scale).astype(np.int32)
