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

``decoding="sample"`` adds the kernels of ``generate(do_sample=True)``'s logits processors to every eager HF pass
that ends in an LM head (:mod:`gpu.sampling`; no parameter); the default is greedy selection. vLLM passes that end
in an LM head are followed by vLLM's sampler, issued eagerly after the graph replay -- greedy, or top-k/top-p with
penalties for ``decoding="sample"`` (:mod:`gpu.vllm_sampler`) -- and a vLLM step of ``b`` sequences starts after
the engine's host work, ``t_step_vllm_s + (b - 1) * c_seq_vllm_s``.

Attention backend (:attr:`GpuEngine.attention_backend`): vLLM 0.6 picks FlashAttention unless the model has a
sliding window (``vllm/attention/selector.py``: "Cannot use FlashAttention-2 backend due to sliding window"), then
xFormers: prefill through ``memory_efficient_attention`` with a local causal mask, decode through vLLM's own
``paged_attention_v2`` kernel (+ its reduce kernel) over the window's blocks -- so a sliding window bounds the
attention's pairs and keys there (:class:`gpu.kernels.Window`). HF SDPA masks the window and computes every pair.

A model whose weights plus KV cache do not fit the GPU memory is refused with a clear error.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from gpu import launch
from gpu.frameworks import Framework
from gpu.frameworks import framework as get_framework
from gpu.kernels import Pass, Program, Window, build_program
from gpu.params import GpuParams, default_params
from gpu.power import board_power_w, utilisation
from gpu.sampling import DECODINGS, with_sampling
from gpu.vllm_sampler import (
    C_SEQ_PARAM,
    DEFAULT_MAX_NUM_SEQS,
    host_step_s,
    max_batched_tokens,
    pack_prefills,
    sampler_block,
)
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

    CAPABILITIES = frozenset(
        {
            Capability.DECODER,
            Capability.PREFILLER,
            Capability.VECTOR_PREFILLER,
            Capability.INGESTER,
            Capability.SCORER,
            Capability.PREFILL_SCORER,
            Capability.BATCH_DECODER,
            Capability.PREFILL_TIMELINE,
            Capability.OP_COSTED,
            Capability.POWERED,
            Capability.MEMORY_FACTS,
            Capability.OPERATOR_TIMES,
        }
    )
    max_ctx = None  # MemoryFacts: bounded only by memory (``_check_fits`` refuses what does not fit)

    def __init__(
        self,
        gpu: GpuSpec | str,
        llm: LlmSpec | str,
        framework: str | Framework = "vllm",
        weight_bits: int | None = None,
        kv_bits: int = 16,
        params: GpuParams | None = None,
        ref_prompt_tokens: int = 1024,
        ref_ctx: int = 1024,
        decoding: str = "greedy",
        host_op_param: str | None = None,
    ) -> None:
        self.gpu, self.llm = _resolve(gpu, llm)
        self.framework = get_framework(framework)
        fw = self.framework
        if decoding not in DECODINGS:
            raise HwmodelError(f"decoding must be one of {', '.join(DECODINGS)}, got {decoding!r}")
        # eager HF generate(do_sample=True) runs its logits processors as host-issued kernels (gpu.sampling); vLLM's
        # sampler is part of its per-step engine overhead, fitted on sampled runs
        self.decoding = decoding
        self._sampled = decoding == "sample" and fw.program in ("hf", "w8a8")
        self.weight_bits = fw.weight_bits if weight_bits is None else int(weight_bits)
        self.kv_bits = int(kv_bits)
        if self.weight_bits not in fw.allowed_weight_bits:
            raise HwmodelError(
                f"framework {fw.name} runs weights at {'/'.join(map(str, fw.allowed_weight_bits))} "
                f"bits, got weight_bits={self.weight_bits}"
            )
        if self.kv_bits not in fw.allowed_kv_bits:
            raise HwmodelError(
                f"framework {fw.name} keeps the KV cache at {'/'.join(map(str, fw.allowed_kv_bits))} "
                f"bits, got kv_bits={self.kv_bits}"
            )
        self.params = params if params is not None else default_params()
        self.name = f"{self.llm.name}@{self.gpu.name}/{fw.name}"
        self.weights_bytes = resident_bytes(self.llm, self.weight_bits, self.kv_bits, 0)
        self._check_fits(0)
        p = self.params
        self.roofline = launch.Roofline(
            bw_bytes_per_s=self.gpu.mem_bw_bytes_per_s,
            gemm_peak_ops_per_s=self.gpu.peak_ops_per_s(self.weight_bits),
            attn_peak_ops_per_s=self.gpu.fp16_flops,
            eta_bw=p["eta_bw"],
            eta_compute=p[fw.compute_eff_param],
            n_half_tokens=p["n_half_tokens"],
            t_kernel_s=p["t_kernel_s"],
            eta_copy=p.values.get("eta_copy_hf"),
        )
        # the host that issues eager kernels: the framework's default, or another measured host's parameter
        self.c_op_s = p[host_op_param or fw.host_op_param]
        self.t_step_s = p["t_step_vllm_s"] if fw.engine_step else 0.0
        self.c_seq_s = p[C_SEQ_PARAM] if fw.engine_step else 0.0
        self._vllm_sampler = fw.engine_step and self.llm.output_head == "lm"
        self.attention_backend, self.window = self._attention_backend()
        self._decode_program = "vllm-paged" if self.attention_backend == "xformers" else fw.program
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
                f"{need / 1e9:.2f} GB, the GPU has {self.gpu.memory_bytes / 1e9:.2f} GB"
            )

    def _attention_backend(self) -> tuple[str, Window | None]:
        """vLLM 0.6's attention backend for this model, and the window its kernels apply (None: full attention)."""
        fw, llm = self.framework, self.llm
        if fw.program == "hf" or fw.program == "w8a8":
            return "sdpa", None
        if not fw.engine_step:
            return "fused", None
        if llm.sliding_window <= 0:
            return "flash-attn", None
        return "xformers", Window(llm.sliding_window, llm.full_attention_layers / llm.layers)

    def _run(self, p: Pass, graph: bool, head: str = "auto", decode: bool = False) -> tuple[launch.Timeline, Program]:
        program = self._decode_program if decode else self.framework.program
        prog = build_program(self.llm, program, p, self.weight_bits, self.kv_bits, head)
        lm = head == "auto" and self.llm.output_head == "lm"
        if self._sampled and lm:
            prog = with_sampling(prog, self.llm.vocab, p)
        start_s = host_step_s(self.t_step_s, self.c_seq_s, p.seqs)
        if not (self._vllm_sampler and lm):
            run = launch.graph if graph else launch.eager
            return run(self.c_op_s, launch.PassTimes.of(prog, self.roofline), start_s=start_s), prog
        tail = sampler_block(self.llm.vocab, p, self.decoding)
        full = prog.with_epilogue(tail)
        if not graph:
            return launch.eager(self.c_op_s, launch.PassTimes.of(full, self.roofline), start_s=start_s), full
        tl = launch.graph(self.c_op_s, launch.PassTimes.of(prog, self.roofline), start_s=start_s)
        return launch.then_eager(self.c_op_s, launch.block_times_s(tail, prog, self.roofline), tl), full

    def _cost(self, tl: launch.Timeline, prog: Program) -> OpCost:
        t = float(tl.total_s[0])
        busy = float(tl.gpu_busy_s[0])
        n_bytes, ops = float(prog.total_bytes()[0]), float(prog.total_ops()[0])
        u = utilisation(self.gpu, n_bytes, ops, t, self.weight_bits)
        rf = self.roofline
        parts = {
            "memory": n_bytes / (rf.eta_bw * rf.bw_bytes_per_s),
            "compute": ops / (rf.eta_compute * rf.gemm_peak_ops_per_s),
            "kernel overhead": prog.n_kernels * rf.t_kernel_s,
        }
        bound = "host" if busy < 0.7 * t else max(parts, key=lambda k: parts[k])
        return OpCost(
            time_s=t,
            gpu_busy_s=busy,
            host_done_s=float(tl.host_done_s[0]),
            dram_bytes=n_bytes,
            ops=ops,
            kernels=prog.n_kernels,
            power_w=float(board_power_w(self.gpu, u, self.power_gamma)),
            bound=bound,
        )

    def _head_rows(self, n: int) -> int:
        return n if self.llm.output_head == "value" else 1

    def _decode_block(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        if b not in self._decode_blocks:
            ctxs = np.arange(b * _BLOCK, (b + 1) * _BLOCK)
            tl, prog = self._run(
                Pass.single(1, ctxs, window=self.window), graph=self.framework.decode_graph, decode=True
            )
            u = utilisation(self.gpu, prog.total_bytes(), prog.total_ops(), tl.total_s, self.weight_bits)
            self._decode_blocks[b] = (tl.total_s, board_power_w(self.gpu, u, self.power_gamma))
        return self._decode_blocks[b]

    # ------------------------------------------------------------------------------------------------ engine API
    def operator_times_s(self, n_tokens: int, ctx: int) -> dict[str, float]:
        """GPU time per layer of each canonical operator (:mod:`hwmodel.interop.vidur`): the roofline time of the
        framework's kernels of one single-sequence pass, grouped by the operator they implement (activation
        quantization kernels go with the projection they feed). Host launch overhead is not included: serving
        simulators model CPU overheads on their own."""
        p = Pass.single(n_tokens, ctx, 1, self.window)
        prog = build_program(self.llm, self.framework.program, p, self.weight_bits, self.kv_bits, "auto")
        times = launch.PassTimes.of(prog, self.roofline)
        out = dict.fromkeys(
            (
                "input_norm",
                "qkv_proj",
                "rope",
                "kv_write",
                "attention",
                "o_proj",
                "residual_add",
                "post_norm",
                "up_proj",
                "act",
                "down_proj",
            ),
            0.0,
        )
        for name, t in zip(prog.layer.names, np.asarray(times.layer)[:, 0]):
            out[kernel_operator(name)] += float(t)
        out["embed"] = float(
            sum(t for name, t in zip(prog.prologue.names, np.asarray(times.prologue)[:, 0]) if name == "embedding")
        )
        return out

    def prefill_cost(self, n_tokens: int, ctx: int = 0) -> OpCost:
        """Prefill of ``n_tokens`` on top of ``ctx`` cached tokens, with its breakdown."""
        n = _count("prefill tokens", n_tokens, 1)
        c = _count("context length", ctx, 0)
        self._check_fits(c + n)
        key = (n, c)
        if key not in self._prefill_memo:
            if len(self._prefill_memo) >= _MEMO_LIMIT:
                self._prefill_memo.clear()
            p = Pass.single(n, c, self._head_rows(n), self.window)
            self._prefill_memo[key] = self._cost(*self._run(p, graph=False))
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
        tl, prog = self._run(Pass.single(n, c, head, self.window), graph=False)
        u = utilisation(self.gpu, prog.total_bytes(), prog.total_ops(), tl.total_s, self.weight_bits)
        return (
            np.asarray(tl.total_s, dtype=float),
            np.asarray(board_power_w(self.gpu, u, self.power_gamma), dtype=float),
        )

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
        return self._cost(
            *self._run(Pass.single(1, c, window=self.window), graph=self.framework.decode_graph, decode=True)
        )

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
            tl, prog = self._run(
                Pass.single(1, np.arange(c0, c0 + n), window=self.window),
                graph=self.framework.decode_graph,
                decode=True,
            )
            u = utilisation(self.gpu, prog.total_bytes(), prog.total_ops(), tl.total_s, self.weight_bits)
            return tl.total_s, board_power_w(self.gpu, u, self.power_gamma)
        blocks = range(c0 // _BLOCK, (c0 + n - 1) // _BLOCK + 1)
        t = np.concatenate([self._decode_block(b)[0] for b in blocks])
        pw = np.concatenate([self._decode_block(b)[1] for b in blocks])
        lo = c0 - blocks[0] * _BLOCK
        return t[lo : lo + n], pw[lo : lo + n]

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        """Forward passes over ``n_tokens`` tokens that arrive from elsewhere; logits discarded (KV filled)."""
        n = _count("ingest tokens", n_tokens, 0)
        c = _count("context length", ctx, 0)
        if n == 0:
            return 0.0
        self._check_fits(c + n)
        graph = self.framework.decode_graph and n == 1
        tl, _prog = self._run(Pass.single(n, c, window=self.window), graph=graph, head="none")
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
        tl, _prog = self._run(
            Pass.decode_batch(np.array(cs), padded, self.window), graph=self.framework.decode_graph, decode=True
        )
        return float(tl.total_s[0])

    def prefill_batch_cost(self, prompts: Sequence[int]) -> OpCost:
        """One batched prefill of whole prompts (no cached context): every prompt's tokens in one pass, one step of
        the engine (vLLM: the host's per-sequence work for each prompt, one LM-head row and sampler row each)."""
        ns = [_count("prompt tokens", n, 1) for n in prompts]
        if not ns:
            raise HwmodelError("a batched prefill needs at least one prompt")
        self._check_fits(sum(ns))
        p = Pass.prefill_batch(np.array(ns), self.window)
        if self.llm.output_head == "value":
            p = dataclasses.replace(p, head_rows=p.new_tokens)
        return self._cost(*self._run(p, graph=False))

    def prefill_steps(
        self,
        prompts: Sequence[int],
        max_num_batched_tokens: int | None = None,
        max_num_seqs: int = DEFAULT_MAX_NUM_SEQS,
    ) -> list[tuple[list[int], float]]:
        """Waiting prompts prefilled as vLLM 0.6's scheduler batches them (no chunked prefill): whole prompts, first
        come first served, packed into a step while their tokens fit the token budget (default
        ``max(max_model_len, 2048)``, max_model_len = the LLM's context) and their count ``max_num_seqs``
        (:func:`gpu.vllm_sampler.pack_prefills`). Returns each step's prompts and time."""
        budget = (
            max_num_batched_tokens if max_num_batched_tokens is not None else max_batched_tokens(self.llm.max_position)
        )
        steps = pack_prefills(
            [_count("prompt tokens", n, 1) for n in prompts],
            _count("token budget", budget, 1),
            _count("max_num_seqs", max_num_seqs, 1),
        )
        return [(step, self.prefill_batch_cost(step).time_s) for step in steps]

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
        tl, _prog = self._run(Pass.single(n, c, self._head_rows(n), self.window), graph=False)
        return PrefillTimeline(
            total_s=float(tl.total_s[0]),
            layer_end_s=tuple(float(x) for x in tl.layer_end_s[:, 0]),
            host_done_s=float(tl.host_done_s[0]),
        )

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


_KERNEL_OPERATORS = (  # (kernel name or prefix, canonical operator), first match wins
    ("fused_add_rmsnorm_1", "input_norm"),
    ("input_norm", "input_norm"),
    ("fused_add_rmsnorm_2", "post_norm"),
    ("post_norm", "post_norm"),
    ("qkv_in.", "qkv_proj"),
    ("qkv_proj", "qkv_proj"),
    ("q_proj", "qkv_proj"),
    ("k_proj", "qkv_proj"),
    ("v_proj", "qkv_proj"),
    ("rotary", "rope"),
    ("rope_", "rope"),
    ("reshape_and_cache", "kv_write"),
    ("cache_cat_", "kv_write"),
    ("attention", "attention"),
    ("sdpa", "attention"),
    ("transpose", "attention"),
    ("repeat_kv", "attention"),
    ("o_in.", "o_proj"),
    ("o_proj", "o_proj"),
    ("residual_", "residual_add"),
    ("mlp_in.", "up_proj"),
    ("gate_up_proj", "up_proj"),
    ("gate_proj", "up_proj"),
    ("up_proj", "up_proj"),
    ("silu_and_mul", "act"),
    ("silu", "act"),
    ("mul", "act"),
    ("down_in.", "down_proj"),
    ("down_proj", "down_proj"),
)


def kernel_operator(name: str) -> str:
    """The canonical operator a framework kernel implements (a kernel no rule knows is an error, never dropped)."""
    for prefix, op in _KERNEL_OPERATORS:
        if name == prefix or name.startswith(prefix + ".") or (prefix.endswith((".", "_")) and name.startswith(prefix)):
            return op
    raise HwmodelError(f"GPU kernel '{name}' maps to no operator (gpu/latency.py _KERNEL_OPERATORS)")
