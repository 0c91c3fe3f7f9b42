"""The KVMU's data types: the cycle costs of its commands, its register state, its errors, the KV-memory write tags
and the run-length-encoded trace of a run (:class:`KvmuTrace`). The face and the kernel that produce them are in
:mod:`fpga.kvmu.model` (docs/kvmu.md)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fpga.kvmu.codes import (
    MUX_OF_MODE,
    N_OPS,
    WRITER_NONE,
    Mode,
    Mux,
    Op,
    Status,
    command_text,
    refusal_reason,
)
from hwmodel.errors import HwmodelError

MAX_CAPACITY = 2**31 - 1  # registers are 32-bit in the traces
MAX_COST_CYCLES = 2**20
INT64_MAX = 2**63 - 1

#: Per-command trace columns and per-cycle signal names (the order the VCD writer uses).
COMMAND_FIELDS = ("op", "arg", "status", "start_cycle", "n_cycles", "valid", "curr", "ahead", "mode")
SIGNALS = ("valid", "curr", "ahead", "mode", "mux", "status", "cmd", "write_pos")
_SIGNAL_DTYPES = {
    "valid": np.int32,
    "curr": np.int32,
    "ahead": np.int32,
    "mode": np.int8,
    "mux": np.int8,
    "status": np.int8,
    "cmd": np.int32,
    "write_pos": np.int32,
}
_COMMAND_DTYPES = {
    "op": np.int64,
    "arg": np.int64,
    "status": np.int8,
    "start_cycle": np.int64,
    "n_cycles": np.int64,
    "valid": np.int32,
    "curr": np.int32,
    "ahead": np.int32,
    "mode": np.int8,
}


class KvmuError(HwmodelError):
    """A KVMU input error: a bad argument type, capacity or cycle cost, or a driver error."""


class CommandRefused(KvmuError):
    """The KVMU refused a command (the transition table's "legal when" failed). Nothing changed but the cycle."""

    def __init__(self, message: str, op: Op, arg: int, status: Status) -> None:
        super().__init__(message)
        self.op = op
        self.arg = arg
        self.status = status


def _as_int(value: Any, what: str) -> int:
    """An exact 64-bit integer (Python or numpy, not bool): commands never round, clamp or wrap their arguments."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise KvmuError(f"{what} must be an integer, got {value!r}")
    value = int(value)
    if not -INT64_MAX - 1 <= value <= INT64_MAX:
        raise KvmuError(f"{what} {value} does not fit in 64 bits")
    return value


def check_capacity(capacity: Any) -> int:
    cap = _as_int(capacity, "KVMU capacity")
    if not 1 <= cap <= MAX_CAPACITY:
        raise KvmuError(f"KVMU capacity must be in 1..{MAX_CAPACITY} tokens, got {cap}")
    return cap


@dataclass(frozen=True)
class CycleCosts:
    """Cycles each command occupies in the KVMU. ``*_per_token`` costs are per token slot of speculate / ingest
    (the draft's decode time per token, if the trace should show it; 1 when only the register traffic matters).
    The defaults are one cycle each: the KVMU is a register file updated in one clock."""

    init_cycles: int = 1
    speculate_cycles_per_token: int = 1
    mark_cycles: int = 1
    accept_cycles: int = 1
    rollback_cycles: int = 1
    ingest_cycles_per_token: int = 1

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = _as_int(getattr(self, f.name), f"cycle cost {f.name}")
            if not 1 <= value <= MAX_COST_CYCLES:
                raise KvmuError(f"cycle cost {f.name} must be in 1..{MAX_COST_CYCLES}, got {value}")

    _FIELD_OF_OP = {
        Op.INIT: "init_cycles",
        Op.SPECULATE: "speculate_cycles_per_token",
        Op.MARK: "mark_cycles",
        Op.ACCEPT: "accept_cycles",
        Op.ROLLBACK: "rollback_cycles",
        Op.INGEST: "ingest_cycles_per_token",
    }

    def of(self, op: Op) -> int:
        """Cycles of one ``op`` command (of one token slot for speculate / ingest)."""
        return int(getattr(self, self._FIELD_OF_OP[op]))

    def as_array(self) -> np.ndarray:
        """Indexed by opcode, for the kernel (the WAIT entry is unused: a wait lasts its argument)."""
        out = np.ones(N_OPS, dtype=np.int64)
        for op in self._FIELD_OF_OP:
            out[int(op)] = self.of(op)
        return out

    @classmethod
    def from_overrides(cls, overrides: dict[str, int]) -> CycleCosts:
        """Costs keyed by command name (``{"speculate": 4}``), defaults for the rest."""
        by_name = {op.name.lower(): name for op, name in cls._FIELD_OF_OP.items()}
        kwargs = {}
        for key, value in overrides.items():
            if key not in by_name:
                raise KvmuError(
                    f"no cycle cost for command '{key}'; commands with a cost: {', '.join(sorted(by_name))}"
                )
            kwargs[by_name[key]] = value
        return cls(**kwargs)


@dataclass(frozen=True)
class KvmuState:
    valid: int
    curr: int
    ahead: int
    mode: Mode

    @property
    def mux(self) -> Mux:
        return MUX_OF_MODE[self.mode]


RESET_STATE = KvmuState(0, 0, 0, Mode.INIT)


class KvMemory:
    """The KV memory the pointers guard, as write tags per position: who wrote it last (``WRITER_SAMPLER`` for a
    drafted token, ``WRITER_PCIE`` for a target token, ``WRITER_NONE`` never), at which cycle, by which command
    (index in issue order), and how many times it was written. The KV data itself lives in the functional model's
    buffer at the same positions; rollback and backtrack move pointers and copy nothing."""

    def __init__(self, capacity: int) -> None:
        self.writer = np.full(capacity, WRITER_NONE, dtype=np.int8)
        self.cycle = np.full(capacity, -1, dtype=np.int64)
        self.command = np.full(capacity, -1, dtype=np.int64)
        self.writes = np.zeros(capacity, dtype=np.int64)

    def write(self, positions: slice, writer: int, cycles: np.ndarray | int, command: int) -> None:
        self.writer[positions] = writer
        self.cycle[positions] = cycles
        self.command[positions] = command
        self.writes[positions] += 1


@dataclass(frozen=True)
class KvmuTrace:
    """A KVMU run: per command (``commands``: the columns of COMMAND_FIELDS; registers and mode *after* it), and
    the per-cycle signals (SIGNALS) stored run-length encoded (``runs``: a ``start`` and ``length`` per run of
    cycles over which no signal changes), so that long idle gaps cost nothing. ``per_cycle()`` expands them."""

    capacity: int
    costs: CycleCosts
    initial: KvmuState
    commands: dict[str, np.ndarray]
    runs: dict[str, np.ndarray]
    lines: tuple[int | None, ...] = ()
    n_cycles: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "n_cycles", int(self.runs["length"].sum()))

    @property
    def n_commands(self) -> int:
        return int(self.commands["op"].shape[0])

    def per_cycle(self) -> dict[str, np.ndarray]:
        """One array per signal, one entry per cycle (cycle 0 first)."""
        return {name: np.repeat(self.runs[name], self.runs["length"]) for name in SIGNALS}

    def at_cycle(self, cycle: int) -> dict[str, int]:
        """The signals at the end of ``cycle``."""
        if not 0 <= cycle < self.n_cycles:
            raise KvmuError(f"cycle {cycle} is outside the trace (0..{self.n_cycles - 1})")
        i = int(np.searchsorted(self.runs["start"], cycle, side="right")) - 1
        return {name: int(self.runs[name][i]) for name in SIGNALS}

    def command_rows(self) -> list[dict[str, Any]]:
        """Per command: its text, line, status name, cycle span and registers / mode / mux after it."""
        rows = []
        c = self.commands
        for i in range(self.n_commands):
            mode = Mode(int(c["mode"][i]))
            rows.append(
                {
                    "index": i,
                    "line": self.lines[i] if self.lines else None,
                    "command": command_text(int(c["op"][i]), int(c["arg"][i])),
                    "status": Status(int(c["status"][i])).name.lower(),
                    "start_cycle": int(c["start_cycle"][i]),
                    "n_cycles": int(c["n_cycles"][i]),
                    "valid": int(c["valid"][i]),
                    "curr": int(c["curr"][i]),
                    "ahead": int(c["ahead"][i]),
                    "mode": mode.name.lower(),
                    "mux": MUX_OF_MODE[mode].name.lower(),
                }
            )
        return rows

    def refusals(self) -> list[int]:
        """Indices of refused commands."""
        return [int(i) for i in np.flatnonzero(self.commands["status"] != Status.OK)]

    def refusal_message(self, index: int) -> str:
        """The one-line reason command ``index`` was refused (state before it, as the face would say)."""
        c = self.commands
        before = (
            self.initial
            if index == 0
            else KvmuState(
                int(c["valid"][index - 1]),
                int(c["curr"][index - 1]),
                int(c["ahead"][index - 1]),
                Mode(int(c["mode"][index - 1])),
            )
        )
        return refusal_reason(
            int(c["op"][index]),
            int(c["arg"][index]),
            int(c["status"][index]),
            before.valid,
            before.curr,
            before.ahead,
            int(before.mode),
            self.capacity,
        )
