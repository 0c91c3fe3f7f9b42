"""GPU engine: latency and power of prefill, decode, PRM scoring, ingest and batched decode, per serving framework.

``GpuEngine(gpu, llm, framework)`` implements :class:`hwmodel.engine.Engine`. Every operation is one forward pass:
its kernels come from the LLM's shapes and the framework's program (:mod:`gpu.kernels`), their time from a
per-kernel roofline with calibrated efficiencies and the host's launch queue (:mod:`gpu.launch`), its power from
the utilisation it achieves (:mod:`gpu.power`). The parameters are the committed fit (``calibration/params/
gpu.json``; ``hwmodel calibrate --report`` shows every measured point against the model).

Operations (``ctx`` = tokens already in the KV cache):

* ``prefill_s(n, ctx)`` -- ``n`` new tokens, logits of the last one; vLLM prefills eagerly (no CUDA graph).
* ``decode_s(ctx)`` -- one token; a CUDA-graph replay for ``vllm``, host-issued kernels otherwise.
* ``ingest_s(n, ctx)`` -- ``n`` tokens whose logits are discarded (no output head).
* ``score_s(n, ctx, prefix_cache)`` -- a PRM pass (prefill only, value head on every token): without prefix caching
  the whole context ``ctx + n`` is recomputed every call; with it only the ``n`` new tokens.
* ``decode_batch_s(ctxs)`` -- one decode step of a batch (paged KV for vLLM; padded to the longest for HF).

A model whose weights plus KV cache do not fit the GPU memory is refused with a clear error.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from gpu import launch
from gpu.frameworks import Framework, framework as get_framework
from gpu.kernels import Pass, Program, build_program
from gpu.params import GpuParams, default_params
from gpu.power import board_power_w, utilisation
from hwmodel.bounds import resident_bytes
from hwmodel.engine import Capability, Phase
from hwmodel.errors import HwmodelError
from hwmodel.specs import GpuSpec, LlmSpec, library

_BLOCK = 256  # decode times are computed (vectorized) and memoized per block of context lengths
_MEMO_LIMIT = 1 << 16  # prefill results kept per engine (cleared when full)


class DoesNotFitError(HwmodelError):
    """The model's weights plus KV cache exceed the GPU memory."""


@dataclasses.dataclass(frozen=True)
class OpCost:
    """One operation: time, where it went, and what it moved."""

    time_s: float
    gpu_busy_s: float  # sum of kernel times on the GPU
    host_done_s: float  # when the host finished issuing (host-bound when close to time_s)
    dram_bytes: float
    ops: float
    kernels: int
    power_w: float
    bound: str  # what limits it: "host" (issue/engine overhead), "memory", "compute" or "kernel overhead"

    @property
    def energy_j(self) -> float:
        return self.power_w * self.time_s


@dataclasses.dataclass(frozen=True)
class PrefillTimeline:
    """When each decoder layer of a prefill finished on the GPU (what a layer-by-layer KV migration waits on)."""

    total_s: float
    layer_end_s: tuple[float, ...]
    host_done_s: float


def _resolve(gpu: GpuSpec | str, llm: LlmSpec | str) -> tuple[GpuSpec, LlmSpec]:
    lib = library()
    return (lib.gpu(gpu) if isinstance(gpu, str) else gpu), (lib.llm(llm) if isinstance(llm, str) else llm)


def _count(name: str, value: int, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise HwmodelError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class GpuEngine:
    """An LLM on a GPU under a serving framework (implements :class:`hwmodel.engine.Engine`)."""

    CAPABILITIES = frozenset({
        Capability.DECODER, Capability.PREFILLER, Capability.VECTOR_PREFILLER, Capability.INGESTER,
        Capability.SCORER, Capability.PREFILL_SCORER, Capability.BATCH_DECODER, Capability.PREFILL_TIMELINE,
        Capability.OP_COSTED, Capability.POWERED, Capability.MEMORY_FACTS})
    max_ctx = None  # MemoryFacts: bounded only by memory (``_check_fits`` refuses what does not fit)

    def __init__(self, gpu: GpuSpec | str, llm: LlmSpec | str, framework: str | Framework = "vllm",
                 weight_bits: int | None = None, kv_bits: int = 16, params: GpuParams | None = None,
                 ref_prompt_tokens: int = 1024, ref_ctx: int = 1024) -> None:
        self.gpu, self.llm = _resolve(gpu, llm)
        self.framework = get_framework(framework)
        fw = self.framework
        self.weight_bits = fw.weight_bits if weight_bits is None else int(weight_bits)
        self.kv_bits = int(kv_bits)
        if self.weight_bits not in fw.allowed_weight_bits:
            raise HwmodelError(f"framework {fw.name} runs weights at {'/'.join(map(str, fw.allowed_weight_bits))} "
                               f"bits, got weight_bits={self.weight_bits}")
        if self.kv_bits not in fw.allowed_kv_bits:
            raise HwmodelError(f"framework {fw.name} keeps the KV cache at {'/'.join(map(str, fw.allowed_kv_bits))} "
                               f"bits, got kv_bits={self.kv_bits}")
        self.params = params if params is not None else default_params()
        self.name = f"{self.llm.name}@{self.gpu.name}/{fw.name}"
        self.weights_bytes = resident_bytes(self.llm, self.weight_bits, self.kv_bits, 0)
        self._check_fits(0)
        p = self.params
        self.roofline = launch.Roofline(
            bw_bytes_per_s=self.gpu.mem_bw_bytes_per_s, gemm_peak_ops_per_s=self.gpu.peak_ops_per_s(self.weight_bits),
            attn_peak_ops_per_s=self.gpu.fp16_flops, eta_bw=p["eta_bw"], eta_compute=p[fw.compute_eff_param],
            n_half_tokens=p["n_half_tokens"], t_kernel_s=p["t_kernel_s"])
        self.c_op_s = p[fw.host_op_param]
        self.t_step_s = p["t_step_vllm_s"] if fw.engine_step else 0.0
        self.power_gamma = p["power_gamma"]
        self.ref_prompt_tokens = ref_prompt_tokens
        self.ref_ctx = ref_ctx
        self._decode_blocks: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._prefill_memo: dict[tuple[int, int], OpCost] = {}

    def __repr__(self) -> str:
        return f"GpuEngine({self.name}, W{self.weight_bits}/KV{self.kv_bits})"

    # ------------------------------------------------------------------------------------------------ internals
    def _check_fits(self, kv_tokens: int) -> None:
        need = self.weights_bytes + self.llm.kv_bytes(kv_tokens, self.kv_bits)
        if need > self.gpu.memory_bytes:
            what = "weights" if kv_tokens == 0 else f"weights + KV cache of {kv_tokens} tokens"
            raise DoesNotFitError(
                f"{self.llm.name} does not fit {self.gpu.name}: {what} at W{self.weight_bits}/KV{self.kv_bits} need "
                f"{need / 1e9:.2f} GB, the GPU has {self.gpu.memory_bytes / 1e9:.2f} GB")

    def _run(self, p: Pass, graph: bool, head: str = "auto") -> tuple[launch.Timeline, Program]:
        prog = build_program(self.llm, self.framework.program, p, self.weight_bits, self.kv_bits, head)
        times = launch.PassTimes.of(prog, self.roofline)
        run = launch.graph if graph else launch.eager
        return run(self.c_op_s, times, start_s=self.t_step_s), prog

    def _cost(self, tl: launch.Timeline, prog: Program) -> OpCost:
        t = float(tl.total_s[0])
        busy = float(tl.gpu_busy_s[0])
        n_bytes, ops = float(prog.total_bytes()[0]), float(prog.total_ops()[0])
        u = utilisation(self.gpu, n_bytes, ops, t, self.weight_bits)
        rf = self.roofline
        parts = {"memory": n_bytes / (rf.eta_bw * rf.bw_bytes_per_s),
                 "compute": ops / (rf.eta_compute * rf.gemm_peak_ops_per_s),
                 "kernel overhead": prog.n_kernels * rf.t_kernel_s}
        bound = "host" if busy < 0.7 * t else max(parts, key=lambda k: parts[k])
        return OpCost(time_s=t, gpu_busy_s=busy, host_done_s=float(tl.host_done_s[0]), dram_bytes=n_bytes, ops=ops,
                      kernels=prog.n_kernels, power_w=float(board_power_w(self.gpu, u, self.power_gamma)), bound=bound)

    def _head_rows(self, n: int) -> int:
        return n if self.llm.output_head == "value" else 1

    def _decode_block(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        if b not in self._decode_blocks:
            ctxs = np.arange(b * _BLOCK, (b + 1) * _BLOCK)
            tl, prog = self._run(Pass.single(1, ctxs), graph=self.framework.decode_graph)
            u = utilisation(self.gpu, prog.total_bytes(), prog.total_ops(), tl.total_s, self.weight_bits)
            self._decode_blocks[b] = (tl.total_s, board_power_w(self.gpu, u, self.power_gamma))
        return self._decode_blocks[b]

    # ------------------------------------------------------------------------------------------------ engine API
    def prefill_cost(self, n_tokens: int, ctx: int = 0) -> OpCost:
        """Prefill of ``n_tokens`` on top of ``ctx`` cached tokens, with its breakdown."""
        n = _count("prefill tokens", n_tokens, 1)
        c = _count("context length", ctx, 0)
        self._check_fits(c + n)
        key = (n, c)
        if key not in self._prefill_memo:
            if len(self._prefill_memo) >= _MEMO_LIMIT:
                self._prefill_memo.clear()
            self._prefill_memo[key] = self._cost(*self._run(Pass.single(n, c, self._head_rows(n)), graph=False))
        return self._prefill_memo[key]

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        """Prefill ``n_tokens`` new tokens on top of ``ctx`` cached ones (logits of the last one)."""
        return self.prefill_cost(n_tokens, ctx).time_s

    def prefill_many(self, n_tokens: np.ndarray, ctx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(time_s, power_w)`` of :meth:`prefill_cost` at many points ``(n_tokens[i], ctx[i])`` in one vectorized
        pass (the same kernel program, roofline, eager launch queue and board power, element by element;
        tests/test_reasoning_engines.py proves it equal to ``prefill_cost`` point by point). Refuses the batch if
        any point does not fit."""
        n = np.asarray(n_tokens, dtype=np.float64)
        c = np.asarray(ctx, dtype=np.float64)
        if n.size and (n.min() < 1 or c.min() < 0):
            raise HwmodelError("prefill points need at least one token and a non-negative context")
        if n.size:
            self._check_fits(int((n + c).max()))
        head = n if self.llm.output_head == "value" else np.ones_like(n)
        tl, prog = self._run(Pass.single(n, c, head), graph=False)
        u = utilisation(self.gpu, prog.total_bytes(), prog.total_ops(), tl.total_s, self.weight_bits)
        return (np.asarray(tl.total_s, dtype=float),
                np.asarray(board_power_w(self.gpu, u, self.power_gamma), dtype=float))

    # ---- MemoryFacts
    @property
    def memory_capacity_bytes(self) -> int:
        return int(self.gpu.memory_bytes)

    @property
    def resident_bytes(self) -> int:
        """Weights and everything else resident, KV cache excluded."""
        return int(self.weights_bytes)

    def kv_bytes(self, ctx: int) -> int:
        """Bytes of one sequence's KV cache at ``ctx`` tokens (at the engine's KV precision)."""
        return int(self.llm.kv_bytes(ctx, self.kv_bits))

    def decode_cost(self, ctx: int) -> OpCost:
        """One decode step at context ``ctx``, with its breakdown."""
        c = _count("context length", ctx, 0)
        self._check_fits(c + 1)
        return self._cost(*self._run(Pass.single(1, c), graph=self.framework.decode_graph))

    def decode_s(self, ctx: int) -> float:
        """Decode one token at context length ``ctx`` (memoized per block of contexts)."""
        c = _count("context length", ctx, 0)
        self._check_fits(c + 1)
        return float(self._decode_block(c // _BLOCK)[0][c % _BLOCK])

    def decode_steps_s(self, ctx0: int, n_steps: int) -> np.ndarray:
        """Times of ``n_steps`` consecutive decode steps at contexts ``ctx0, ctx0 + 1, ...``."""
        c0 = _count("context length", ctx0, 0)
        n = _count("decode steps", n_steps, 0)
        if n == 0:
            return np.zeros(0)
        self._check_fits(c0 + n)
        return self._decode_range(c0, n)[0]

    def _decode_range(self, c0: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        if n > _BLOCK:  # a long run (a whole generation): one vectorized pass, not memoized
            tl, prog = self._run(Pass.single(1, np.arange(c0, c0 + n)), graph=self.framework.decode_graph)
            u = utilisation(self.gpu, prog.total_bytes(), prog.total_ops(), tl.total_s, self.weight_bits)
            return tl.total_s, board_power_w(self.gpu, u, self.power_gamma)
        blocks = range(c0 // _BLOCK, (c0 + n - 1) // _BLOCK + 1)
        t = np.concatenate([self._decode_block(b)[0] for b in blocks])
        pw = np.concatenate([self._decode_block(b)[1] for b in blocks])
        lo = c0 - blocks[0] * _BLOCK
        return t[lo:lo + n], pw[lo:lo + n]

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        """Forward passes over ``n_tokens`` tokens that arrive from elsewhere; logits discarded (KV filled)."""
        n = _count("ingest tokens", n_tokens, 0)
        c = _count("context length", ctx, 0)
        if n == 0:
            return 0.0
        self._check_fits(c + n)
        graph = self.framework.decode_graph and n == 1
        tl, _prog = self._run(Pass.single(n, c), graph=graph, head="none")
        return float(tl.total_s[0])

    def score_cost(self, n_tokens: int, ctx: int, prefix_cache: bool = False) -> OpCost:
        """A PRM scoring pass (see :meth:`score_s`), with its breakdown."""
        return self.prefill_cost(*self.score_pass(n_tokens, ctx, prefix_cache))

    def score_pass(self, n_tokens: int, ctx: int, prefix_cache: bool = False) -> tuple[int, int]:
        """The ``(tokens, ctx)`` of the prefill pass that scores a step (a PRM scores with a prefill): the new
        tokens on top of the cached prefix with prefix caching, the whole context from scratch without."""
        n = _count("scored tokens", n_tokens, 1)
        c = _count("context length", ctx, 0)
        return (n, c) if prefix_cache else (c + n, 0)

    def score_s(self, n_tokens: int, ctx: int, prefix_cache: bool = False) -> float:
        """Score a step of ``n_tokens`` after ``ctx`` tokens with a prefill-only pass: the whole ``ctx + n_tokens``
        without prefix caching (RSD's PRM server re-sends the full prefix), only the new tokens with it."""
        return self.score_cost(n_tokens, ctx, prefix_cache).time_s

    def decode_batch_s(self, ctxs: Sequence[int]) -> float:
        """One decode step of a batch whose sequences sit at contexts ``ctxs`` (one new token each)."""
        cs = [_count("context length", c, 0) for c in ctxs]
        if not cs:
            raise HwmodelError("a decode batch needs at least one sequence")
        padded = self.framework.kv_layout == "padded"
        self._check_fits(len(cs) * (max(cs) + 1) if padded else sum(c + 1 for c in cs))
        tl, _prog = self._run(Pass.decode_batch(np.array(cs), padded), graph=self.framework.decode_graph)
        return float(tl.total_s[0])

    def generate_s(self, prompt_tokens: int, output_tokens: int) -> float:
        """End-to-end time to generate ``output_tokens`` after a ``prompt_tokens`` prompt (batch 1): the prefill
        yields the first token, then ``output_tokens - 1`` decode steps."""
        n = _count("prompt tokens", prompt_tokens, 1)
        out = _count("output tokens", output_tokens, 1)
        return self.prefill_s(n) + float(np.sum(self.decode_steps_s(n, out - 1)))

    def prefill_timeline(self, n_tokens: int, ctx: int = 0) -> PrefillTimeline:
        """When each decoder layer of a prefill finishes (for KV migration overlapped with the prefill)."""
        n = _count("prefill tokens", n_tokens, 1)
        c = _count("context length", ctx, 0)
        self._check_fits(c + n)
        tl, _prog = self._run(Pass.single(n, c, self._head_rows(n)), graph=False)
        return PrefillTimeline(total_s=float(tl.total_s[0]), layer_end_s=tuple(float(x) for x in tl.layer_end_s[:, 0]),
                               host_done_s=float(tl.host_done_s[0]))

    # ------------------------------------------------------------------------------------------------ power
    def decode_power_w(self, ctx: int) -> float:
        """Average board power during one decode step at context ``ctx``."""
        c = _count("context length", ctx, 0)
        self._check_fits(c + 1)
        return float(self._decode_block(c // _BLOCK)[1][c % _BLOCK])

    def decode_energy_j(self, ctx0: int, n_steps: int) -> float:
        """Energy of ``n_steps`` decode steps from context ``ctx0`` (power x time, step by step)."""
        c0 = _count("context length", ctx0, 0)
        n = _count("decode steps", n_steps, 0)
        if n == 0:
            return 0.0
        self._check_fits(c0 + n)
        t, pw = self._decode_range(c0, n)
        return float(np.sum(t * pw))

    def power_w(self, phase: Phase) -> float:
        """Average board power in ``phase``, at the engine's reference point (prefill/score/ingest of
        ``ref_prompt_tokens``, decode at ``ref_ctx``); idle power when idle; a copy engine's DMA traffic (one host
        link's bandwidth through DRAM) during transfers."""
        phase = Phase(phase)
        if phase is Phase.IDLE:
            return float(self.gpu.idle_power_w)
        if phase is Phase.DECODE:
            return self.decode_power_w(min(self.ref_ctx, self._max_ctx()))
        if phase is Phase.TRANSFER:
            link = library().link(self.gpu.host_link)
            u = link.effective_bw_bytes_per_s / self.gpu.mem_bw_bytes_per_s
            return float(board_power_w(self.gpu, u, self.power_gamma))
        n = max(1, min(self.ref_prompt_tokens, self._max_ctx()))
        return self.prefill_cost(n).power_w

    def _max_ctx(self) -> int:
        free = self.gpu.memory_bytes - self.weights_bytes
        return max(0, int(free // max(1, self.llm.kv_bytes(1, self.kv_bits))) - 1)
