"""The state the serving simulator (:mod:`hwmodel.serving.simulator`) keeps per request and per device, and the
result of a run: what schedulers (:mod:`hwmodel.serving.schedulers`), metrics and reports read."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from hwmodel.engine import Phase
from hwmodel.serving.devices import DeviceModel
from hwmodel.serving.schedulers import Slo
from hwmodel.workload.requests import Request

IDLE, PREFILL, DECODE, FINISHING, BETWEEN = 0, 1, 2, 3, 4  # BETWEEN: a GPU's loop is running code


class ReqState:
    """A request in flight and the times of its milestones (NaN until reached)."""

    __slots__ = (
        "req",
        "id",
        "arrival_s",
        "prompt_tokens",
        "output_tokens",
        "final_ctx",
        "prefill_dev",
        "decode_dev",
        "path_kind",
        "t_prefill_start",
        "t_prefill_end",
        "t_first_token",
        "t_kv_ready",
        "t_decode_start",
        "t_finish",
        "ctx",
        "steps_left",
        "steps_prefill_pool",
        "steps_decode_pool",
        "kv_bytes_moved",
        "gpu_stage_bytes",
        "done",
    )

    def __init__(self, req: Request) -> None:
        self.req = req
        self.id = req.id
        self.arrival_s = req.arrival_s
        self.prompt_tokens = req.prompt_tokens
        self.output_tokens = req.output_tokens
        self.final_ctx = req.prompt_tokens + req.output_tokens - 1
        self.prefill_dev = -1
        self.decode_dev = -1
        self.path_kind = ""
        nan = math.nan
        self.t_prefill_start = self.t_prefill_end = self.t_first_token = nan
        self.t_kv_ready = self.t_decode_start = self.t_finish = nan
        self.ctx = req.prompt_tokens
        self.steps_left = req.output_tokens - 1
        self.steps_prefill_pool = 0
        self.steps_decode_pool = 0
        self.kv_bytes_moved = 0
        self.gpu_stage_bytes = 0
        self.done = 0


class Device:
    """Run-time state of one card."""

    __slots__ = (
        "index",
        "name",
        "node",
        "model",
        "role",
        "state",
        "pending",
        "batch",
        "reserved",
        "mem_used",
        "mem_peak",
        "phase_s",
        "proc",
        "wake",
        "interrupted",
        "host_sampling_s",
        "token_overhead_s",
        "segments",
        "joining",
        "batch_bytes",
    )

    def __init__(self, index: int, name: str, node: int, model: DeviceModel, role: str) -> None:
        self.index = index
        self.name = name
        self.node = node
        self.model = model
        self.role = role  # "prefill" or "decode" (the pool it belongs to)
        self.state = IDLE
        self.pending: list[tuple[ReqState, Device | None]] = []  # prefills assigned to this GPU
        self.batch: list[ReqState] = []  # requests this GPU decodes
        self.joining: list[ReqState] = []  # requests this GPU prefills to decode itself
        self.batch_bytes = 0  # KV memory reserved for batch + joining (padded to the longest if the engine pads)
        self.reserved: ReqState | None = None  # the request an FPGA holds (prefill, migration, decode)
        self.mem_used = model.weights_bytes
        self.mem_peak = model.weights_bytes
        self.phase_s: dict[Phase, float] = {p: 0.0 for p in Phase}
        self.proc: Any = None
        self.wake: Any = None
        self.interrupted = False
        self.host_sampling_s = 0.0
        self.token_overhead_s = 0.0
        self.segments: list[tuple[float, float, str, tuple[int, ...]]] = []

    def alloc(self, n_bytes: int) -> None:
        self.mem_used += n_bytes
        if self.mem_used > self.mem_peak:
            self.mem_peak = self.mem_used

    def free(self, n_bytes: int) -> None:
        self.mem_used -= n_bytes

    def mem_free(self) -> int:
        return self.model.memory_bytes - self.mem_used

    def batch_bytes_with(self, extra: ReqState | None = None) -> int:
        """KV memory the decode batch needs (joining requests and ``extra`` included)."""
        finals = [r.final_ctx for r in self.batch] + [r.final_ctx for r in self.joining]
        if extra is not None:
            finals.append(extra.final_ctx)
        return self.model.batch_kv_bytes(finals)

    def rebalance_batch_memory(self) -> None:
        """Re-reserve the batch's KV memory after a request joined or left."""
        new = self.batch_bytes_with()
        if new >= self.batch_bytes:
            self.alloc(new - self.batch_bytes)
        else:
            self.free(self.batch_bytes - new)
        self.batch_bytes = new


@dataclasses.dataclass
class SimResult:
    """Everything a run produced: per-request records, per-device accounting, the setup."""

    cluster: str
    scheduler: str
    slo: Slo
    requests: list[ReqState]
    devices: list[Device]
    end_s: float
