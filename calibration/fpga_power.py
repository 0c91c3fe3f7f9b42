"""The FPGA board-power family: what ``fpga/streaming/power.py`` (streaming designs) and ``fpga/instruction/power.py``
(instruction-driven designs) compute a card's power from, declared as a calibration family.

``P = P_static(board) + k_fabric x f_MHz x sum_units activity_u x (c . resources_u) + e_bit x 8 x HBM bytes/s``

* ``P_static`` -- the board TOML's ``static_power_w``: a *measured input* (the U280's 37.3 W is the floor of
  FlexLLM's on-board log), not a fitted parameter; energy rows state the share of the figure it is;
* ``c`` -- per-resource dynamic coefficients (DSP, LUT, FF, BRAM18K, URAM, uW/MHz at full activity) and the
  activity floor: fixed [estimate] values (``fpga/streaming/power.py``);
* ``e_bit`` -- HBM2 access energy, 3.9 pJ/bit (O'Connor et al., MICRO 2017): fixed;
* ``k_fabric`` -- the one free parameter: the scale of the fabric term, fitted to the median running power of
  FlexLLM's U280 log (``calibration/measurements/fpga-power.csv``). One point, one parameter: zero degrees of
  freedom, said so by ``hwmodel calibrate --cv``. Everything else that uses it is predicted (GLITCHES's U280
  tokens/s/W, HeteroReason's draft energy).

Quantity: ``decode_power_w`` [W] -- board power while a streaming design decodes back to back at context ``ctx``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from calibration.family import Family, register
from calibration.fit import Param
from calibration.measurements import Measurement, MeasurementError

PARAMS = (
    Param(
        "k_fabric",
        0.632,
        0.05,
        5.0,
        "",
        "scale of the per-resource fabric dynamic-power coefficients (toggle rate x the estimator's "
        "magnitudes; fpga/streaming/power.py)",
    ),
)


@functools.lru_cache(maxsize=8)
def _parts(design: str, ctx: int) -> tuple[float, float, float]:
    """(static W, fabric W at k_fabric = 1, HBM W) of ``design`` decoding at ``ctx``."""
    from fpga.streaming import power
    from fpga.streaming.engine import StreamingEngine

    eng = StreamingEngine(design)
    d = eng.design
    tok = eng.token(min(ctx, d.max_ctx))
    fab1, mem = power.dynamic_w(d, tok, 1.0)
    return power.static_w(d.board), fab1, mem


def predict(values: Mapping[str, float], pt: Measurement) -> float:
    """Board power of the streaming design ``pt.subject`` decoding at ``ctx`` under ``values``."""
    if pt.quantity != "decode_power_w" or pt.unit != "W":
        raise MeasurementError(
            f"{pt.origin}: the FPGA power family predicts decode_power_w in W; got {pt.quantity!r} in {pt.unit!r}"
        )
    static, fab1, mem = _parts(pt.subject, pt.integer("ctx"))
    return static + values["k_fabric"] * fab1 + mem


def _reset() -> None:
    from fpga.streaming import power

    power.k_fabric.cache_clear()


FAMILY = register(
    Family(
        name="fpga-power",
        rank=2,
        description="FPGA board power (fpga.streaming.power, fpga.instruction.power): measured static floor + fabric dynamic "
        "power (per-resource coefficients x activity, scaled by k_fabric) + HBM access energy",
        params=PARAMS,
        fixed={},
        fixed_docs={},
        conditions=("ctx",),
        predict=predict,
        reset=_reset,
    )
)
