"""What a forward pass's kernel list is (:mod:`gpu.kernels` builds them per framework): the pass's counts
(:class:`Pass`, with a sliding :class:`Window`), one block's kernels with their bytes, operations and parameter
ledger (:class:`Block`), a whole pass (:class:`Program`), and the affine form a recipe is evaluated into once
(:class:`ProgramTemplate`: every kernel's bytes and operations are affine in the pass's counts, :data:`FEATURES`)."""

from __future__ import annotations

import dataclasses

import numpy as np

ACT_BYTES = 2  # fp16 / bf16 activations
FP32_BYTES = 4
PARAM_CLASSES = ("weights", "metadata", "bias", "norm")  # columns of Block.params

GEMM, ATTN, ELT = 0, 1, 2  # kernel classes: weight GEMM (weight-precision peak), attention (fp16 peak), elementwise


def column_sum(a: np.ndarray) -> np.ndarray:
    """Sum over kernels (axis 0) in kernel order, whatever the number of points: a sequential sum, so one point
    evaluated alone and the same point in a vector of contexts give bit-identical times."""
    if a.shape[0] == 0:
        return np.zeros(a.shape[1:])
    return np.cumsum(a, axis=0)[-1]


@dataclasses.dataclass(frozen=True)
class Pass:
    """What one forward pass computes, summed over the sequences of a batch (arrays: one entry per point).

    ``new_tokens``: tokens computed (rows of every GEMM); ``seqs``: sequences; ``attn_pairs``: causal (query, key)
    pairs; ``kv_tokens``: KV entries attention reads (after this pass appended its own); ``cached_tokens``: KV
    entries held before the pass; ``head_rows``: rows the output head computes.
    """

    new_tokens: np.ndarray
    seqs: int
    attn_pairs: np.ndarray
    kv_tokens: np.ndarray
    cached_tokens: np.ndarray
    head_rows: np.ndarray

    @staticmethod
    def single(
        n_tokens: int | np.ndarray, ctx: int | np.ndarray, head_rows: int | np.ndarray = 1, window: Window | None = None
    ) -> Pass:
        """One sequence: ``n_tokens`` new tokens on top of ``ctx`` cached ones (broadcast to arrays); ``window``:
        the attention reaches only the last keys of a sliding window (:func:`attention_counts`)."""
        n, c = np.broadcast_arrays(np.asarray(n_tokens, dtype=np.float64), np.asarray(ctx, dtype=np.float64))
        n, c = np.atleast_1d(n), np.atleast_1d(c)
        rows = np.broadcast_to(np.asarray(head_rows, dtype=np.float64), n.shape)
        pairs, kv = attention_counts(n, c, window)
        return Pass(new_tokens=n, seqs=1, attn_pairs=pairs, kv_tokens=kv, cached_tokens=c, head_rows=rows)

    @staticmethod
    def decode_batch(ctxs: np.ndarray, padded: bool, window: Window | None = None) -> Pass:
        """One decode step of ``len(ctxs)`` sequences; ``padded`` batches pad every one to the longest context."""
        c = np.asarray(ctxs, dtype=np.float64)
        b = len(c)
        if padded:
            c = np.full(b, c.max())
        one = np.ones(1)
        pairs, kv = attention_counts(np.ones(b), c, window)
        return Pass(
            new_tokens=one * b,
            seqs=b,
            attn_pairs=one * float(np.sum(pairs)),
            kv_tokens=one * float(np.sum(kv)),
            cached_tokens=one * float(np.sum(c)),
            head_rows=one * b,
        )

    @staticmethod
    def prefill_batch(prompts: np.ndarray, window: Window | None = None) -> Pass:
        """One batched prefill: whole prompts of ``prompts`` tokens each (no cached context), packed into one pass
        (GEMM rows = all their tokens; attention per sequence; one LM-head row per sequence)."""
        n = np.asarray(prompts, dtype=np.float64)
        one = np.ones(1)
        pairs, kv = attention_counts(n, np.zeros_like(n), window)
        return Pass(
            new_tokens=one * float(np.sum(n)),
            seqs=len(n),
            attn_pairs=one * float(np.sum(pairs)),
            kv_tokens=one * float(np.sum(kv)),
            cached_tokens=one * 0.0,
            head_rows=one * len(n),
        )


@dataclasses.dataclass(frozen=True)
class Window:
    """A sliding attention window: each query attends to its last ``tokens`` keys (itself included) in a share
    ``1 - full_share`` of the decoder layers; the other layers attend to everything (HF Qwen2 ``max_window_layers``)."""

    tokens: int
    full_share: float = 0.0


def attention_counts(n: np.ndarray, c: np.ndarray, window: Window | None) -> tuple[np.ndarray, np.ndarray]:
    """``(attn_pairs, kv_tokens)`` of ``n`` new queries after ``c`` cached keys, averaged over the layers: causal
    (query, key) pairs, and the keys attention reads (the ones within reach of some new query)."""
    full_pairs, full_kv = n * c + n * (n + 1) / 2, c + n
    if window is None or window.tokens <= 0:
        return full_pairs, full_kv
    w = float(window.tokens)

    def reach(x: np.ndarray) -> np.ndarray:  # sum over positions 1..x of min(position, w)
        return np.where(x <= w, x * (x + 1) / 2, w * (w + 1) / 2 + (x - w) * w)

    win_pairs, win_kv = reach(c + n) - reach(c), n + np.minimum(c, w - 1)
    f = float(window.full_share)
    return (1.0 - f) * win_pairs + f * full_pairs, (1.0 - f) * win_kv + f * full_kv


@dataclasses.dataclass(frozen=True)
class Block:
    """Kernels of one block: names, class (GEMM / ATTN / ELT), bytes and operations (kernels x points)."""

    names: tuple[str, ...]
    kinds: np.ndarray
    bytes: np.ndarray
    ops: np.ndarray
    params: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 4), np.int64))  # kernels x class
    params_per_token: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros((0, 4), np.int64))  # gathers

    @property
    def n_kernels(self) -> int:
        return len(self.names)


@dataclasses.dataclass(frozen=True)
class Program:
    """A whole forward pass: prologue, one decoder layer (repeated ``layers`` times), epilogue."""

    prologue: Block
    layer: Block
    epilogue: Block
    layers: int
    rows: np.ndarray  # GEMM rows (tokens) per point, for the token-count dependent compute efficiency
    rows_per_seq: np.ndarray  # attention query rows per sequence

    def total_bytes(self) -> np.ndarray:
        return (
            column_sum(self.prologue.bytes)
            + self.layers * column_sum(self.layer.bytes)
            + column_sum(self.epilogue.bytes)
        )

    def total_ops(self) -> np.ndarray:
        return column_sum(self.prologue.ops) + self.layers * column_sum(self.layer.ops) + column_sum(self.epilogue.ops)

    def param_bytes(self) -> dict[str, int]:
        """Parameter bytes the kernels read, by class (weights, metadata, bias, norm), every layer counted."""
        tot = (
            self.prologue.params.sum(axis=0)
            + self.layers * self.layer.params.sum(axis=0)
            + self.epilogue.params.sum(axis=0)
        )
        tok = self.prologue.params_per_token.sum(axis=0)  # embedding rows: one per token computed
        return {c: int(tot[i]) + int(tok[i]) * int(self.rows[0]) for i, c in enumerate(PARAM_CLASSES)}

    @property
    def n_kernels(self) -> int:
        return self.prologue.n_kernels + self.layers * self.layer.n_kernels + self.epilogue.n_kernels

    def with_epilogue(self, extra: Block) -> Program:
        """This program with the kernels of ``extra`` appended to its epilogue."""
        epi = self.epilogue
        if epi.n_kernels == 0:
            merged = extra
        else:
            merged = Block(
                epi.names + extra.names,
                np.concatenate([epi.kinds, extra.kinds]),
                np.vstack([epi.bytes, extra.bytes]),
                np.vstack([epi.ops, extra.ops]),
            )
        return dataclasses.replace(self, epilogue=merged)


FEATURES = ("new_tokens", "attn_pairs", "kv_tokens", "cached_tokens", "head_rows")


@dataclasses.dataclass(frozen=True)
class _BlockTemplate:
    names: tuple[str, ...]
    kinds: np.ndarray
    bytes_coef: np.ndarray  # (1 + features) x kernels: constant term, then one row per feature
    ops_coef: np.ndarray
    params: np.ndarray  # kernels x parameter class (constant)
    params_per_token: np.ndarray

    @staticmethod
    def of(block: Block) -> _BlockTemplate:
        # block was evaluated at the origin (column 0) and at each unit feature vector (column 1 + f)
        def coef(a: np.ndarray) -> np.ndarray:
            return np.vstack([a[:, 0], *(a[:, 1 + f] - a[:, 0] for f in range(len(FEATURES)))])

        return _BlockTemplate(
            block.names, block.kinds, coef(block.bytes), coef(block.ops), block.params, block.params_per_token
        )

    def at(self, feats: tuple[np.ndarray, ...]) -> Block:
        def value(c: np.ndarray) -> np.ndarray:
            out = np.repeat(c[0][:, None], len(feats[0]), axis=1)
            for f, x in enumerate(feats):  # fixed order: bit-identical whatever the number of points
                out = out + c[1 + f][:, None] * x[None, :]
            return out

        return Block(
            self.names, self.kinds, value(self.bytes_coef), value(self.ops_coef), self.params, self.params_per_token
        )


@dataclasses.dataclass(frozen=True)
class ProgramTemplate:
    """The kernels of a forward pass as affine functions of the pass's counts."""

    prologue: _BlockTemplate
    layer: _BlockTemplate
    epilogue: _BlockTemplate
    layers: int

    def instantiate(self, p: Pass) -> Program:
        feats = tuple(np.asarray(getattr(p, f), dtype=np.float64) for f in FEATURES)
        return Program(
            prologue=self.prologue.at(feats),
            layer=self.layer.at(feats),
            epilogue=self.epilogue.at(feats),
            layers=self.layers,
            rows=np.maximum(p.new_tokens, 1.0),
            rows_per_seq=np.maximum(p.new_tokens / p.seqs, 1.0),
        )
