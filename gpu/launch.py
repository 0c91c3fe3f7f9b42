"""Time of a forward pass: per-kernel roofline on the GPU, and the host that issues the kernels.

GPU side: a kernel takes ``t_kernel + max(bytes / (eta_bw * BW), ops / (eta_c(n) * peak))`` -- a roofline with a
fixed per-kernel cost (launch latency, ramp-up and tail of a small grid). ``eta_bw`` is the fraction of peak DRAM
bandwidth a streaming kernel sustains; the eager KV-cache copies of the hf program (:data:`COPY_KERNELS`:
``torch.cat`` of DynamicCache, ``repeat_kv``'s expand + reshape) sustain ``eta_copy`` instead -- generic strided
copy kernels (index arithmetic per element, a read and a write stream) that reach a smaller fraction of peak than a
GEMV's one read stream; ``eta_c(n) = eta_max * n / (n + n_half)`` is the tensor-core efficiency of a
GEMM with ``n`` rows (tokens): small row counts fill few tiles (the ``mma`` M-tile is 16 rows on Ampere), large ones
approach ``eta_max``. Attention uses the fp16 peak and the rows of one sequence; elementwise kernels only move bytes.

Host side, two execution modes:

* **eager** -- the host issues the kernels one by one, ``c_op`` seconds each (Python module call, PyTorch
  dispatch, launch), into the stream's queue; the GPU starts kernel k at ``max(its issue time, end of kernel k-1)``.
  A pass ends when the queue is drained (the host syncs for the next token). When the host is slower than the GPU
  (small models, short prompts), time is host-bound; when the GPU is slower, the host runs ahead and time is
  GPU-bound; in between, short kernels expose the host and long ones hide it, kernel by kernel.
* **graph** -- one CUDA graph launch: the kernels run back to back on the GPU with no host in between.

The decoder layer repeats ``L`` times, so the eager queue over ``L * K`` kernels is solved per layer in closed form
(a max-plus recurrence, exact; :func:`eager_reference` is the kernel-by-kernel loop the tests compare it with).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gpu.kernels import ELT, GEMM, Block, Program, column_sum


@dataclasses.dataclass(frozen=True)
class Roofline:
    """The GPU-side parameters of the kernel time model."""

    bw_bytes_per_s: float  # peak DRAM bandwidth (spec)
    gemm_peak_ops_per_s: float  # tensor peak at the weight precision (spec)
    attn_peak_ops_per_s: float  # fp16 tensor peak (spec)
    eta_bw: float  # sustained fraction of peak bandwidth (fitted)
    eta_compute: float  # tensor-core efficiency of large GEMMs (fitted, per framework)
    n_half_tokens: float  # rows at which a GEMM reaches half of eta_compute (fixed)
    t_kernel_s: float  # per-kernel GPU overhead (fitted)
    eta_copy: float | None = (
        None  # sustained fraction of peak bandwidth of eager KV-cache copies (fitted; None: eta_bw)
    )


#: eager PyTorch copies of the KV cache (gpu.kernels' hf program): ``torch.cat`` growing DynamicCache and the
#: ``expand().reshape()`` of ``repeat_kv``; they run at ``Roofline.eta_copy`` of peak bandwidth
COPY_KERNELS = frozenset({"cache_cat_k", "cache_cat_v", "repeat_kv_k", "repeat_kv_v"})


def _copy_mask(block: Block) -> np.ndarray:
    return np.array([n in COPY_KERNELS for n in block.names], dtype=bool)


def block_times_s(block: Block, prog: Program, rf: Roofline) -> np.ndarray:
    """GPU time of every kernel of ``block`` at every point (kernels x points)."""
    if block.n_kernels == 0:
        return np.zeros((0, len(prog.rows)))
    mem = block.bytes / (rf.eta_bw * rf.bw_bytes_per_s)
    if rf.eta_copy is not None:
        copies = _copy_mask(block)
        if copies.any():
            mem = np.where(copies[:, None], block.bytes / (rf.eta_copy * rf.bw_bytes_per_s), mem)
    eff_gemm = rf.eta_compute * prog.rows / (prog.rows + rf.n_half_tokens)
    eff_attn = rf.eta_compute * prog.rows_per_seq / (prog.rows_per_seq + rf.n_half_tokens)
    kinds = block.kinds[:, None]
    peak = np.where(kinds == GEMM, rf.gemm_peak_ops_per_s * eff_gemm, rf.attn_peak_ops_per_s * eff_attn)
    comp = np.where(kinds == ELT, 0.0, block.ops / peak)
    return rf.t_kernel_s + np.maximum(mem, comp)


@dataclasses.dataclass(frozen=True)
class PassTimes:
    """GPU time of every kernel of a pass (kernels x points per block)."""

    prologue: np.ndarray
    layer: np.ndarray
    epilogue: np.ndarray
    layers: int

    @staticmethod
    def of(prog: Program, rf: Roofline) -> PassTimes:
        return PassTimes(
            block_times_s(prog.prologue, prog, rf),
            block_times_s(prog.layer, prog, rf),
            block_times_s(prog.epilogue, prog, rf),
            prog.layers,
        )

    def gpu_busy_s(self) -> np.ndarray:
        return column_sum(self.prologue) + self.layers * column_sum(self.layer) + column_sum(self.epilogue)


@dataclasses.dataclass(frozen=True)
class Timeline:
    """When a pass ends, when the host finished issuing it, and when each decoder layer finished on the GPU.

    Times are seconds from the start of the pass; arrays have one entry per point (``layer_end_s``: layers x points).
    """

    total_s: np.ndarray
    host_done_s: np.ndarray
    gpu_busy_s: np.ndarray
    layer_end_s: np.ndarray


def _queue(c_op_s: float, g: np.ndarray, cpu: np.ndarray, gpu: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Issue kernels with GPU times ``g`` (kernels x points) one by one: returns (host time, GPU free time)."""
    for gk in g:
        cpu = cpu + c_op_s
        gpu = np.maximum(gpu, cpu) + gk
    return cpu, gpu


def eager(c_op_s: float, t: PassTimes, start_s: float = 0.0) -> Timeline:
    """Host-issued pass (closed form over the repeated layer; see the module docstring)."""
    m = t.layer.shape[1] if t.layer.size else max(t.prologue.shape[1], t.epilogue.shape[1])
    cpu0 = np.full(m, float(start_s))
    cpu, gpu = _queue(c_op_s, t.prologue, cpu0, cpu0.copy())
    k = t.layer.shape[0]
    big_l = t.layers
    c_layer = k * c_op_s
    g_layer = column_sum(t.layer)
    # H: lag of the GPU behind the host after one layer that started with the GPU idle
    issue = c_op_s * np.arange(1, k + 1)[:, None]
    suffix = np.cumsum(t.layer[::-1], axis=0)[::-1]
    h = np.max(issue + suffix, axis=0) - c_layer
    d0 = gpu - cpu
    delta = g_layer - c_layer
    ell = np.arange(1, big_l + 1)[:, None]
    lag = np.maximum(d0 + ell * delta, h + (ell - 1) * np.maximum(delta, 0.0))
    layer_end = cpu + ell * c_layer + lag
    cpu = cpu + big_l * c_layer
    gpu = layer_end[-1]
    cpu, gpu = _queue(c_op_s, t.epilogue, cpu, gpu)
    return Timeline(total_s=gpu, host_done_s=cpu, gpu_busy_s=t.gpu_busy_s(), layer_end_s=layer_end)


def eager_reference(c_op_s: float, t: PassTimes, start_s: float = 0.0) -> Timeline:
    """The same pass kernel by kernel over every layer (slow; the reference :func:`eager` is tested against)."""
    m = t.layer.shape[1]
    cpu = np.full(m, float(start_s))
    gpu = cpu.copy()
    cpu, gpu = _queue(c_op_s, t.prologue, cpu, gpu)
    ends = []
    for _ in range(t.layers):
        cpu, gpu = _queue(c_op_s, t.layer, cpu, gpu)
        ends.append(gpu)
    cpu, gpu = _queue(c_op_s, t.epilogue, cpu, gpu)
    return Timeline(total_s=gpu, host_done_s=cpu, gpu_busy_s=t.gpu_busy_s(), layer_end_s=np.array(ends))


def graph(c_launch_s: float, t: PassTimes, start_s: float = 0.0) -> Timeline:
    """CUDA-graph replay: one host launch, then every kernel back to back on the GPU."""
    start = float(start_s) + c_launch_s
    ell = np.arange(1, t.layers + 1)[:, None]
    layer_end = start + column_sum(t.prologue) + ell * column_sum(t.layer)
    total = layer_end[-1] + column_sum(t.epilogue)
    m = total.shape[0]
    return Timeline(total_s=total, host_done_s=np.full(m, start), gpu_busy_s=t.gpu_busy_s(), layer_end_s=layer_end)


def then_eager(c_op_s: float, tail: np.ndarray, tl: Timeline) -> Timeline:
    """Kernels (GPU times ``tail``, kernels x points) the host issues after a pass it launched -- vLLM's sampler
    after the CUDA-graph replay: the host starts once it has launched the pass, each kernel waits for the GPU."""
    cpu, gpu = _queue(c_op_s, tail, tl.host_done_s, tl.total_s)
    return Timeline(
        total_s=gpu, host_done_s=cpu, gpu_busy_s=tl.gpu_busy_s + column_sum(tail), layer_end_s=tl.layer_end_s
    )
