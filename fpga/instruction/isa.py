"""The instruction set of the instruction-driven accelerator (FlightLLM-style LD/ST + MPE + SFU + SYS classes).

An instruction is one row of a 2-D ``int64`` array (``N_FIELDS`` columns), so a Numba kernel executes a program
without Python objects. Columns (``F_*``):

=========  ================================================================================================
OP         opcode: LD, ST (datamover), MV, MM (matrix processing engine), SFU (special functions), SYNC,
           SIGNAL, WAIT (cross-engine semaphores)
UNIT       executing unit: DM (datamover), MPE, SFU, CTRL (SYNC, SIGNAL, WAIT run in the scheduler)
TAG        LD/ST: buffer kind (BUF_*); SFU: function (SFU_*); MV/MM: which linear / attention product (OPID_*);
           SIGNAL: the engine signalled; WAIT: the engine waited for
ADDR       LD/ST: byte offset inside each HBM pseudo-channel of the first row
ASTRIDE    LD/ST: ADDR increment per repetition of the program segment (next decoder layer)
ROWS       LD/ST: rows moved; MV/MM: output rows; SFU: elements
ROW_BYTES  LD/ST: bytes per row; MV/MM: input columns (dot-product length); SFU: passes over the elements
STRIDE     LD/ST: per-channel address step between consecutive rows a channel holds; MV/MM: tokens
CH0, NCH   LD/ST: rows are dealt round-robin over NCH pseudo-channels starting at CH0 (row i -> CH0 + i mod NCH)
WAIT_DM .. scoreboard: wait until unit u has retired all its instructions up to ``pos_u - WAIT_u`` (see below);
WAIT_SFU   -1 = no dependency on unit u (SIGNAL carries them too: it fires once they are met)
GROUP      LD: number of MV/MM instructions the access serves (the coalescing ratio actually used); else 0
=========  ================================================================================================

Scoreboard encoding. ``pos_u(i)`` is the number of unit-``u`` instructions before instruction ``i`` in program
order. ``WAIT_u = L >= 0`` means: instruction ``i`` may start only when unit ``u`` has *retired* (completed, in order)
at least ``pos_u(i) - L`` instructions. The encoding is relative, so a program segment repeated for every decoder
layer carries the same fields in every repetition (what lets the engine fast-forward identical layers).

A datamover instruction is split by the hardware into one *request* (access) per pseudo-channel it touches:
request ``j`` (``0 <= j < NCH``) goes to channel ``(CH0 + j) mod C`` (``C``: the datamover's channels) and carries
rows ``j, j + NCH, ...`` of the instruction, i.e. ``ceil((ROWS - j) / NCH)`` rows, from per-channel address
``ADDR + ((CH0 + j) div C) * STRIDE``; they are contiguous when ``STRIDE == ROW_BYTES`` (one burst train) and
separate rows otherwise.

Semaphores (designs of several engines, :mod:`fpga.instruction.placement`). Each ordered pair of engines (a, b) has
a counting semaphore. ``SIGNAL`` on engine a with TAG b goes into a's signal queue when issued and *fires* (in
order, one per cycle) once its scoreboard waits are met: the data it publishes has been computed; the count of
(a, b) goes up ``scheduler.sync_cycles`` later. ``WAIT`` on engine b with TAG a stalls b's scheduler until the count
of (a, b) is positive, then takes one. ROWS of a SIGNAL/WAIT: the bytes of the activation slice it publishes.
"""

from __future__ import annotations

import numpy as np

# ---- columns
F_OP, F_UNIT, F_TAG, F_ADDR, F_ASTRIDE, F_ROWS, F_ROW_BYTES, F_STRIDE, F_CH0, F_NCH = range(10)
F_WAIT_DM, F_WAIT_MPE, F_WAIT_SFU, F_GROUP = range(10, 14)
N_FIELDS = 14
FIELD_NAMES = (
    "op",
    "unit",
    "tag",
    "addr",
    "astride",
    "rows",
    "row_bytes",
    "stride",
    "ch0",
    "nch",
    "wait_dm",
    "wait_mpe",
    "wait_sfu",
    "group",
)
F_COLS = F_ROW_BYTES  # MV/MM: input columns
F_TOKENS = F_STRIDE  # MV/MM: tokens
F_PASSES = F_ROW_BYTES  # SFU: passes over the elements

# ---- opcodes
OP_LD, OP_ST, OP_MV, OP_MM, OP_SFU, OP_SYNC, OP_SIGNAL, OP_WAIT = 1, 2, 3, 4, 5, 6, 7, 8
OP_NAMES = {
    OP_LD: "LD",
    OP_ST: "ST",
    OP_MV: "MV",
    OP_MM: "MM",
    OP_SFU: "SFU",
    OP_SYNC: "SYNC",
    OP_SIGNAL: "SIGNAL",
    OP_WAIT: "WAIT",
}

# ---- units (the scoreboard tracks DM, MPE, SFU; CTRL = SYNC, executed by the scheduler itself)
UNIT_DM, UNIT_MPE, UNIT_SFU, UNIT_CTRL = 0, 1, 2, 3
N_UNITS = 3
UNIT_NAMES = ("DM", "MPE", "SFU", "CTRL")
WAIT_FIELDS = (F_WAIT_DM, F_WAIT_MPE, F_WAIT_SFU)
OP_UNIT = {
    OP_LD: UNIT_DM,
    OP_ST: UNIT_DM,
    OP_MV: UNIT_MPE,
    OP_MM: UNIT_MPE,
    OP_SFU: UNIT_SFU,
    OP_SYNC: UNIT_CTRL,
    OP_SIGNAL: UNIT_CTRL,
    OP_WAIT: UNIT_CTRL,
}

# ---- LD/ST buffer kinds
BUF_WEIGHT, BUF_SCALE, BUF_ZERO, BUF_KV, BUF_ACT = 0, 1, 2, 3, 4
BUF_NAMES = ("weight", "scale", "zero", "kv", "act")

# ---- SFU functions
SFU_RMSNORM, SFU_ROPE, SFU_SOFTMAX, SFU_SILU_MUL, SFU_ADD, SFU_QUANT = range(6)
SFU_NAMES = ("rmsnorm", "rope", "softmax", "silu_mul", "add", "quant")

# ---- what an MV/MM computes (TAG of MV/MM)
MATMUL_NAMES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj", "lm_head", "qk", "pv")
OPID = {name: i for i, name in enumerate(MATMUL_NAMES)}


def empty(n: int) -> np.ndarray:
    """A program of ``n`` zeroed instructions with no dependencies."""
    prog = np.zeros((n, N_FIELDS), dtype=np.int64)
    prog[:, list(WAIT_FIELDS)] = -1
    return prog


def channel_rows(rows: int, nch: int) -> np.ndarray:
    """Rows each of the ``nch`` channels of a datamover instruction receives (round-robin deal)."""
    j = np.arange(nch, dtype=np.int64)
    return np.maximum((rows - j + nch - 1) // nch, 0)


def request_bytes(instr: np.ndarray) -> np.ndarray:
    """Bytes of each per-channel request (access) of one LD/ST instruction, in channel order CH0, CH0+1, ..."""
    if instr[F_OP] not in (OP_LD, OP_ST):
        raise ValueError("request_bytes: not a datamover instruction")
    return channel_rows(int(instr[F_ROWS]), int(instr[F_NCH])) * int(instr[F_ROW_BYTES])


def describe(instr: np.ndarray) -> str:
    """One instruction as assembly text (for `hwmodel fpga instruction dump`)."""
    op = int(instr[F_OP])
    name = OP_NAMES.get(op, f"?{op}")
    waits = ",".join(f"{UNIT_NAMES[u]}-{int(instr[f])}" for u, f in enumerate(WAIT_FIELDS) if instr[f] >= 0)
    deps = f"  wait[{waits}]" if waits else ""
    if op in (OP_LD, OP_ST):
        per_ch = request_bytes(instr)
        size = (
            f"{int(per_ch.max())} B/ch"
            if per_ch.min() == per_ch.max()
            else f"{int(per_ch.min())}-{int(per_ch.max())} B/ch"
        )
        body = (
            f"{BUF_NAMES[int(instr[F_TAG])]:6s} rows={int(instr[F_ROWS])} x {int(instr[F_ROW_BYTES])} B "
            f"ch={int(instr[F_CH0])}+{int(instr[F_NCH])} addr=0x{int(instr[F_ADDR]):x} ({size})"
        )
        if op == OP_LD and instr[F_GROUP] > 1:
            body += f" coalesced x{int(instr[F_GROUP])}"
    elif op in (OP_MV, OP_MM):
        body = (
            f"{MATMUL_NAMES[int(instr[F_TAG])]:9s} rows={int(instr[F_ROWS])} cols={int(instr[F_COLS])} "
            f"tokens={int(instr[F_TOKENS])}"
        )
    elif op == OP_SFU:
        body = f"{SFU_NAMES[int(instr[F_TAG])]:9s} elements={int(instr[F_ROWS])} passes={int(instr[F_PASSES])}"
    elif op in (OP_SIGNAL, OP_WAIT):
        body = f"{'to' if op == OP_SIGNAL else 'for'} engine {int(instr[F_TAG])} ({int(instr[F_ROWS])} B)"
    else:
        body = ""
    return f"{name:4s} {body}{deps}"


def disassemble(prog: np.ndarray) -> list[str]:
    return [describe(row) for row in prog]
