"""The KVMU as a Numba kernel: a command stream (opcode + argument arrays) in, the per-cycle registers, mode, mux
select, status and KV write port out.

Two passes, both compiled:

1. :func:`kvmu_commands` runs the transition rules of :mod:`fpga.kvmu.model` once per command and returns, per
   command, its status, first cycle, cycle count and the registers and mode after it. This fixes the exact number
   of cycles, so the second pass allocates once.
2. :func:`kvmu_cycles` steps through every cycle of every command and returns the per-cycle signals; or
   :func:`kvmu_runs` returns the same signals run-length encoded (a run per stretch of cycles over which nothing
   changes), so that a ``wait`` of a billion cycles costs one run rather than a billion samples.

Cycle semantics (the same as the Python face, :class:`fpga.kvmu.model.Kvmu`, which is written independently and checked
against this kernel cycle by cycle in tests/test_kvmu_properties.py):

* commands issue back to back; command ``i`` occupies cycles ``start[i] .. start[i] + n_cycles[i] - 1``;
* the mode (and so the mux select) switches on the command's first cycle;
* a register update lands on the command's last cycle; for ``speculate n`` / ``ingest n`` each token has a slot of
  ``cost_cycles[op]`` cycles and its KV write (``write_pos``) and pointer increment land on the slot's last cycle;
* ``wait n`` holds everything for ``n`` cycles;
* a refused command takes one cycle with its status code and changes nothing.

Each per-cycle sample is the state at the end of that cycle.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from fpga.kvmu.codes import (
    MODE_ACCEPT,
    MODE_INIT,
    MODE_ROLLBACK,
    MODE_SPECULATE,
    MUX_OF_MODE_ARRAY,
    OP_ACCEPT,
    OP_INGEST,
    OP_INIT,
    OP_MARK,
    OP_ROLLBACK,
    OP_SPECULATE,
    OP_WAIT,
    ST_BAD_COUNT,
    ST_EMPTY_STEP,
    ST_INIT_OUT_OF_RANGE,
    ST_MUX_NOT_PCIE,
    ST_NOTHING_TO_VERIFY,
    ST_OK,
    ST_OVER_CAPACITY,
    ST_STEP_PENDING,
    ST_UNKNOWN_OPCODE,
)

_MUX = MUX_OF_MODE_ARRAY


@njit(cache=True)
def _transition(
    op: int, arg: int, capacity: int, valid: int, curr: int, ahead: int, mode: int
) -> tuple[int, int, int, int, int]:
    """One command's effect: (status, valid, curr, ahead, mode) after it. A refusal returns the state unchanged."""
    if op == OP_INIT:
        if arg < 0 or arg > capacity:
            return ST_INIT_OUT_OF_RANGE, valid, curr, ahead, mode
        return ST_OK, arg, arg, arg, MODE_INIT
    if op == OP_SPECULATE:
        if arg < 1:
            return ST_BAD_COUNT, valid, curr, ahead, mode
        if arg > capacity - ahead:
            return ST_OVER_CAPACITY, valid, curr, ahead, mode
        return ST_OK, valid, curr, ahead + arg, MODE_SPECULATE
    if op == OP_ACCEPT:
        if curr == valid:
            return ST_NOTHING_TO_VERIFY, valid, curr, ahead, mode
        return ST_OK, curr, ahead, ahead, MODE_ACCEPT
    if op == OP_ROLLBACK:
        if curr == valid:
            return ST_NOTHING_TO_VERIFY, valid, curr, ahead, mode
        return ST_OK, valid, valid, valid, MODE_ROLLBACK
    if op == OP_INGEST:
        if arg < 1:
            return ST_BAD_COUNT, valid, curr, ahead, mode
        if mode != MODE_INIT and mode != MODE_ROLLBACK:
            return ST_MUX_NOT_PCIE, valid, curr, ahead, mode
        if arg > capacity - ahead:
            return ST_OVER_CAPACITY, valid, curr, ahead, mode
        return ST_OK, valid + arg, curr + arg, ahead + arg, mode
    if op == OP_MARK:
        if curr != valid:
            return ST_STEP_PENDING, valid, curr, ahead, mode
        if ahead == curr:
            return ST_EMPTY_STEP, valid, curr, ahead, mode
        return ST_OK, valid, ahead, ahead, MODE_SPECULATE
    if op == OP_WAIT:
        if arg < 1:
            return ST_BAD_COUNT, valid, curr, ahead, mode
        return ST_OK, valid, curr, ahead, mode
    return ST_UNKNOWN_OPCODE, valid, curr, ahead, mode


@njit(cache=True)
def _command_cycles(op: int, arg: int, status: int, cost_cycles: np.ndarray) -> int:
    if status != ST_OK:
        return 1
    if op == OP_WAIT:
        return arg
    if op == OP_SPECULATE or op == OP_INGEST:
        return arg * cost_cycles[op]
    return cost_cycles[op]


@njit(cache=True)
def kvmu_commands(
    opcodes: np.ndarray,
    args: np.ndarray,
    capacity: int,
    cost_cycles: np.ndarray,
    valid0: int,
    curr0: int,
    ahead0: int,
    mode0: int,
) -> tuple[np.ndarray, ...]:
    """Pass 1: per command -> (status int8, start_cycle int64, n_cycles int64, valid, curr, ahead int32 after,
    mode int8 after)."""
    n = opcodes.shape[0]
    status = np.empty(n, np.int8)
    start = np.empty(n, np.int64)
    n_cycles = np.empty(n, np.int64)
    valid_after = np.empty(n, np.int32)
    curr_after = np.empty(n, np.int32)
    ahead_after = np.empty(n, np.int32)
    mode_after = np.empty(n, np.int8)
    valid, curr, ahead, mode = valid0, curr0, ahead0, mode0
    cycle = 0
    for i in range(n):
        op = opcodes[i]
        arg = args[i]
        st, valid, curr, ahead, mode = _transition(op, arg, capacity, valid, curr, ahead, mode)
        c = _command_cycles(op, arg, st, cost_cycles)
        status[i] = st
        start[i] = cycle
        n_cycles[i] = c
        valid_after[i] = valid
        curr_after[i] = curr
        ahead_after[i] = ahead
        mode_after[i] = mode
        cycle += c
    return status, start, n_cycles, valid_after, curr_after, ahead_after, mode_after


@njit(cache=True)
def kvmu_cycles(
    opcodes: np.ndarray,
    args: np.ndarray,
    cost_cycles: np.ndarray,
    status: np.ndarray,
    n_cycles: np.ndarray,
    valid_after: np.ndarray,
    curr_after: np.ndarray,
    ahead_after: np.ndarray,
    mode_after: np.ndarray,
    valid0: int,
    curr0: int,
    ahead0: int,
) -> tuple[np.ndarray, ...]:
    """Pass 2: per cycle -> (valid, curr, ahead int32, mode, mux, status int8, cmd int32, write_pos int32;
    write_pos is -1 in cycles without a KV write)."""
    total = 0
    for i in range(n_cycles.shape[0]):
        total += n_cycles[i]
    o_valid = np.empty(total, np.int32)
    o_curr = np.empty(total, np.int32)
    o_ahead = np.empty(total, np.int32)
    o_mode = np.empty(total, np.int8)
    o_mux = np.empty(total, np.int8)
    o_status = np.empty(total, np.int8)
    o_cmd = np.empty(total, np.int32)
    o_write = np.empty(total, np.int32)
    valid, curr, ahead = valid0, curr0, ahead0
    t = 0
    for i in range(opcodes.shape[0]):
        op = opcodes[i]
        st = status[i]
        mode = mode_after[i]
        mux = _MUX[mode]
        tokens = st == ST_OK and (op == OP_SPECULATE or op == OP_INGEST)
        slot = cost_cycles[op] if tokens else n_cycles[i]
        for c in range(n_cycles[i]):
            write = -1
            last_of_slot = (c % slot) == slot - 1
            if st == ST_OK and last_of_slot:
                if op == OP_SPECULATE:
                    write = ahead
                    ahead += 1
                elif op == OP_INGEST:
                    write = ahead
                    valid += 1
                    curr += 1
                    ahead += 1
                elif op != OP_WAIT:
                    valid = valid_after[i]
                    curr = curr_after[i]
                    ahead = ahead_after[i]
            o_valid[t] = valid
            o_curr[t] = curr
            o_ahead[t] = ahead
            o_mode[t] = mode
            o_mux[t] = mux
            o_status[t] = st
            o_cmd[t] = i
            o_write[t] = write
            t += 1
    return o_valid, o_curr, o_ahead, o_mode, o_mux, o_status, o_cmd, o_write


@njit(cache=True, inline="always")  # inlined: its constant arguments made Numba compile it four times
def _push(
    r: int,
    start: int,
    length: int,
    valid: int,
    curr: int,
    ahead: int,
    mode: int,
    mux: int,
    st: int,
    cmd: int,
    write: int,
    r_start: np.ndarray,
    r_len: np.ndarray,
    r_valid: np.ndarray,
    r_curr: np.ndarray,
    r_ahead: np.ndarray,
    r_mode: np.ndarray,
    r_mux: np.ndarray,
    r_status: np.ndarray,
    r_cmd: np.ndarray,
    r_write: np.ndarray,
) -> int:
    """Append a run (or extend the last one when every signal is the same); returns the run count."""
    if length <= 0:
        return r
    if (
        r > 0
        and r_valid[r - 1] == valid
        and r_curr[r - 1] == curr
        and r_ahead[r - 1] == ahead
        and r_mode[r - 1] == mode
        and r_mux[r - 1] == mux
        and r_status[r - 1] == st
        and r_cmd[r - 1] == cmd
        and r_write[r - 1] == write
    ):
        r_len[r - 1] += length
        return r
    r_start[r] = start
    r_len[r] = length
    r_valid[r] = valid
    r_curr[r] = curr
    r_ahead[r] = ahead
    r_mode[r] = mode
    r_mux[r] = mux
    r_status[r] = st
    r_cmd[r] = cmd
    r_write[r] = write
    return r + 1


@njit(cache=True)
def kvmu_runs(
    opcodes: np.ndarray,
    args: np.ndarray,
    cost_cycles: np.ndarray,
    status: np.ndarray,
    start: np.ndarray,
    n_cycles: np.ndarray,
    valid_after: np.ndarray,
    curr_after: np.ndarray,
    ahead_after: np.ndarray,
    mode_after: np.ndarray,
    valid0: int,
    curr0: int,
    ahead0: int,
) -> tuple[np.ndarray, ...]:
    """Pass 2, run-length: (start int64, length int64, valid, curr, ahead int32, mode, mux, status int8, cmd int32,
    write_pos int32) per run; expanding the runs gives exactly :func:`kvmu_cycles`."""
    n = opcodes.shape[0]
    bound = 0
    for i in range(n):
        op = opcodes[i]
        if status[i] == ST_OK and (op == OP_SPECULATE or op == OP_INGEST):
            bound += 2 * args[i]
        else:
            bound += 2
    r_start = np.empty(bound, np.int64)
    r_len = np.empty(bound, np.int64)
    r_valid = np.empty(bound, np.int32)
    r_curr = np.empty(bound, np.int32)
    r_ahead = np.empty(bound, np.int32)
    r_mode = np.empty(bound, np.int8)
    r_mux = np.empty(bound, np.int8)
    r_status = np.empty(bound, np.int8)
    r_cmd = np.empty(bound, np.int32)
    r_write = np.empty(bound, np.int32)
    valid, curr, ahead = valid0, curr0, ahead0
    r = 0
    for i in range(n):
        op = opcodes[i]
        st = status[i]
        mode = mode_after[i]
        mux = _MUX[mode]
        t = start[i]
        if st == ST_OK and (op == OP_SPECULATE or op == OP_INGEST):
            k = cost_cycles[op]
            for _ in range(args[i]):
                r = _push(
                    r,
                    t,
                    k - 1,
                    valid,
                    curr,
                    ahead,
                    mode,
                    mux,
                    st,
                    i,
                    -1,
                    r_start,
                    r_len,
                    r_valid,
                    r_curr,
                    r_ahead,
                    r_mode,
                    r_mux,
                    r_status,
                    r_cmd,
                    r_write,
                )
                write = ahead
                ahead += 1
                if op == OP_INGEST:
                    valid += 1
                    curr += 1
                r = _push(
                    r,
                    t + k - 1,
                    1,
                    valid,
                    curr,
                    ahead,
                    mode,
                    mux,
                    st,
                    i,
                    write,
                    r_start,
                    r_len,
                    r_valid,
                    r_curr,
                    r_ahead,
                    r_mode,
                    r_mux,
                    r_status,
                    r_cmd,
                    r_write,
                )
                t += k
        elif st == ST_OK and op != OP_WAIT:
            c = n_cycles[i]
            r = _push(
                r,
                t,
                c - 1,
                valid,
                curr,
                ahead,
                mode,
                mux,
                st,
                i,
                -1,
                r_start,
                r_len,
                r_valid,
                r_curr,
                r_ahead,
                r_mode,
                r_mux,
                r_status,
                r_cmd,
                r_write,
            )
            valid = valid_after[i]
            curr = curr_after[i]
            ahead = ahead_after[i]
            r = _push(
                r,
                t + c - 1,
                1,
                valid,
                curr,
                ahead,
                mode,
                mux,
                st,
                i,
                -1,
                r_start,
                r_len,
                r_valid,
                r_curr,
                r_ahead,
                r_mode,
                r_mux,
                r_status,
                r_cmd,
                r_write,
            )
        else:
            r = _push(
                r,
                t,
                n_cycles[i],
                valid,
                curr,
                ahead,
                mode,
                mux,
                st,
                i,
                -1,
                r_start,
                r_len,
                r_valid,
                r_curr,
                r_ahead,
                r_mode,
                r_mux,
                r_status,
                r_cmd,
                r_write,
            )
    return (
        r_start[:r],
        r_len[:r],
        r_valid[:r],
        r_curr[:r],
        r_ahead[:r],
        r_mode[:r],
        r_mux[:r],
        r_status[:r],
        r_cmd[:r],
        r_write[:r],
    )
