"""Run a program on an instruction-driven design: the Python face of the Numba kernel
(:func:`fpga.instruction.simulator.run_program`).

:func:`simulate_program` packs a design into the kernel's int64 parameter vector (:func:`engine_params`), groups
the HBM channels into classes that receive identical request streams (:mod:`fpga.instruction.classes`), runs the
kernel from an idle machine and returns its counters as a dict. :func:`deadlock_message` is the one line both this
engine and :mod:`fpga.instruction.reference` raise when nothing can ever happen again.
"""

from __future__ import annotations

import numpy as np

from fpga.hbm import channel as hbm
from fpga.instruction.classes import engine_classes
from fpga.instruction.simulator import (
    COUNTER_NAMES,
    CT_CYCLES,
    CT_N,
    ECT_N,
    EFF_SCALE,
    ENGINE_COUNTER_NAMES,
    EP_C,
    EP_CH,
    EP_ISSUE,
    EP_MM_EFF_PPB,
    EP_MPE_PIPE,
    EP_MV_OVH,
    EP_N,
    EP_OUTSTANDING,
    EP_PORT_BYTES,
    EP_R,
    EP_REQ_LAT,
    EP_RQ_DEPTH,
    EP_SFU_LANES,
    EP_SFU_PIPE,
    EP_SYNC,
    EP_T,
    EP_UQ_DEPTH,
    run_program,
)
from hwmodel.errors import HwmodelError


def engine_params(design) -> np.ndarray:  # noqa: ANN001 (InstructionDesign)
    """The int64 parameter vector of a design for :func:`run_program`."""
    d = design
    ep = np.zeros(EP_N, dtype=np.int64)
    ep[EP_T], ep[EP_R], ep[EP_C] = d.mpe.token_lanes, d.mpe.row_lanes, d.mpe.col_lanes
    ep[EP_MPE_PIPE], ep[EP_MV_OVH] = d.mpe.pipeline_cycles, d.mpe.mv_overhead_cycles
    ep[EP_MM_EFF_PPB] = mm_efficiency_ppb(d.mpe.mm_efficiency)
    ep[EP_SFU_LANES], ep[EP_SFU_PIPE] = d.sfu.lanes, d.sfu.pipeline_cycles
    dm = d.datamover
    ep[EP_CH], ep[EP_PORT_BYTES] = dm.channels, dm.port_width_bits // 8
    ep[EP_RQ_DEPTH], ep[EP_OUTSTANDING], ep[EP_REQ_LAT] = (
        dm.request_queue_depth,
        dm.outstanding,
        dm.request_latency_cycles,
    )
    ep[EP_ISSUE], ep[EP_UQ_DEPTH] = d.scheduler.issue_cycles, d.scheduler.unit_queue_depth
    ep[EP_CH] = d.channels_per_engine  # each engine's datamover
    ep[EP_SYNC] = d.scheduler.sync_cycles
    return ep


def mm_efficiency_ppb(efficiency: float) -> int:
    return max(1, int(round(efficiency * EFF_SCALE)))


def new_hbm_state(n_classes: int) -> np.ndarray:
    return np.stack([hbm.new_channel_state() for _ in range(n_classes)])


def simulate_program(design, program, trace_instructions: int = 0):  # noqa: ANN001, ANN201
    """Run ``program`` (a Program, or a MultiProgram of one program per engine) on ``design`` from an idle machine:
    the counters of :data:`COUNTER_NAMES` plus HBM totals, and with several engines ``engines``: one dict of
    :data:`ENGINE_COUNTER_NAMES` per engine.

    With ``trace_instructions`` > 0, also returns the trace array of :func:`run_program` (``(counters, trace)``;
    one engine: its (3, n, 4) trace).
    """
    from fpga.instruction.program import flat_engines

    flat, starts, reps, eng_seg = flat_engines(program)
    ne = eng_seg.size - 1
    if ne != design.engines:
        raise HwmodelError(f"a program of {ne} engine(s) on a design of {design.engines}")
    ce = design.channels_per_engine
    cls, rep, size = engine_classes(flat, starts, eng_seg, ce)
    hp = hbm.hbm_params(design.board_spec, design.clock_hz)
    hst = new_hbm_state(rep.size)
    ct = np.zeros(CT_N, dtype=np.int64)
    ect = np.zeros((ne, ECT_N), dtype=np.int64)
    trace = np.full((ne, 3, trace_instructions, 4), -1, dtype=np.int64)
    status = run_program(flat, starts, reps, eng_seg, engine_params(design), hp, cls, rep, size, hst, ct, ect, trace)
    if status != 0:
        raise HwmodelError(deadlock_message(int(ct[CT_CYCLES]), ne))
    out = dict(zip(COUNTER_NAMES, (int(x) for x in ct)))
    out["channel_classes"] = int(rep.size)
    for name, slot in zip(hbm.CHANNEL_COUNTERS, hbm._COUNTER_SLOTS):  # noqa: SLF001
        out["hbm_" + name] = int(np.sum(hst[:, slot] * size))
    if ne > 1:
        out["engines"] = [dict(zip(ENGINE_COUNTER_NAMES, (int(x) for x in row))) for row in ect]
    if not trace_instructions:
        return out
    return out, (trace[0] if ne == 1 else trace)


def deadlock_message(cycle: int, engines: int) -> str:
    """The one line both engines raise when nothing can ever happen again."""
    if engines > 1:
        return (
            f"instruction engine deadlock at cycle {cycle}: an engine waits on a semaphore no engine will signal, "
            "or an instruction waits on one that can never run (a program bug: check its SIGNAL / WAIT pairs)"
        )
    return (
        f"instruction engine deadlock at cycle {cycle}: an instruction waits on "
        "one that can never run (a compiler bug; please report the design and context)"
    )
