"""What the serving simulator knows about each device: its engine, memory, KV precision, link and price.

A :class:`DeviceModel` wraps one :class:`hwmodel.engine.Engine` with the facts placement needs: the device memory,
the bytes the replicated weights take, the bytes of one request's KV cache at a context length, the PCIe link to
the host, the price and how many requests it may decode together. A :class:`DeviceFactory` builds them from a
cluster's GPU and FPGA groups; :class:`EngineFactory` (the default) uses the project's device models:

* GPUs: :class:`gpu.latency.GpuEngine` (calibrated roofline per serving framework), memory from the GPU spec;
* FPGAs: :func:`fpga.instruction.load_design` + :class:`fpga.instruction.InstructionEngine` (instruction-driven,
  GLITCHES / FlightLLM style), HBM from the design's board.

Identical groups share one engine instance, so per-context decode times (memoized by the engines) and the
cumulative :class:`DecodeTable` are computed once per kind of device, not once per card.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from hwmodel.engine import Engine, Phase
from hwmodel.errors import HwmodelError, SpecError
from hwmodel.specs import GpuSpec, LinkSpec, LlmSpec, SpecLibrary


BATCH_GRID_TOKENS = 64  # context resolution of the batched-decode tables (see DeviceModel.decode_batch_s)


DECODE_TABLES = ("exact", "steps")
STEP_GRID_TOKENS = 32  # grid of the "steps" decode table (see DecodeTable)


class DecodeTable:
    """Cumulative single-request decode time by context length: ``steps_s(ctx0, n)`` is the time of ``n`` decode
    steps starting at context ``ctx0`` (step k runs at ``ctx0 + k``), read from a prefix sum of the engine's
    per-context ``decode_s`` instead of ``n`` calls. Filled on demand, only over the contexts asked for.

    ``mode="exact"`` asks the engine for every context. ``mode="steps"`` is for engines whose per-context call is
    expensive (a cycle-level simulation of a whole token) and whose decode time is a non-decreasing step function
    of the context (KV read in blocks, as the instruction-driven FPGA tiles attention): it asks for the contexts
    on a global grid every ``STEP_GRID_TOKENS`` tokens and bisects each grid interval whose ends differ, so an
    interval with equal ends is known to be constant -- exact for non-decreasing functions, with a few calls per
    step instead of one per context."""

    def __init__(self, decode_s: Callable[[int], float], mode: str = "exact", max_ctx: int | None = None) -> None:
        if mode not in DECODE_TABLES:
            raise HwmodelError(f"decode table mode must be one of {', '.join(DECODE_TABLES)}, got {mode!r}")
        self._decode_s = decode_s
        self.mode = mode
        self.max_ctx = max_ctx  # the largest context the engine accepts (grid points never go past it)
        self.calls = 0
        self._val = np.zeros(0)
        self._have = np.zeros(0, dtype=bool)
        self._cum = np.zeros(1)

    def _eval(self, ctx: int) -> float:
        if not self._have[ctx]:
            v = float(self._decode_s(ctx))
            self.calls += 1
            if not (math.isfinite(v) and v > 0):
                raise HwmodelError(f"decode engine returned a non-positive or non-finite time {v!r} at ctx {ctx}")
            self._val[ctx] = v
            self._have[ctx] = True
        return float(self._val[ctx])

    def _fill_steps(self, a: int, b: int) -> None:
        """Known values at a < b: fill (a, b) by bisection, a constant run wherever both ends agree."""
        if b - a <= 1:
            return
        if self._val[a] == self._val[b]:
            gap = ~self._have[a + 1:b]
            self._val[a + 1:b][gap] = self._val[a]
            self._have[a + 1:b] = True
            return
        m = (a + b) // 2
        self._eval(m)
        self._fill_steps(a, m)
        self._fill_steps(m, b)

    def _ensure(self, lo: int, hi: int) -> None:
        """Every context in [lo, hi) known."""
        if hi <= len(self._have) and self._have[lo:hi].all():
            return
        g = STEP_GRID_TOKENS
        size = max(hi, 2 * len(self._have)) if self.mode == "exact" else max((hi // g + 2) * g, 2 * len(self._have))
        if hi + g + 1 > len(self._have):
            self._val = np.concatenate([self._val, np.zeros(size - len(self._val))])
            self._have = np.concatenate([self._have, np.zeros(size - len(self._have), dtype=bool)])
        if self.mode == "exact":
            for c in range(lo, hi):
                self._eval(c)
        else:  # whole global grid intervals, so the result never depends on the order of requests
            a0 = (lo // g) * g
            b1 = -(-hi // g) * g
            for a in range(a0, b1, g):
                b = a + g if self.max_ctx is None else min(a + g, self.max_ctx)
                if b > a and not self._have[a:b + 1].all():
                    self._eval(a)
                    self._eval(b)
                    self._fill_steps(a, b)
                elif b <= a:
                    self._eval(a)
        self._cum = np.concatenate([[0.0], np.cumsum(np.where(self._have, self._val, 0.0))])

    def step_s(self, ctx: int) -> float:
        self._ensure(ctx, ctx + 1)
        return float(self._val[ctx])

    def steps_s(self, ctx0: int, n: int) -> float:
        """Time of ``n`` consecutive single-request decode steps from context ``ctx0``."""
        if n <= 0:
            return 0.0
        self._ensure(ctx0, ctx0 + n)
        return float(self._cum[ctx0 + n] - self._cum[ctx0])

    def cumulative_from(self, ctx0: int, n: int) -> np.ndarray:
        """End times of steps 1..n (relative to the start of step 1) from context ``ctx0``."""
        self._ensure(ctx0, ctx0 + n)
        return self._cum[ctx0 + 1: ctx0 + n + 1] - self._cum[ctx0]


@dataclasses.dataclass(frozen=True)
class PrefillPlan:
    """A prefill on a device: how long it keeps the device busy, when each layer's KV cache is ready to leave
    (offsets from the start, quantization to the destination's precision included) and when the host finished
    issuing its kernels."""

    busy_s: float
    layer_ready_s: tuple[float, ...]
    host_done_s: float


@dataclasses.dataclass(eq=False)
class DeviceModel:
    """One kind of device serving the LLM (shared by every card of a group)."""

    kind: str  # "gpu" or "fpga"
    label: str  # spec or design name, for reports
    engine: Engine
    llm: LlmSpec
    memory_bytes: int
    weights_bytes: int
    kv_bits: int
    link: LinkSpec
    price_usd: float
    max_decode_batch: int = 1
    kv_bytes_fn: Callable[[int], int] | None = None
    mem_bw_bytes_per_s: float = 0.0  # device memory bandwidth, for the KV quantization pass on a GPU
    padded_batch: bool = False  # a decode batch's KV is padded to its longest request (HF DynamicCache)
    decode_table: str = "exact"  # how the per-context decode table is filled (see DecodeTable)
    table: DecodeTable = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        if self.kind not in ("gpu", "fpga"):
            raise ValueError(f"device kind must be 'gpu' or 'fpga', got {self.kind!r}")
        self.table = DecodeTable(self.engine.decode_s, self.decode_table, self.llm.max_position - 1)
        if self.max_decode_batch > 1 and not hasattr(self.engine, "decode_batch_s"):
            raise HwmodelError(f"{self.label}: max_decode_batch {self.max_decode_batch} needs an engine with "
                               "decode_batch_s (batched decode); this engine decodes one request at a time")
        if self.weights_bytes >= self.memory_bytes:
            raise HwmodelError(f"{self.label}: the {self.llm.name} weights ({self.weights_bytes / 1e9:.2f} GB) do "
                               f"not fit in its {self.memory_bytes / 1e9:.2f} GB of memory")
        self._power = {p: float(self.engine.power_w(p)) for p in Phase}
        self._plans: dict[tuple[int, int | None], PrefillPlan] = {}
        self._batch_grid: dict[int, dict[int, float]] = {}

    def kv_bytes(self, ctx_tokens: int) -> int:
        """Bytes of one request's KV cache at ``ctx_tokens`` tokens, as this device stores it."""
        if self.kv_bytes_fn is not None:
            return int(self.kv_bytes_fn(ctx_tokens))
        return self.llm.kv_bytes(ctx_tokens, self.kv_bits)

    def batch_kv_bytes(self, final_ctxs: Sequence[int]) -> int:
        """KV memory of a decode batch whose requests end at ``final_ctxs`` tokens (padded or one per request)."""
        if not final_ctxs:
            return 0
        if self.padded_batch:
            return len(final_ctxs) * self.kv_bytes(max(final_ctxs))
        return sum(self.kv_bytes(c) for c in final_ctxs)

    def fits_alone(self, ctx_tokens: int) -> bool:
        return self.weights_bytes + self.kv_bytes(ctx_tokens) <= self.memory_bytes

    def prefill_s(self, n_tokens: int) -> float:
        return float(self.engine.prefill_s(n_tokens, 0))

    def prefill_plan(self, n_tokens: int, kv_bits_out: int | None = None) -> PrefillPlan:
        """Prefill of ``n_tokens`` whose KV cache leaves the device at ``kv_bits_out`` bits (None: it stays).

        Layer ends come from the engine's ``prefill_timeline`` when it has one (gpu.latency), else the prefill is
        split evenly over the layers. Leaving at fewer bits than the device keeps costs one quantization kernel
        per layer on the device's stream (read the layer's KV, write the quantized copy), which delays every
        later layer: the convention of :func:`interconnect.pcie.kv_migration`.
        """
        key = (n_tokens, kv_bits_out)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        layers = self.llm.layers
        timeline = getattr(self.engine, "prefill_timeline", None)
        if timeline is not None:
            tl = timeline(n_tokens)
            total, ends, host_done = float(tl.total_s), [float(x) for x in tl.layer_end_s], float(tl.host_done_s)
        else:
            total = self.prefill_s(n_tokens)
            ends, host_done = [total * (i + 1) / layers for i in range(layers)], 0.0
        t_quant = 0.0
        if kv_bits_out is not None and kv_bits_out < self.kv_bits:
            read = n_tokens * 2 * self.llm.kv_dim * self.kv_bits / 8
            write = n_tokens * 2 * self.llm.kv_dim * kv_bits_out / 8
            rf = getattr(self.engine, "roofline", None)
            if rf is not None:
                t_quant = rf.t_kernel_s + (read + write) / (rf.eta_bw * rf.bw_bytes_per_s)
            elif self.mem_bw_bytes_per_s > 0:
                t_quant = (read + write) / self.mem_bw_bytes_per_s
        plan = PrefillPlan(total + layers * t_quant, tuple(e + (k + 1) * t_quant for k, e in enumerate(ends)),
                           host_done)
        self._plans[key] = plan
        return plan

    def decode_batch_s(self, ctxs: Sequence[int]) -> float:
        """One decode step of a batch whose requests sit at contexts ``ctxs``.

        A batch of one reads the exact per-context table. Larger batches use the simulator's contract with batched
        engines: a step's time depends on the batch size and on how many KV entries it reads, i.e. on the mean
        context (paged KV) or the longest one (padded KV) -- as in gpu.latency's batched pass. Each batch size is
        tabulated on a grid of that context, every ``BATCH_GRID_TOKENS`` tokens, by asking the engine for a batch
        of equal contexts, and read by linear interpolation (tests bound the error against direct calls)."""
        b = len(ctxs)
        if b == 1:
            return self.table.step_s(ctxs[0])
        x = max(ctxs) if self.padded_batch else sum(ctxs) / b
        grid = self._batch_grid.setdefault(b, {})
        k0 = int(x // BATCH_GRID_TOKENS) * BATCH_GRID_TOKENS
        y = []
        for k in (k0, k0 + BATCH_GRID_TOKENS):
            if k not in grid:
                try:
                    grid[k] = float(self.engine.decode_batch_s([k] * b))  # type: ignore[attr-defined]
                except HwmodelError:  # a grid point past the memory limit: ask for this step itself
                    return float(self.engine.decode_batch_s(list(ctxs)))  # type: ignore[attr-defined]
            y.append(grid[k])
        w = (x - k0) / BATCH_GRID_TOKENS
        return y[0] + w * (y[1] - y[0])

    def power_w(self, phase: Phase) -> float:
        return self._power[phase]


class DeviceFactory(Protocol):
    """Builds the device model of a GPU group or an FPGA group of a cluster (see module docstring)."""

    def gpu(self, group: Any, spec: GpuSpec, llm: LlmSpec, link: LinkSpec) -> DeviceModel: ...

    def fpga(self, group: Any, llm: LlmSpec, lib: SpecLibrary, where: str, field: str) -> DeviceModel: ...


class EngineFactory:
    """The project's calibrated device models (gpu.latency, fpga.instruction), one engine per distinct group."""

    def __init__(self) -> None:
        self._memo: dict[tuple[Any, ...], DeviceModel] = {}

    def gpu(self, group: Any, spec: GpuSpec, llm: LlmSpec, link: LinkSpec) -> DeviceModel:
        key = ("gpu", spec.name, llm.name, group.framework, group.weight_bits, group.kv_bits,
               group.max_decode_batch, link.name)
        if key not in self._memo:
            try:
                from gpu.latency import GpuEngine
            except ImportError as exc:
                raise HwmodelError(f"the GPU latency model (gpu/latency.py) is not available: {exc}") from None

            engine = GpuEngine(spec, llm, framework=group.framework, weight_bits=group.weight_bits,
                               kv_bits=group.kv_bits)
            self._memo[key] = DeviceModel(
                kind="gpu", label=spec.name, engine=engine, llm=llm, memory_bytes=spec.memory_bytes,
                weights_bytes=int(engine.weights_bytes), kv_bits=group.kv_bits,
                link=link, price_usd=spec.price_usd, max_decode_batch=group.max_decode_batch,
                mem_bw_bytes_per_s=spec.mem_bw_measured_bytes_per_s,
                padded_batch=engine.framework.kv_layout == "padded")
        return self._memo[key]

    def fpga(self, group: Any, llm: LlmSpec, lib: SpecLibrary, where: str, field: str) -> DeviceModel:
        key = ("fpga", group.design, group.prefetch_ratio, group.clock_hz, group.link, group.decode_table, llm.name)
        if key not in self._memo:
            try:
                from fpga.instruction import InstructionEngine, load_design
            except ImportError as exc:
                raise HwmodelError("the instruction-driven FPGA model (fpga/instruction.py) is not available: "
                                   f"{exc}") from None

            try:
                design = load_design(group.design)
            except HwmodelError as exc:
                raise SpecError(where, field, f"a known FPGA design ({exc})", group.design) from None
            if design.llm != llm.name:
                raise SpecError(where, field, f"a design for the cluster's LLM {llm.name!r} (this design runs "
                                f"{design.llm!r})", group.design)
            if group.clock_hz is not None:
                from hwmodel.domains import kernel_clock_problem

                problem = kernel_clock_problem(design.board_spec, group.clock_hz)
                if problem:
                    raise SpecError(where, field.rsplit(".", 1)[0] + ".clock_hz", problem, group.clock_hz)
            engine = InstructionEngine(design, prefetch_ratio=group.prefetch_ratio, clock_hz=group.clock_hz)
            board = lib.board(design.board)
            link = lib.link(group.link or board.host_link)
            self._memo[key] = DeviceModel(
                kind="fpga", label=group.design, engine=engine, llm=llm, memory_bytes=board.memory_bytes,
                weights_bytes=int(engine.weights_bytes), kv_bits=design.kv_bits, link=link,
                price_usd=board.price_usd, max_decode_batch=1, kv_bytes_fn=engine.kv_bytes,
                decode_table=group.decode_table)
        return self._memo[key]
