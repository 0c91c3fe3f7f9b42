"""Token selection by *sampling* in eager transformers ``generate`` (the extra kernels it launches per token).

The kernel programs of :mod:`gpu.kernels` end a pass with greedy selection (logits to fp32, argmax, ``generate``
bookkeeping). ``generate(do_sample=True)`` with a generation config such as Qwen2.5-Instruct's
(``temperature``, ``top_k``, ``top_p``, ``repetition_penalty``; and a ``min_length`` when the caller forces the
output length, as the Qwen2.5 speed benchmark does) runs a chain of logits processors and a multinomial draw
instead, every one an eager PyTorch op on the ``[rows, vocab]`` scores issued by the host. This module adds those
kernels -- counted from transformers 4.46 ``generation/logits_process.py`` and ``GenerationMixin._sample`` -- as an
extra block after the epilogue (:func:`with_sampling`); it adds no parameter: each kernel costs what every eager
kernel costs (the host's ``c_op`` to issue it, the GPU's per-kernel cost and its bytes).

Per token (``V`` = vocabulary, ``T`` = ids generated so far, prompt included; scores in fp32):

* ``MinLengthLogitsProcessor``: ``arange(V)``, ``isin`` (2 kernels), ``clone``, ``where`` -- 5 kernels;
* ``RepetitionPenaltyLogitsProcessor``: ``gather(scores, ids)``, ``<``, ``*``, ``/``, ``where`` over the ``T``
  gathered scores, ``scatter`` (a clone of the scores + the scatter) -- 7;
* ``TemperatureLogitsWarper``: one division -- 1;
* ``TopKLogitsWarper``: ``topk`` (2), ``<``, ``masked_fill`` -- 4;
* ``TopPLogitsWarper``: ``sort`` (indices + radix passes: 5), ``softmax``, ``cumsum``, ``<=``, the
  ``min_tokens_to_keep`` fill, ``scatter`` (2), ``masked_fill`` -- 12;
* ``softmax`` and ``multinomial`` (``exponential_``, ``div``, ``argmax``) replacing the greedy ``argmax`` -- 3 more.
"""

from __future__ import annotations

import numpy as np

from gpu.kernels import ELT, Block, Pass, Program

DECODINGS = ("greedy", "sample")
FP32_BYTES = 4
ID_BYTES = 8


def sampling_block(vocab: int, p: Pass) -> Block:
    """The kernels sampling adds after the greedy epilogue, for ``p.head_rows`` rows of scores."""
    rows = np.asarray(p.head_rows, dtype=np.float64)
    ids = np.asarray(p.kv_tokens, dtype=np.float64)  # the ids generate() holds: the prompt and what it produced
    v = rows * vocab * FP32_BYTES
    t = rows * ids
    ks: list[tuple[str, np.ndarray]] = [
        ("min_length.arange", rows * vocab * ID_BYTES),
        ("min_length.isin_eq", rows * vocab * (ID_BYTES + 1)),
        ("min_length.isin_any", rows * vocab * 2),
        ("min_length.clone", 2 * v),
        ("min_length.where", 3 * v),
        ("repetition.gather", t * (ID_BYTES + 2 * FP32_BYTES)),
        ("repetition.lt", t * (FP32_BYTES + 1)),
        ("repetition.mul", 2 * t * FP32_BYTES),
        ("repetition.div", 2 * t * FP32_BYTES),
        ("repetition.where", t * (3 * FP32_BYTES + 1)),
        ("repetition.clone", 2 * v),
        ("repetition.scatter", t * (ID_BYTES + 2 * FP32_BYTES)),
        ("temperature.div", 2 * v),
        ("top_k.topk_select", v),
        ("top_k.topk_gather", rows * 20 * 2 * FP32_BYTES),
        ("top_k.lt", v + v / 4),
        ("top_k.masked_fill", 2 * v + v / 4),
        ("top_p.sort_iota", rows * vocab * ID_BYTES),
        *((f"top_p.sort_pass{k}", 2 * (v + rows * vocab * ID_BYTES)) for k in range(4)),
        ("top_p.softmax", 2 * v),
        ("top_p.cumsum", 2 * v),
        ("top_p.le", v + v / 4),
        ("top_p.keep_fill", rows),
        ("top_p.clone", v / 2),
        ("top_p.scatter", rows * vocab * (ID_BYTES + 2)),
        ("top_p.masked_fill", 2 * v + v / 4),
        ("sample.softmax", 2 * v),
        ("sample.exponential", v),
        ("sample.div", 3 * v),
    ]
    m = len(rows)
    return Block(
        tuple(n for n, _ in ks),
        np.full(len(ks), ELT, dtype=np.int8),
        np.vstack([np.broadcast_to(b, (m,)) for _, b in ks]),
        np.zeros((len(ks), m)),
    )


def with_sampling(prog: Program, vocab: int, p: Pass) -> Program:
    """``prog`` with the sampling kernels appended to its epilogue."""
    return prog.with_epilogue(sampling_block(vocab, p))
