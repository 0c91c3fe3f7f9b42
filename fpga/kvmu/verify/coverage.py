"""Functional coverage of `hwmodel kvmu verify`: which corners of the KVMU contract the examples that ran reached,
counted on the model's trace of each example (the RTL matched the model on them, so they are the RTL's corners
too).

Bins (docs/kvmu.md, "Coverage"):

* ``legal``: every legal command in every mode it can run in (19 pairs: init, speculate and wait in all four
  modes; accept and rollback in speculate and accept -- in init and rollback valid = curr = ahead, so they are
  always refused there; mark in speculate only -- after an accept curr = ahead until a speculate leaves the mode,
  so mark finds a pending step or an empty one; ingest in init and rollback, the modes whose mux selects PCIe);
* ``refusal``: every refusal class (the eight non-OK statuses);
* ``pointers``: the register relation after a command (valid = curr = ahead, valid = curr < ahead,
  valid < curr = ahead, valid < curr < ahead), each with ahead at the capacity and below it; an init to the
  capacity, a count that fills the room exactly and one that passes it by one;
* ``run``: legal speculate / ingest / wait (on the bus) counts by power-of-two bin, ``[2**k, 2**(k+1))`` for
  ``k = 0 .. MAX_RUN_LOG``;
* ``capacity``: the capacity by power-of-two bin, ``k = 0 .. 30``;
* ``crossing``: a speculate or ingest whose tokens take ahead across ``2**k`` (``k = 1 .. 30``);
* ``reset``: rst asserted in every mode, and inside a speculate, an ingest and a wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fpga.kvmu.codes import Mode, Op, Status
from fpga.kvmu.verify.contract import Example
from fpga.kvmu.verify.streams import MAX_RUN_LOG

_RUN_OPS = (Op.SPECULATE, Op.INGEST, Op.WAIT)
_ANY_MODE = tuple(Mode)
_LEGAL_MODES = {
    Op.INIT: _ANY_MODE,
    Op.SPECULATE: _ANY_MODE,
    Op.WAIT: _ANY_MODE,
    Op.ACCEPT: (Mode.SPECULATE, Mode.ACCEPT),
    Op.ROLLBACK: (Mode.SPECULATE, Mode.ACCEPT),
    Op.MARK: (Mode.SPECULATE,),
    Op.INGEST: (Mode.INIT, Mode.ROLLBACK),
}
_RELATIONS = ("valid=curr=ahead", "valid=curr<ahead", "valid<curr=ahead", "valid<curr<ahead")


def _name(x: Any) -> str:
    return x.name.lower()


def all_bins() -> dict[str, list[str]]:
    """Every bin of the model, by group."""
    return {
        "legal": [f"{_name(op)} in {_name(m)}" for op, modes in _LEGAL_MODES.items() for m in modes],
        "refusal": [_name(s) for s in Status if s is not Status.OK],
        "pointers": [f"{r}, ahead {w} capacity" for r in _RELATIONS for w in ("at", "below")]
        + ["init to the capacity", "count fills the room", "count passes the room by one"],
        "run": [f"{_name(op)} 2^{k}" for op in _RUN_OPS for k in range(MAX_RUN_LOG + 1)],
        "capacity": [f"2^{k}" for k in range(31)],
        "crossing": [f"ahead crosses 2^{k}" for k in range(1, 31)],
        "reset": [f"in {_name(m)}" for m in Mode] + [f"inside {_name(op)}" for op in _RUN_OPS],
    }


@dataclass
class Coverage:
    """Hit counts per bin over the examples added."""

    hits: dict[str, dict[str, int]] = field(
        default_factory=lambda: {g: dict.fromkeys(b, 0) for g, b in all_bins().items()}
    )
    examples: int = 0

    def _hit(self, group: str, name: str) -> None:
        if name in self.hits[group]:
            self.hits[group][name] += 1

    def add(self, example: Example) -> None:
        from fpga.kvmu.model import CycleCosts, run_kernel

        self.examples += 1
        cap = example.capacity
        self._hit("capacity", f"2^{cap.bit_length() - 1}")
        for _, cmds, cut in example.segments():
            if cmds:
                tr = run_kernel(
                    np.array([c.op for c in cmds], dtype=np.int64),
                    np.array([c.arg for c in cmds], dtype=np.int64),
                    cap,
                    CycleCosts(),
                )
                k = tr.commands
                start, n_cyc = k["start_cycle"], k["n_cycles"]
            else:
                start = n_cyc = np.zeros(0, dtype=np.int64)
            total = int(n_cyc.sum()) if len(cmds) else 0
            limit = total if cut is None else min(cut, total)
            mode, ahead = Mode.INIT, 0
            reset_mode, inside = Mode.INIT, None
            for i, c in enumerate(cmds):
                if int(start[i]) >= limit:
                    break
                st = Status(int(k["status"][i]))
                v, cu, a = int(k["valid"][i]), int(k["curr"][i]), int(k["ahead"][i])
                if st is Status.OK:
                    self._hit("legal", f"{_name(Op(c.op))} in {_name(mode)}")
                    rel = _RELATIONS[(v < cu) * 2 + (cu < a)]
                    self._hit("pointers", f"{rel}, ahead {'at' if a == cap else 'below'} capacity")
                    if c.op == Op.INIT and c.arg == cap:
                        self._hit("pointers", "init to the capacity")
                    if c.op in _RUN_OPS and not (c.op == Op.WAIT and c.idle):
                        self._hit("run", f"{_name(Op(c.op))} 2^{c.arg.bit_length() - 1}")
                    if c.op in (Op.SPECULATE, Op.INGEST):
                        if a == cap:
                            self._hit("pointers", "count fills the room")
                        for b in range(max(1, ahead.bit_length()), a.bit_length()):
                            self._hit("crossing", f"ahead crosses 2^{b}")
                else:
                    self._hit("refusal", _name(st))
                    if st is Status.OVER_CAPACITY and c.arg == cap - ahead + 1:
                        self._hit("pointers", "count passes the room by one")
                end = int(start[i]) + int(n_cyc[i])
                if cut is not None and end > limit:  # rst lands inside this command
                    inside = Op(c.op) if c.op in _RUN_OPS and st is Status.OK else None
                    reset_mode = Mode(int(k["mode"][i]))
                    break
                mode, ahead = Mode(int(k["mode"][i])), a
                reset_mode = mode
            if cut is not None:
                self._hit("reset", f"in {_name(reset_mode)}")
                if inside is not None:
                    self._hit("reset", f"inside {_name(inside)}")

    # ---- report
    def empty(self) -> list[str]:
        return [f"{g}: {b}" for g, bins in self.hits.items() for b, n in bins.items() if n == 0]

    @property
    def n_bins(self) -> int:
        return sum(len(b) for b in self.hits.values())

    @property
    def percent(self) -> float:
        return 100.0 * (self.n_bins - len(self.empty())) / self.n_bins

    def summary(self) -> str:
        parts = [f"{g} {sum(n > 0 for n in b.values())}/{len(b)}" for g, b in self.hits.items()]
        return f"coverage {self.percent:.1f}% of {self.n_bins} bins over {self.examples} examples ({', '.join(parts)})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "percent": round(self.percent, 2),
            "bins": self.n_bins,
            "examples": self.examples,
            "empty": self.empty(),
            "hits": self.hits,
        }
