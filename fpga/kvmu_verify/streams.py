"""Hypothesis strategy of verification examples: a capacity and a stream of up to 40 bus commands, legal and
illegal, with the arguments aimed at the edges of the transition table.

While it draws, the strategy follows the model's transition rules (the kernel's own ``_transition``, run as plain
Python) so that it can aim a count at the room left (``capacity - ahead`` and one more), an ``init`` at the capacity
or a step boundary, and so that legal commands are common enough to reach deep states. Capacities are tiny (1..4:
every command near an edge), small (5..64) or near the 31-bit limit (where ``ahead + n`` must not wrap; ``init``
then lands near the top so streams stay short). ``wait`` is driven as idle bus cycles or as opcode 6; opcode 7
(unknown) appears too. The shrinker removes commands and moves arguments toward small values.
"""
from __future__ import annotations

from hypothesis import strategies as st

from fpga.kvmu_codes import Mode, Op
from fpga.kvmu_verify.contract import MAX_CAPACITY, UNKNOWN_OP, BusCommand, Example

MAX_COMMANDS = 40
MAX_RUN = 64  # a legal speculate / ingest / wait stays <= this many cycles, so examples stay short
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1

#: Opcode draw, weighted by repetition (the shrinker prefers the first entry).
_OPS = ([Op.SPECULATE] * 4 + [Op.MARK] * 2 + [Op.ACCEPT] * 2 + [Op.ROLLBACK] * 2 + [Op.INGEST] * 3 + [Op.INIT] * 2
        + [Op.WAIT] * 2 + [UNKNOWN_OP])


def _transition(op: int, arg: int, capacity: int, state: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    from fpga.kvmu_kernel import _transition as kernel_transition

    fn = getattr(kernel_transition, "py_func", kernel_transition)
    _, v, c, a, m = fn(op, arg, capacity, *state)
    return v, c, a, m


def _count(draw: st.DrawFn, room: int) -> int:
    """A speculate / ingest / wait count: small, the exact room, one past it, zero, negative, or 2**31 - 1."""
    kind = draw(st.sampled_from(["small", "small", "small", "room", "room+1", "zero", "negative", "max"]))
    if kind == "room" and 1 <= room <= MAX_RUN:
        return room
    if kind == "room+1" and room + 1 <= INT32_MAX:
        return room + 1
    if kind == "zero":
        return 0
    if kind == "negative":
        return draw(st.sampled_from([-1, INT32_MIN, -7]))
    if kind == "max" and room < INT32_MAX:  # refused; a legal 2**31-token run would take 2**31 cycles
        return INT32_MAX
    return draw(st.integers(1, 8))


def _position(draw: st.DrawFn, capacity: int, state: tuple[int, int, int, int]) -> int:
    """An init position: a step boundary at or below valid, near ahead, the capacity and past it, or negative."""
    valid, _, ahead, _ = state
    kind = draw(st.sampled_from(["boundary", "near", "capacity", "top", "past", "negative"]))
    if kind == "boundary":
        return draw(st.integers(0, valid))
    if kind == "capacity":
        return capacity
    if kind == "top":
        return max(0, capacity - draw(st.integers(0, 8)))
    if kind == "past":
        return capacity + draw(st.sampled_from([1, 2, INT32_MAX - capacity]))
    if kind == "negative":
        return draw(st.sampled_from([-1, INT32_MIN]))
    return min(capacity, ahead + draw(st.integers(0, 8)))


@st.composite
def examples(draw: st.DrawFn, max_commands: int = MAX_COMMANDS) -> Example:
    size = draw(st.sampled_from(["small", "tiny", "large"]))
    if size == "tiny":
        capacity = draw(st.integers(1, 4))
    elif size == "large":
        capacity = MAX_CAPACITY - draw(st.integers(0, 64))
    else:
        capacity = draw(st.integers(5, 64))
    state = (0, 0, 0, int(Mode.INIT))
    commands = []
    n = draw(st.integers(0, max_commands))
    if size == "large" and n:  # start near the top of a huge capacity, so that counts can reach the edge
        p = capacity - draw(st.integers(0, 48))
        commands.append(BusCommand(int(Op.INIT), p))
        state = _transition(int(Op.INIT), p, capacity, state)
    while len(commands) < n:
        op = int(draw(st.sampled_from(_OPS)))
        room = capacity - state[2]
        idle = False
        if op == Op.INIT:
            arg = _position(draw, capacity, state)
        elif op in (Op.SPECULATE, Op.INGEST):
            arg = _count(draw, room)
        elif op == Op.WAIT:
            arg = draw(st.integers(1, 4)) if draw(st.integers(0, 4)) else draw(st.sampled_from([0, -1]))
            idle = arg >= 1 and draw(st.booleans())
        elif op == UNKNOWN_OP:
            arg = draw(st.integers(INT32_MIN, INT32_MAX))
        else:
            arg = 0
        commands.append(BusCommand(op, arg, idle))
        state = _transition(op, arg, capacity, state)
    noise = draw(st.integers(0, 2**32 - 1))
    return Example(capacity, tuple(commands), noise)


__all__ = ["MAX_COMMANDS", "examples"]
