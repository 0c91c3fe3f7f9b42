"""The token program's data: the :class:`Program` both simulators execute, the codes of its columns, and the
segments and activation vectors the lowering (:mod:`fpga.streaming.lowering`) builds it from.

A segment (:class:`_Segment`) is one piece of the token (head, one layer, tail) with segment-local block
indices; an activation vector (:class:`_Vec`) records which blocks produce its elements and which block first
reads each, which is what FIFO back-pressure between engines is resolved from. The program format itself is
described in :mod:`fpga.streaming.program`.
"""

from __future__ import annotations

import dataclasses
from itertools import chain
from typing import Any

import numpy as np

from fpga.streaming.design import ALL_OPS

OP_ID = {op: i for i, op in enumerate(ALL_OPS)}
KIND_WEIGHT, KIND_KV = 0, 1
R_BYTES, R_ADDR, R_WRITE, R_DEP, R_DEP_OFF, R_SLOT, R_SLOT_OFF, R_OUTPREV = range(8)  # columns of r_table
DEP_NONE, DEP_LOCAL, DEP_XIN, DEP_ATT = 0, 1, 2, 3  # ATT: output block of attention head idx
NO = -1


@dataclasses.dataclass
class _Vec:
    """An activation vector as produced: entries (dep kind, index, cumulative elements), its producer engine."""

    entries: list[tuple[int, int, int]]
    engine: int
    free_tile: list[int] = dataclasses.field(default_factory=list)  # per entry: first consumer block that reads it
    consumer_engine: int = NO
    cum: list[int] = dataclasses.field(default_factory=list)
    buffered: bool = False  # read into a matrix-vector/attention operand buffer: no FIFO back-pressure

    def __post_init__(self) -> None:
        self.cum = [c for _k, _i, c in self.entries]


def deps_array(deps: list[list[tuple[int, int, int]]]) -> np.ndarray:
    """Blocks' dependency slots (per block 3 slots of (kind, index, offset)) as an (n, 3, 3) array (flattened in one
    pass: ``np.array`` of the nested lists is 2-3x slower on an LM head's thousands of blocks)."""
    flat = chain.from_iterable(chain.from_iterable(deps))
    return np.fromiter(flat, np.int64, count=9 * len(deps)).reshape(len(deps), 3, 3)


class _Segment:
    """Blocks and requests of one piece of the token (head, one layer, tail), indices local to the segment."""

    def __init__(self, n_ports: int) -> None:
        self.eng: list[int] = []
        self.cyc: list[int] = []
        self.drain: list[int] = []
        self.op: list[int] = []
        self.deps: list[list[tuple[int, int, int]]] = []  # per block 3 slots (kind, index, offset)
        self.reqs: list[list[tuple[int, int, int, int, int, int]]] = [[] for _ in range(n_ports)]
        # request record: (bytes, address, is_write, block (consumer or data source), offset, kind)

    def arrays(self) -> dict[str, np.ndarray]:
        """The blocks as arrays (memoized: head and tail segments are shared by every context length)."""
        if getattr(self, "_arrays", None) is None:
            deps = deps_array(self.deps)
            self._arrays = {
                "eng": np.array(self.eng, np.int64),
                "cyc": np.array(self.cyc, np.int64),
                "drain": np.array(self.drain, np.int64),
                "op": np.array(self.op, np.int64),
                "dkind": deps[:, :, 0],
                "didx": deps[:, :, 1],
                "doff": deps[:, :, 2],
            }
        return self._arrays

    def req_array(self, port: int) -> np.ndarray:
        memo = self.__dict__.setdefault("_req_arrays", {})
        if port not in memo:
            memo[port] = np.array(self.reqs[port], dtype=np.int64).reshape(-1, 6)
        return memo[port]

    def port_ids(self) -> dict[int, int]:
        """Per port with requests, the first port whose request list equals its own (memoized: a part shared by
        designs, fpga/streaming/part_memo.py, compares its ports' lists once)."""
        memo: dict[int, int] | None = self.__dict__.get("_port_ids")
        if memo is None:
            reqs = self.reqs
            lists = reqs.lists if hasattr(reqs, "lists") else dict(enumerate(reqs))
            memo = {}
            seen: dict[tuple[Any, ...], list[int]] = {}
            for p in sorted(lists):
                r = lists[p]
                if not r:
                    continue
                same = seen.setdefault((len(r), r[0], r[-1]), [])
                memo[p] = next((q for q in same if lists[q] == r), p)
                if memo[p] == p:
                    same.append(p)
            self._port_ids = memo
        return memo

    def block(self, eng: int, cyc: int, op: str, drain: bool = False) -> int:
        self.eng.append(eng)
        self.cyc.append(max(1, int(cyc)))
        self.drain.append(int(drain))
        self.op.append(OP_ID[op])
        self.deps.append([(DEP_NONE, 0, 0), (DEP_NONE, 0, 0), (DEP_NONE, 0, 0)])
        return len(self.eng) - 1


@dataclasses.dataclass(frozen=True)
class Program:
    """A compiled token (see the module docstring). Block times are kernel cycles; request times AXI cycles."""

    n_blocks: int
    t_eng: np.ndarray
    t_cyc: np.ndarray
    t_drain: np.ndarray
    t_op: np.ndarray
    t_layer: np.ndarray
    t_dep: np.ndarray  # (n, 3) block index or -1
    t_off: np.ndarray  # (n, 3)
    e_ptr: np.ndarray  # engine e's blocks are e_list[e_ptr[e]:e_ptr[e+1]] in program order
    e_list: np.ndarray
    e_lat: np.ndarray
    final_block: int
    # ports: port p belongs to engine port_eng[p] and class port_group[p]
    port_eng: np.ndarray
    port_group: np.ndarray
    port_bytes: np.ndarray  # per port: kernel-side bytes per cycle
    port_buffer: np.ndarray
    port_outstanding: np.ndarray
    # requests per class (fast engine; one representative port each) and per port (reference), CSR
    g_ptr: np.ndarray
    g_port: np.ndarray  # representative port of each class
    g_mult: np.ndarray  # ports in each class
    r_table: np.ndarray  # (n, 8) columns R_BYTES .. R_OUTPREV, per class (one cache line per request)
    t_need_group: np.ndarray  # (n_blocks, n_groups): class-local read request a block needs, or -1
    p_ptr: np.ndarray
    pr_table: np.ndarray  # (n, 8) per port
    t_need_port: np.ndarray  # (n_blocks, n_ports)
    macs: int
    port_chan: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))  # per port: channel
    arbitration: int = 0  # a shared channel's tie-break (fpga.streaming.ports: ARB_RR, ARB_FIXED)
    param_bytes: dict[str, int] = dataclasses.field(default_factory=dict)  # ledger: weights, metadata, bias, padding
    req_bytes: dict[str, int] = dataclasses.field(default_factory=dict)  # request bytes: param_read, kv_read, kv_write
    ops_names: tuple[str, ...] = ALL_OPS

    # request rows (write: r_dep is the block whose result it stores; read: r_slot is the block whose issue end
    # frees the buffer slot it needs, r_outprev the port-local read max_outstanding before it; -1 when none)
    r_bytes = property(lambda self: self.r_table[:, R_BYTES])
    r_addr = property(lambda self: self.r_table[:, R_ADDR])
    r_write = property(lambda self: self.r_table[:, R_WRITE])
    r_dep = property(lambda self: self.r_table[:, R_DEP])
    r_dep_off = property(lambda self: self.r_table[:, R_DEP_OFF])
    r_slot = property(lambda self: self.r_table[:, R_SLOT])
    r_slot_off = property(lambda self: self.r_table[:, R_SLOT_OFF])
    r_outprev = property(lambda self: self.r_table[:, R_OUTPREV])
    pr_bytes = property(lambda self: self.pr_table[:, R_BYTES])
    pr_addr = property(lambda self: self.pr_table[:, R_ADDR])
    pr_write = property(lambda self: self.pr_table[:, R_WRITE])
    pr_dep = property(lambda self: self.pr_table[:, R_DEP])
    pr_dep_off = property(lambda self: self.pr_table[:, R_DEP_OFF])
    pr_slot = property(lambda self: self.pr_table[:, R_SLOT])
    pr_slot_off = property(lambda self: self.pr_table[:, R_SLOT_OFF])
    pr_outprev = property(lambda self: self.pr_table[:, R_OUTPREV])

    @property
    def n_ports(self) -> int:
        return len(self.port_eng)

    @property
    def n_groups(self) -> int:
        return len(self.g_port)
