"""Board power of a streaming design: static + dynamic, and energy per token.

``P = P_static(board) + k_fabric x f_MHz x sum_engines activity_e x (c . resources_e) + e_bit x 8 x HBM bytes/s``

* ``P_static``: the card with its bitstream loaded and idle (HBM refreshed, PHYs up, fans): the board TOML's
  ``static_power_w`` (fpga/boards/*.toml, with its source; U280 37.3 W, the floor of FlexLLM's on-board power log
  fpga/data/flexllm_u280_llama32_1b_power_log.csv), so a new board is one TOML file.
* Fabric dynamic power per MHz at full activity, per resource (``COEFF_UW_PER_MHZ``): DSP 3.0, LUT 0.03, FF 0.006,
  BRAM18K 1.5, URAM 3.0 uW/MHz [estimate, UltraScale+ power-estimator magnitudes at 25 % toggle]. An engine's
  activity is ``ACTIVITY_FLOOR`` (clock tree, idle toggling) plus the rest in proportion to its busy cycles in the
  simulated token.
* ``e_bit``: HBM2 access energy, 3.9 pJ/bit (O'Connor et al., "Fine-Grained DRAM", MICRO 2017) [M], times the
  simulated token's achieved bandwidth.
* ``k_fabric`` is the one free parameter, a calibration family (``calibration/fpga_power.py``, its value in
  ``calibration/params/fpga-power.json``, ``hwmodel calibrate --family fpga-power --fit``): FlexLLM's decode
  (flexllm-u280-mem-opt-new, ctx 512; see docs/streaming.md on why not the deployed design) is made to draw the
  median of the log's active samples (those above the idle floor + 2 W); :func:`fit_fabric_scale` is the same fit
  in closed form. The model then *predicts* the draft designs' power.
"""

from __future__ import annotations

import csv
import functools
import statistics
from pathlib import Path

from fpga.streaming.design import StreamingDesign
from fpga.streaming.resources import ResourceUse, estimate
from hwmodel.engine import Phase

POWER_LOG = Path(__file__).resolve().parents[1] / "data" / "flexllm_u280_llama32_1b_power_log.csv"
COEFF_UW_PER_MHZ = {"dsp": 3.0, "lut": 0.03, "ff": 0.006, "bram18k": 1.5, "uram": 3.0}
ACTIVITY_FLOOR = 0.1
HBM_PJ_PER_BIT = 3.9
REFERENCE_CTX = 512


@functools.lru_cache(maxsize=1)
def k_fabric() -> float:
    """The fitted fabric scale (calibration/params/fpga-power.json)."""
    from hwmodel.params import load_values, params_path

    return float(load_values(params_path("fpga-power"))["k_fabric"])


def static_w(board_name: str) -> float:
    """Static power of a board (its TOML's ``static_power_w``)."""
    from hwmodel.specs import library

    return float(library().board(board_name).static_power_w)


def fabric_full_w(design: StreamingDesign, use: ResourceUse | None = None) -> dict[str, float]:
    """Per engine: fabric dynamic power at 100 % activity and k_fabric = 1 (watts); ``use``: the design's resource
    estimate when the caller has it (it does not depend on the clock; a sweep reuses it across clocks)."""
    use = use if use is not None else estimate(design)
    mhz = design.clock_hz / 1e6
    return {
        name: mhz * sum(COEFF_UW_PER_MHZ[k] * v for k, v in res.items()) * 1e-6 for name, res in use.per_engine.items()
    }


def dynamic_w(
    design: StreamingDesign, token: object, scale: float | None = None, use: ResourceUse | None = None
) -> tuple[float, float]:
    """(fabric W, HBM W) while decoding ``token`` (a TokenResult) back to back; ``scale``: the fabric scale
    (default the fitted :func:`k_fabric`); ``use``: as in :func:`fabric_full_w`."""
    full = fabric_full_w(design, use)
    fabric = 0.0
    for name, w in full.items():
        ec = token.engine_cycles[name]  # type: ignore[attr-defined]
        busy = ec["busy"] / token.cycles  # type: ignore[attr-defined]
        fabric += w * (ACTIVITY_FLOOR + (1 - ACTIVITY_FLOOR) * busy)
    hbm = HBM_PJ_PER_BIT * 1e-12 * 8 * token.achieved_bw_bytes_per_s  # type: ignore[attr-defined]
    return (k_fabric() if scale is None else scale) * fabric, hbm


def token_power_w(
    design: StreamingDesign, token: object, scale: float | None = None, use: ResourceUse | None = None
) -> float:
    fab, mem = dynamic_w(design, token, scale, use)
    return static_w(design.board) + fab + mem


def phase_power_w(engine: object, phase: Phase) -> float:
    """Average power of a StreamingEngine in ``phase`` (decode/ingest/prefill at REFERENCE_CTX tokens)."""
    d: StreamingDesign = engine.design  # type: ignore[attr-defined]
    ctx = min(REFERENCE_CTX, d.max_ctx)
    if phase == Phase.DECODE:
        return token_power_w(d, engine.token(ctx))  # type: ignore[attr-defined]
    if phase in (Phase.INGEST, Phase.PREFILL):
        return token_power_w(d, engine.token(ctx, with_lm_head=False))  # type: ignore[attr-defined]
    return static_w(d.board)


def energy_per_token_j(engine: object, ctx: int) -> float:
    d: StreamingDesign = engine.design  # type: ignore[attr-defined]
    tok = engine.token(ctx)  # type: ignore[attr-defined]
    return token_power_w(d, tok) * tok.seconds


@functools.lru_cache(maxsize=1)
def power_log_w() -> tuple[float, ...]:
    with open(POWER_LOG, newline="") as fh:
        return tuple(float(r["power_W"]) for r in csv.DictReader(fh))


def active_median_w() -> float:
    """Median card power of the log's samples above the idle floor + 2 W (the running phases)."""
    samples = power_log_w()
    floor = min(samples)
    return statistics.median(s for s in samples if s > floor + 2.0)


def fit_fabric_scale() -> float:
    """k_fabric that makes flexllm-u280-mem-opt-new decode (ctx REFERENCE_CTX) draw the log's active median."""
    from fpga.streaming.engine import StreamingEngine

    eng = StreamingEngine("flexllm-u280-mem-opt-new")
    d = eng.design
    tok = eng.token(min(REFERENCE_CTX, d.max_ctx))
    fab1, mem = dynamic_w(d, tok, 1.0)
    return (active_median_w() - static_w(d.board) - mem) / fab1
