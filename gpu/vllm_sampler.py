"""vLLM 0.6's sampler and per-step host cost: what a decode step adds after the model's forward pass.

vLLM runs its sampler (``vllm/model_executor/layers/sampler.py``, 0.6.x) *outside* the CUDA graph: every step, the
host issues eager PyTorch ops on the ``[seqs, vocab]`` logits. Which ops depends on the batch's sampling settings
(``SamplingTensors.from_sampling_metadata`` sets ``do_penalties``, ``do_top_p_top_k``):

* **greedy** (temperature 0): logits to fp32, temperature division, ``softmax`` and ``log_softmax`` (vLLM always
  computes log-probabilities), ``argmax``, the chosen token's log-probability (a gather) and its rank (compare +
  sum), the copy of the sampled ids to the host -- 9 kernels;
* **sample** with top-k/top-p and penalties (the Qwen2.5 speed benchmark: ``temperature=1.0, top_p=0.8,
  repetition_penalty=0.1, presence_penalty=-2.0, frequency_penalty=-2.0``; ``speed_benchmark_vllm.py``):
  logits to fp32 (1); ``apply_penalties`` with the host-to-device copies of the prompt and output token tensors
  (2), two ``_get_bin_counts_and_mask`` (zeros ``[seqs, vocab+1]``, ``ones_like``, ``scatter_add_``, ``> 0``: 4
  each), the repetition penalty (``repeat``, ``|``, ``~``, the boolean index-put as nonzero + index + fill, ``> 0``,
  ``/``, ``*``, ``where``: 10), frequency and presence (``*``, ``-=`` each: 4) -- 24; temperature (1);
  ``_apply_top_k_top_p`` -- ``sort`` (indices + 4 radix passes: 5), the top-k threshold (``-``, ``gather``,
  ``<``, ``masked_fill_``: 4), top-p (``softmax``, ``cumsum``, ``1 - p``, ``<=``, last-column fill,
  ``masked_fill_``: 6), the inverse permutation (``arange``, ``scatter_``, ``gather``: 3) -- 18; ``softmax`` and
  ``log_softmax`` (2); ``_multinomial`` (``exponential_``, ``div_``, ``argmax``: 3); log-probability gather and
  rank (3); the copy to the host (1) -- 53 kernels.

Every kernel is issued by the host (the framework's eager issue cost ``c_op``) and costs the GPU its bytes
(:mod:`gpu.launch`): no parameter. The counts follow the structure of the V0 ``sampler.py`` of vLLM 0.6.x
(``apply_penalties`` -> ``_get_bin_counts_and_mask``, ``_apply_top_k_top_p`` with a full sort); they were not
checked line by line against a stored copy of that file, so a kernel or two either way is possible. Greedy and sampled steps therefore differ by 44 host-issued kernels.

**Per-sequence host cost** (:data:`C_SEQ_PARAM`, one fixed parameter). Besides the sampler's kernels, the engine's
Python work per step grows with the number of sequences it runs: the scheduler walks every running sequence group
(``Scheduler._schedule_running``: block-table growth, preemption checks), ``_prepare_model_input`` builds each
sequence's positions, slot mapping and block table, ``SamplingTensors.from_lists`` each sequence's sampling
parameters, and output processing appends each sampled token and detokenizes it. A step of ``b`` sequences costs
the host ``t_step_vllm_s + (b - 1) * c_seq_vllm_s`` before the GPU can start (``t_step_vllm_s``: the fitted cost
of a one-sequence step).
"""

from __future__ import annotations

import numpy as np

from gpu.kernels import ELT, Block, Pass
from hwmodel.errors import HwmodelError

C_SEQ_PARAM = "c_seq_vllm_s"
FP32_BYTES = 4
ID_BYTES = 8
#: vLLM 0.6 ``SchedulerConfig`` default without chunked prefill: ``max_num_batched_tokens = max(max_model_len,
#: 2048)`` (chunked prefill, on by default above 32k tokens, is not modelled); ``max_num_seqs = 256``
DEFAULT_MAX_NUM_SEQS = 256
MIN_BATCHED_TOKENS = 2048


def sampler_block(vocab: int, p: Pass, decoding: str) -> Block:
    """The kernels of vLLM's sampler for ``p.head_rows`` rows of logits (``decoding``: "greedy" or "sample")."""
    rows = np.asarray(p.head_rows, dtype=np.float64)
    ids = np.asarray(p.kv_tokens, dtype=np.float64)  # prompt + output tokens of the batch (bin counts, penalties)
    v = rows * vocab * FP32_BYTES
    counts = rows * (vocab + 1) * ID_BYTES
    mask = rows * vocab
    ks: list[tuple[str, np.ndarray | float]] = [("sampler.to_fp32", v / 2 + v)]
    if decoding == "sample":
        ks += [("penalties.h2d_prompt", ids * ID_BYTES / 2), ("penalties.h2d_output", ids * ID_BYTES / 2)]
        for which in ("prompt", "output"):
            ks += [
                (f"penalties.{which}_zeros", counts),
                (f"penalties.{which}_ones", ids * ID_BYTES / 2),
                (f"penalties.{which}_scatter_add", ids * ID_BYTES + counts),
                (f"penalties.{which}_gt0", counts + mask),
            ]
        ks += [
            ("penalties.rep_repeat", v),
            ("penalties.rep_or", 3 * mask),
            ("penalties.rep_not", 2 * mask),
            ("penalties.rep_nonzero", mask + rows * ID_BYTES),
            ("penalties.rep_index_put", mask + v),
            ("penalties.rep_index_fill", v),
            ("penalties.logits_gt0", v + mask),
            ("penalties.rep_div", 3 * v),
            ("penalties.rep_mul", 3 * v),
            ("penalties.rep_where", 3 * v + mask),
            ("penalties.freq_mul", counts + v),
            ("penalties.freq_sub", 2 * v),
            ("penalties.pres_mul", mask + v),
            ("penalties.pres_sub", 2 * v),
        ]
    ks.append(("sampler.temperature", 2 * v))
    if decoding == "sample":
        ks += [
            ("top_p.sort_iota", rows * vocab * ID_BYTES),
            *((f"top_p.sort_pass{k}", 2 * (v + rows * vocab * ID_BYTES)) for k in range(4)),
            ("top_k.threshold_index", rows * ID_BYTES),
            ("top_k.gather", rows * FP32_BYTES),
            ("top_k.lt", v + mask),
            ("top_k.masked_fill", 2 * v + mask),
            ("top_p.softmax", 2 * v),
            ("top_p.cumsum", 2 * v),
            ("top_p.one_minus_p", rows * FP32_BYTES),
            ("top_p.le", v + mask),
            ("top_p.last_fill", rows),
            ("top_p.masked_fill", 2 * v + mask),
            ("top_p.arange", rows * vocab * ID_BYTES),
            ("top_p.scatter_inverse", 3 * rows * vocab * ID_BYTES),
            ("top_p.gather", v + rows * vocab * ID_BYTES + v),
        ]
    ks += [("sampler.softmax", 2 * v), ("sampler.log_softmax", 2 * v)]
    if decoding == "sample":
        ks += [("sample.exponential", v), ("sample.div", 3 * v), ("sample.argmax", v + rows * ID_BYTES)]
    else:
        ks.append(("greedy.argmax", v + rows * ID_BYTES))
    ks += [
        ("logprobs.gather", rows * (ID_BYTES + FP32_BYTES)),
        ("logprobs.rank_gt", v + mask),
        ("logprobs.rank_sum", mask + rows * ID_BYTES),
        ("sampler.d2h_ids", rows * ID_BYTES),
    ]
    m = len(rows)
    return Block(
        tuple(n for n, _ in ks),
        np.full(len(ks), ELT, dtype=np.int8),
        np.vstack([np.broadcast_to(np.asarray(b, dtype=np.float64), (m,)) for _, b in ks]),
        np.zeros((len(ks), m)),
    )


def host_step_s(t_step_s: float, c_seq_s: float, seqs: int) -> float:
    """The engine's host time before a step of ``seqs`` sequences reaches the GPU."""
    return t_step_s + max(0, int(seqs) - 1) * c_seq_s


def max_batched_tokens(max_model_len: int) -> int:
    """vLLM 0.6's default scheduler token budget without chunked prefill (``max(max_model_len, 2048)``)."""
    return max(int(max_model_len), MIN_BATCHED_TOKENS)


def pack_prefills(prompts: list[int], budget_tokens: int, max_num_seqs: int = DEFAULT_MAX_NUM_SEQS) -> list[list[int]]:
    """Whole prompts packed first-come-first-served into prefill steps, as vLLM 0.6's ``_schedule_prefills`` does
    without chunked prefill: a step takes waiting prompts in order while their tokens fit ``budget_tokens`` and
    their count ``max_num_seqs``; the first prompt that does not fit waits for the next step (never skipped, never
    split). Returns the prompt lengths of each step."""
    steps: list[list[int]] = []
    cur: list[int] = []
    used = 0
    for n in prompts:
        if n > budget_tokens:
            raise HwmodelError(
                f"a prompt of {n} tokens exceeds the scheduler budget of {budget_tokens} tokens "
                "(vLLM refuses it: prompt longer than max_num_batched_tokens)"
            )
        if cur and (used + n > budget_tokens or len(cur) == max_num_seqs):
            steps.append(cur)
            cur, used = [], 0
        cur.append(n)
        used += n
    if cur:
        steps.append(cur)
    return steps
