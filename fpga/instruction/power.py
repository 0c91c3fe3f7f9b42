"""Resources and board power of an instruction-driven design, on the project's FPGA power model (:mod:`fpga.streaming.power`).

Power is the same model the streaming accelerator uses, applied to this design's units (nothing is fitted here):

``P = P_static(board) + k_fabric x f_MHz x sum_units activity_u x (c . resources_u) + e_bit x 8 x HBM bytes/s``

with ``P_static``, the per-resource coefficients ``c``, the activity floor, the HBM energy per bit and ``k_fabric``
(fitted once, on FlexLLM's on-board U280 power log) taken from :mod:`fpga.streaming.power`. A unit's activity is the floor
plus the rest in proportion to its busy cycles in the simulated run (MPE, SFU: busy cycles; datamover: the port
bandwidth it used; scheduler: issue cycles over time).

Resources of the units (coefficients of :mod:`fpga.streaming.resources`, first-order, +-30 %):

* MPE: ``token x row x col`` MAC lanes at the operand precision of the board's DSP packing (W4A8 -> the int8
  packing), with adder-tree / dequantization logic per lane;
* SFU: fp32 vector lanes;
* datamover: one AXI adapter per channel and its request FIFO;
* scheduler: an instruction fetch buffer and the scoreboard (a port-sized adapter of logic, estimate);
* a design of ``engines = N``: N MPEs, SFUs, schedulers and buffer sets, the datamover channels dealt among them;
* buffers (weight, scale, zero, K/V) and the activations of one prefill token block in URAM.
"""

from __future__ import annotations

import math
from typing import Any

from fpga.instruction.design import InstructionDesign
from fpga.streaming import power, resources
from hwmodel.engine import Phase
from hwmodel.errors import HwmodelError

#: decode / prefill context used for the per-phase power of :meth:`InstructionEngine.power_w`
REFERENCE_CTX = 1024
UNITS = ("mpe", "sfu", "datamover", "scheduler")


def unit_resources(design: InstructionDesign) -> dict[str, dict[str, int]]:
    """Estimated LUT/FF/DSP/BRAM18K/URAM per unit (buffers counted with the unit that reads them)."""
    board = design.board_spec
    llm = design.llm_spec
    bits = max(design.weight_bits, design.act_bits)
    lanes = design.mpe.mm_lanes
    lut_lane = resources.LUT_PER_LANE[min(resources.LUT_PER_LANE, key=lambda b: abs(b - bits))]
    buf_bytes = design.buffers.weight_bytes + design.buffers.scale_bytes + design.buffers.zero_bytes
    block = design.tiling.prefill_token_block
    act_bytes = block * (llm.intermediate * 2 + llm.hidden * 4 + llm.q_dim)  # int8 FFN/attn inputs, fp16 residual
    mpe = {
        "lut": lut_lane * lanes,
        "ff": 2 * lut_lane * lanes,
        "dsp": math.ceil(lanes / board.dsp_packing.macs(bits)),
        "bram18k": 0,
        "uram": math.ceil((buf_bytes + act_bytes) / resources.URAM_BYTES),
    }
    v = design.sfu.lanes
    sfu = {
        "lut": resources.VECTOR_LUT_PER_LANE * v,
        "ff": 2 * resources.VECTOR_LUT_PER_LANE * v,
        "dsp": resources.VECTOR_DSP_PER_LANE * v,
        "bram18k": 0,
        "uram": math.ceil(design.buffers.kv_bytes / resources.URAM_BYTES),
    }
    dm = design.datamover
    fifo_words = math.ceil(dm.request_queue_depth * 64 / resources.BRAM18_WIDTH_BITS)
    datamover = {
        "lut": resources.PORT_LUT * dm.channels,
        "ff": resources.PORT_FF * dm.channels,
        "dsp": 0,
        "bram18k": dm.channels
        * max(1, math.ceil(fifo_words / resources.BRAM18_DEPTH))
        * math.ceil(dm.port_width_bits / resources.BRAM18_WIDTH_BITS),
        "uram": 0,
    }
    scheduler = {
        "lut": resources.PORT_LUT + resources.BASE_LUT,
        "ff": resources.PORT_FF + resources.BASE_FF,
        "dsp": 0,
        "bram18k": 4 * design.scheduler.unit_queue_depth,
        "uram": 0,
    }
    n = design.engines  # every engine has its MPE, SFU, scheduler and buffers; the channels are dealt among them
    mpe, sfu, scheduler = ({k: n * v for k, v in u.items()} for u in (mpe, sfu, scheduler))
    return {"mpe": mpe, "sfu": sfu, "datamover": datamover, "scheduler": scheduler}


def total_resources(design: InstructionDesign) -> dict[str, int]:
    per = unit_resources(design)
    return {k: sum(u[k] for u in per.values()) for k in ("lut", "ff", "dsp", "bram18k", "uram")}


def check_fits(design: InstructionDesign) -> dict[str, int]:
    """The resource estimate, or an error naming every resource the design over-uses."""
    use = total_resources(design)
    avail = design.board_spec.resources
    over = [f"{k.upper()} {use[k]:,} > {getattr(avail, k):,}" for k in use if use[k] > getattr(avail, k)]
    if over:
        raise HwmodelError(f"design '{design.name}' does not fit board '{design.board}': " + "; ".join(over))
    return use


def _unit_full_w(design: InstructionDesign) -> dict[str, float]:
    mhz = design.clock_hz / 1e6
    return {
        u: mhz * sum(power.COEFF_UW_PER_MHZ[k] * v for k, v in res.items()) * 1e-6
        for u, res in unit_resources(design).items()
    }


def activity(design: InstructionDesign, run: Any) -> dict[str, float]:
    """Busy fraction of each unit in a :class:`fpga.instruction.engine.RunResult`."""
    c = run.counters
    port_bw = design.datamover.channels * design.datamover.port_width_bits / 8 * design.clock_hz
    issue = c["instructions"] * max(design.scheduler.issue_cycles, 1)
    engine_cycles = run.cycles * design.engines  # busy counters are summed over the engines
    return {
        "mpe": c["mpe_busy_cycles"] / engine_cycles,
        "sfu": c["sfu_busy_cycles"] / engine_cycles,
        "datamover": min(1.0, run.achieved_bw_bytes_per_s / port_bw),
        "scheduler": min(1.0, issue / engine_cycles),
    }


def run_power_breakdown_w(design: InstructionDesign, run: Any) -> dict[str, float]:
    """(static, fabric, HBM) watts while ``run`` repeats back to back."""
    act = activity(design, run)
    full = _unit_full_w(design)
    fabric = sum(w * (power.ACTIVITY_FLOOR + (1 - power.ACTIVITY_FLOOR) * act[u]) for u, w in full.items())
    hbm = power.HBM_PJ_PER_BIT * 1e-12 * 8 * run.achieved_bw_bytes_per_s
    return {"static_w": power.static_w(design.board), "fabric_w": power.k_fabric() * fabric, "hbm_w": hbm}


def run_power_w(engine: Any, run: Any) -> float:
    """Average board power during ``run`` of ``engine`` (an :class:`fpga.instruction.engine.InstructionEngine`)."""
    return sum(run_power_breakdown_w(engine.design, run).values())


def phase_power_w(engine: Any, phase: Phase) -> float:
    """Average board power of ``engine`` in ``phase``: decode at :data:`REFERENCE_CTX`, prefill / ingest of one
    token block after it, static otherwise."""
    ctx = min(REFERENCE_CTX, engine.max_ctx - engine.design.tiling.prefill_token_block)
    if phase == Phase.DECODE:
        return run_power_w(engine, engine.decode(ctx))
    if phase in (Phase.PREFILL, Phase.INGEST):
        return run_power_w(
            engine, engine.prefill(engine.design.tiling.prefill_token_block, ctx, phase == Phase.PREFILL)
        )
    return power.static_w(engine.design.board)
