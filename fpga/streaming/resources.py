"""FPGA resource estimate of a streaming design (DSP, LUT, FF, BRAM, URAM) and the check against its board.

First-order, per component, with the coefficients and where they come from stated below. It is meant to refuse
designs that cannot fit (twice the DSPs of the device, more buffer than the device's RAM) and to rank design
points in a sweep, not to replace a place-and-route report; expect +-30 % on LUT/FF.

* MAC lanes (engines that run matrix-vector products or attention): DSPs = lanes / MACs-per-DSP at the operand
  precision (board ``dsp_packing``: int8 -> 2 per DSP48E2 (AMD WP486), int4 -> 4, fp16 -> 0.5); plus adder-tree /
  dequantisation logic of ``LUT_PER_LANE`` LUTs and twice that in FFs per lane [estimate: a 64-wide int8 dot
  product with its adder tree in HLS takes ~1.5-2 k LUT].
* Vector lanes (RMSNorm, RoPE, SiLU, residual, sampler; fp32): 3 DSPs per lane (fp32 multiply, Vitis HLS operator
  table, UG1399) and ``VECTOR_LUT_PER_LANE`` LUTs for the fp32 adder and control [estimate].
* HBM port: ``PORT_LUT`` LUTs / ``PORT_FF`` FFs for the m_axi adapter, width converter and clock converter
  [estimate: Vitis m_axi 512-bit adapters report 2-3 k LUT]; its read buffer in BRAM18K, ceil(width / 36) wide,
  512 deep per column (UltraScale+ BRAM in 512 x 36 mode).
* KVMU (designs with ``kvmu = true``, the speculative drafts): the LUT / FF counts of the reference RTL
  fpga/kvmu/rtl/kvmu.v from yosys ``synth_xilinx -family xcup`` (UltraScale+), recorded with the yosys version and
  command in fpga/data/kvmu_rtl_resources.toml [synthesized, not estimated; no DSP or RAM]. It is a fixed block
  beside the engines (``ResourceUse.blocks``), outside the per-engine power model.
* Activations: each matrix-vector engine double-buffers its largest input vector; two-pass attention keeps
  ``max_ctx`` fp32 scores per query head of a group; the residual stream is held twice (skip connections) — all in
  URAM (288 Kb = 36,864 B each).
* Resident parameters (``onchip_params``: biases, quantization scales of the whole model, fpga/streaming/placement.py): in
  URAM, a fixed block ``onchip_params``.
"""

from __future__ import annotations

import dataclasses
import functools
import math

from fpga.streaming.design import HBM_OPS, MATVEC_OPS, DesignError, EngineSpec, StreamingDesign
from fpga.streaming.placement import onchip_param_bytes
from hwmodel.specs import BoardSpec, LlmSpec

LUT_PER_LANE = {4: 18, 8: 30, 16: 60}
VECTOR_DSP_PER_LANE = 3
VECTOR_LUT_PER_LANE = 500
PORT_LUT = 2500
PORT_FF = 4000
BASE_LUT = 10_000
BASE_FF = 15_000
URAM_BYTES = 36_864
BRAM18_DEPTH = 512
BRAM18_WIDTH_BITS = 36


@dataclasses.dataclass(frozen=True)
class ResourceUse:
    """Estimated resources of a design, in total and per engine."""

    lut: int
    ff: int
    dsp: int
    bram18k: int
    uram: int
    per_engine: dict[str, dict[str, int]]
    blocks: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)  # fixed blocks: the KVMU

    def as_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def utilization(self, board: BoardSpec) -> dict[str, float]:
        r = board.resources
        return {
            "lut": self.lut / r.lut,
            "ff": self.ff / r.ff,
            "dsp": self.dsp / r.dsp,
            "bram18k": self.bram18k / max(1, r.bram18k),
            "uram": self.uram / max(1, r.uram),
        }


def _operand_bits(design: StreamingDesign, e: EngineSpec) -> int:
    if any(op in MATVEC_OPS or op == "embed" for op in e.ops):
        return max(design.weight_bits, design.act_bits)
    return max(design.kv_bits, design.act_bits)


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def engine_resources(design: StreamingDesign, e: EngineSpec, board: BoardSpec, llm: LlmSpec) -> dict[str, int]:
    lut = ff = dsp = bram = uram_bytes = 0
    if any(op in HBM_OPS for op in e.ops):
        bits = _operand_bits(design, e)
        dsp += math.ceil(e.lanes / board.dsp_packing.macs(bits))
        lut += LUT_PER_LANE[bits] * e.lanes
        ff += 2 * LUT_PER_LANE[bits] * e.lanes
    else:
        dsp += VECTOR_DSP_PER_LANE * e.lanes
        lut += VECTOR_LUT_PER_LANE * e.lanes
        ff += 2 * VECTOR_LUT_PER_LANE * e.lanes
    if e.ports:
        lut += PORT_LUT * e.ports
        ff += PORT_FF * e.ports
        words = _cdiv(e.buffer_depth * e.burst_bytes, e.port_bytes)
        bram += e.ports * _cdiv(e.port_width_bits, BRAM18_WIDTH_BITS) * _cdiv(words, BRAM18_DEPTH)
    act_bytes = max(1, design.act_bits // 8)
    inputs = {
        "qkv": llm.hidden,
        "o_proj": llm.q_dim,
        "gate_up": llm.hidden,
        "down": llm.intermediate,
        "lm_head": llm.hidden,
    }
    widest = max((inputs[op] for op in e.ops if op in inputs), default=0)
    uram_bytes += 2 * widest * act_bytes
    if "attention" in e.ops and design.softmax == "two-pass":
        uram_bytes += (design.max_ctx + 1) * (llm.heads // llm.kv_heads) * 4
    if "attn_add" in e.ops or "ffn_add" in e.ops:
        uram_bytes += 2 * llm.hidden * 2
    return {"lut": lut, "ff": ff, "dsp": dsp, "bram18k": bram, "uram": _cdiv(uram_bytes, URAM_BYTES)}


@functools.cache
def kvmu_resources() -> dict[str, int]:
    """The KVMU's LUT / FF from the yosys synthesis of fpga/kvmu/rtl/kvmu.v (fpga/data/kvmu_rtl_resources.toml)."""
    from fpga.kvmu.verify.synth import recorded

    rec = recorded()
    return {"lut": rec["lut"], "ff": rec["ff"], "dsp": 0, "bram18k": 0, "uram": 0}


def estimate(design: StreamingDesign, board: BoardSpec | None = None, llm: LlmSpec | None = None) -> ResourceUse:
    """Resource estimate of ``design`` (see the module docstring for the coefficients)."""
    board = board or design.board_spec()
    llm = llm or design.llm_spec()
    per = {e.name: engine_resources(design, e, board, llm) for e in design.engines}
    blocks = {"kvmu": kvmu_resources()} if design.kvmu else {}
    onchip = onchip_param_bytes(design, llm)
    if onchip:  # parameters the design keeps on chip (onchip_params: biases, scales), in URAM
        blocks["onchip_params"] = {"lut": 0, "ff": 0, "dsp": 0, "bram18k": 0, "uram": _cdiv(onchip, URAM_BYTES)}
    tot = {k: sum(v[k] for v in (*per.values(), *blocks.values())) for k in ("lut", "ff", "dsp", "bram18k", "uram")}
    return ResourceUse(
        lut=tot["lut"] + BASE_LUT,
        ff=tot["ff"] + BASE_FF,
        dsp=tot["dsp"],
        bram18k=tot["bram18k"],
        uram=tot["uram"],
        per_engine=per,
        blocks=blocks,
    )


def check_fits(design: StreamingDesign, board: BoardSpec | None = None, llm: LlmSpec | None = None) -> ResourceUse:
    """The estimate, or DesignError naming every resource the design over-uses, with the numbers."""
    board = board or design.board_spec()
    use = estimate(design, board, llm)
    avail = board.resources
    over = []
    for k in ("lut", "ff", "dsp", "bram18k", "uram"):
        need, have = getattr(use, k), getattr(avail, k)
        if need > have:
            top = max(use.per_engine.items(), key=lambda kv: kv[1][k])
            over.append(f"{k.upper()} {need:,} > {have:,} (largest: engine '{top[0]}' {top[1][k]:,})")
    if over:
        raise DesignError(f"design '{design.name}' does not fit board '{board.name}': " + "; ".join(over))
    return use
