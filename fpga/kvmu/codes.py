"""Codes shared by the KVMU's Python face, its Numba kernel, the command-file reader and the VCD writer:
opcodes, modes, mux selects, status codes, and the one-line text of every refusal.

The numbering is the hardware encoding: the kernel works on these integers (plain module-level ints, which Numba
freezes as constants), the face and the reports on the IntEnums.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np


class Op(IntEnum):
    """Command opcodes. INIT..ROLLBACK select the four modes of the spec; INGEST and MARK are the two
    commands the spec's register rules need to be driven (see the transition table in :mod:`fpga.kvmu.model`);
    WAIT is no command at all: the command bus is idle for ``arg`` cycles."""

    INIT = 0
    SPECULATE = 1
    ACCEPT = 2
    ROLLBACK = 3
    INGEST = 4
    MARK = 5
    WAIT = 6


class Mode(IntEnum):
    """The four KVMU modes (2-bit register)."""

    INIT = 0
    SPECULATE = 1
    ACCEPT = 2
    ROLLBACK = 3


class Mux(IntEnum):
    """Input-multiplexer select: where the decoder's next input token comes from (1-bit)."""

    SAMPLER = 0  # the FPGA's own sampler (drafted tokens)
    PCIE = 1  # the target's tokens arriving over PCIe


class Status(IntEnum):
    """Per-command status. OK, or the reason the command was refused (registers and mode unchanged)."""

    OK = 0
    BAD_COUNT = 1  # count < 1 (speculate, ingest, wait)
    OVER_CAPACITY = 2  # ahead + count > capacity (speculate, ingest)
    INIT_OUT_OF_RANGE = 3  # init position < 0 or > capacity
    NOTHING_TO_VERIFY = 4  # accept / rollback with curr == valid
    MUX_NOT_PCIE = 5  # ingest while the mux selects the sampler (speculate / accept mode)
    STEP_PENDING = 6  # mark while a step is already under verification (curr > valid)
    EMPTY_STEP = 7  # mark with no drafted token to submit (ahead == curr)
    UNKNOWN_OPCODE = 8  # kernel only: an opcode outside Op


#: Mux select that each mode drives (index = Mode value): sampler in speculate/accept, PCIe in init/rollback.
MUX_OF_MODE: tuple[Mux, ...] = (Mux.PCIE, Mux.SAMPLER, Mux.SAMPLER, Mux.PCIE)
MUX_OF_MODE_ARRAY = np.array([int(m) for m in MUX_OF_MODE], dtype=np.int8)

#: Who writes the KV of a token, by mux select: the draft's sampler or the target over PCIe.
WRITER_NONE = 0
WRITER_SAMPLER = 1
WRITER_PCIE = 2

N_OPS = len(Op)

# Plain ints for the Numba kernel.
OP_INIT = int(Op.INIT)
OP_SPECULATE = int(Op.SPECULATE)
OP_ACCEPT = int(Op.ACCEPT)
OP_ROLLBACK = int(Op.ROLLBACK)
OP_INGEST = int(Op.INGEST)
OP_MARK = int(Op.MARK)
OP_WAIT = int(Op.WAIT)
MODE_INIT = int(Mode.INIT)
MODE_SPECULATE = int(Mode.SPECULATE)
MODE_ACCEPT = int(Mode.ACCEPT)
MODE_ROLLBACK = int(Mode.ROLLBACK)
ST_OK = int(Status.OK)
ST_BAD_COUNT = int(Status.BAD_COUNT)
ST_OVER_CAPACITY = int(Status.OVER_CAPACITY)
ST_INIT_OUT_OF_RANGE = int(Status.INIT_OUT_OF_RANGE)
ST_NOTHING_TO_VERIFY = int(Status.NOTHING_TO_VERIFY)
ST_MUX_NOT_PCIE = int(Status.MUX_NOT_PCIE)
ST_STEP_PENDING = int(Status.STEP_PENDING)
ST_EMPTY_STEP = int(Status.EMPTY_STEP)
ST_UNKNOWN_OPCODE = int(Status.UNKNOWN_OPCODE)

#: Commands that carry an argument (the count of tokens / cycles, or init's position).
TAKES_ARG = frozenset({Op.INIT, Op.SPECULATE, Op.INGEST, Op.WAIT})


def op_name(op: int) -> str:
    return Op(op).name.lower() if op in Op._value2member_map_ else f"opcode {op}"


def command_text(op: int, arg: int) -> str:
    """``speculate 5``, ``accept``: the command as a command file spells it."""
    return f"{op_name(op)} {arg}" if op in Op._value2member_map_ and Op(op) in TAKES_ARG else op_name(op)


def refusal_reason(op: int, arg: int, status: int, valid: int, curr: int, ahead: int, mode: int, capacity: int) -> str:
    """One line saying why ``op arg`` was refused in the given state (what was expected, what was found)."""
    st = Status(status)
    what = command_text(op, arg)
    regs = f"valid={valid} curr={curr} ahead={ahead} capacity={capacity}, mode {Mode(mode).name.lower()}"
    if st is Status.BAD_COUNT:
        why = f"the count must be an integer >= 1, got {arg}"
    elif st is Status.OVER_CAPACITY:
        why = f"{arg} token(s) from ahead={ahead} would pass the capacity {capacity} (room for {capacity - ahead})"
    elif st is Status.INIT_OUT_OF_RANGE:
        why = f"the position must be in 0..{capacity} (the capacity), got {arg}"
    elif st is Status.NOTHING_TO_VERIFY:
        why = "no step is under verification (curr == valid); submit a drafted step with `mark` first"
    elif st is Status.MUX_NOT_PCIE:
        why = (
            "the input mux selects the local sampler; PCIe tokens are ingested only in init or rollback mode "
            "(after `init` or `rollback`)"
        )
    elif st is Status.STEP_PENDING:
        why = (
            "a step is already under verification (curr > valid); the next step is submitted by `accept` "
            "(curr <- ahead) or dropped by `rollback`"
        )
    elif st is Status.EMPTY_STEP:
        why = "no drafted token to submit (ahead == curr); `speculate` first"
    elif st is Status.UNKNOWN_OPCODE:
        why = f"unknown opcode {op}; valid opcodes are {', '.join(f'{o.value}={o.name.lower()}' for o in Op)}"
    else:
        raise ValueError(f"status {st.name} is not a refusal")
    return f"{what} refused ({st.name.lower()}): {why} [{regs}]"
