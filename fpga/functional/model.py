"""The functional W8A8 draft model: the JAX integer datapath with its KV cache under KVMU control.

:class:`DraftModel` is the API the simulators drive. The KV cache is a fixed buffer of ``capacity`` positions;
every token fed to the decoder writes its K and V at the position the KVMU hands out (its ``ahead`` register), and
the decoder attends to positions ``[0, ahead)``. Rollback, accept and backtrack (``init``) are KVMU pointer moves:
no KV data is copied or cleared, and positions above ``ahead`` are simply overwritten later.

Typical use (shadow synchronization after a rejected step)::

    m = DraftModel.from_synthetic(library().llm("qwen2.5-0.5b"), seed=0, capacity=1024)
    m.prefill(prompt)                  # KVMU init 0 + ingest: the prompt is committed
    step = [m.decode() for _ in range(8)]
    m.mark()                           # submit the step for verification (curr <- ahead)
    m.rollback()                       # rejected: curr, ahead <- valid
    m.ingest(target_tokens)            # the target's tokens: forward passes, logits discarded
    nxt = m.decode()                   # continues from the last target token
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np

from fpga.functional import datapath as dp
from fpga.functional import gemv
from fpga.functional.formats import MAX_CONTEXT
from fpga.functional.quantize import QuantizedParams, quantize_model
from fpga.functional.weights import SafetensorsWeights, SyntheticWeights
from hwmodel.errors import HwmodelError
from hwmodel.specs import LlmSpec


class DraftModelError(HwmodelError):
    """A draft-model request that cannot run: bad tokens, decode before any context, capacity exceeded."""


#: quantized tensor -> the graph operators whose rows it stacks (the functional datapath's fusion)
_TENSORS = {
    "qkv_q": ("q_proj", "k_proj", "v_proj"),
    "o_q": ("o_proj",),
    "gu_q": ("gate_proj", "up_proj"),
    "down_q": ("down_proj",),
}


def check_layer_structure(llm: LlmSpec, params: QuantizedParams) -> None:
    """Check the W8A8 datapath's layer against the operator graph (:mod:`hwmodel.graph`): the graph features it
    implements, and every stacked weight tensor's shape = the graph operators it fuses (rows concatenated).
    Raises :class:`DraftModelError` naming the feature or tensor."""
    from hwmodel.graph import build_graph, per_channel

    unsupported = [
        name
        for name, on in (
            ("a mixture of experts", llm.experts > 0),
            ("q/k norms", llm.qk_norm),
            ("LayerNorm", llm.norm == "layer"),
            ("an ungated MLP", llm.mlp != "gated"),
            ("sliding-window attention", llm.sliding_window > 0),
            ("an o-projection bias", llm.o_bias),
            ("MLP biases", llm.mlp_bias),
            ("a value head", llm.output_head != "lm"),
            (f"the {llm.hidden_act} activation", llm.hidden_act != "silu"),
        )
        if on
    ]
    if unsupported:
        raise DraftModelError(
            f"'{llm.name}' has {', '.join(unsupported)}, which the functional W8A8 datapath "
            f"(Qwen2/LLaMA layer) does not implement"
        )
    g = build_graph(llm, per_channel(8, 8), "decode", 1, 0)
    L = llm.layers
    for tensor, names in _TENSORS.items():
        ops = [g.find(n) for n in names]
        want = (L, sum(o.out_features for o in ops), ops[0].in_features)
        got = tuple(getattr(params, tensor).shape)
        if got != want:
            raise DraftModelError(
                f"'{llm.name}': tensor {tensor} has shape {got}, the graph's {'+'.join(names)} need {want}"
            )
    qkv_bias = g.find("q_proj").bias
    if qkv_bias and tuple(params.qkv_b.shape) != (L, params.qkv_q.shape[1]):
        raise DraftModelError(
            f"'{llm.name}': the graph's q/k/v biases need qkv_b of shape "
            f"{(L, params.qkv_q.shape[1])}, got {tuple(params.qkv_b.shape)}"
        )
    head = next(o for o in g.epilogue if o.kind == "head")
    for tensor, want in (
        ("emb_q", (llm.vocab, llm.hidden)),
        ("lm_q", (head.out_features, head.in_features)),
        ("ln1_g", (L, g.find("attn_norm").in_features)),
        ("ln2_g", (L, g.find("ffn_norm").in_features)),
        ("norm_g", (g.find("final_norm", "epilogue").in_features,)),
    ):
        got = tuple(getattr(params, tensor).shape)
        if got != want:
            raise DraftModelError(f"'{llm.name}': tensor {tensor} has shape {got}, the graph needs {want}")


def _check_kernel(kernel: str) -> None:
    if kernel not in dp.INT8_KERNELS:
        raise DraftModelError(f"int8_kernel must be one of {', '.join(dp.INT8_KERNELS)}, got {kernel!r}")
    if kernel == "numba" and not gemv.available():
        raise DraftModelError(
            "int8_kernel 'numba' needs JAX's CPU backend and the XLA FFI API the kernel is written against "
            f"(version {gemv.FFI_API_VERSION}); use int8_kernel='xla'"
        )


def default_kvmu(capacity: int) -> Any:
    """The project's KVMU (``fpga.kvmu.model.Kvmu``) with one-cycle commands."""
    from fpga.kvmu.model import Kvmu

    return Kvmu(capacity)


class DraftModel:
    """A greedy W8A8 draft model whose KV cache is addressed by a KVMU.

    ``kvmu`` is any object with the KVMU interface (``init(pos)``, ``speculate(n) -> range``, ``mark()``,
    ``accept()``, ``rollback()``, ``ingest(n) -> range``, read-only ``valid``, ``curr``, ``ahead``, ``mode``,
    ``mux_source``); by default a fresh :class:`fpga.kvmu.model.Kvmu` of the same capacity. The KVMU decides where every
    token's KV lands and refuses illegal moves (its own error type, raised before anything is computed).

    ``int8_kernel`` chooses the int8 x int8 -> int32 products (:data:`fpga.functional.datapath.INT8_KERNELS`):
    ``"numba"`` runs the Numba kernel of :mod:`fpga.functional.gemv` inside the XLA computation for blocks of up
    to two rows (a decode) and XLA's dot for larger blocks, ``"xla"`` XLA's dot always; ``None`` (the default)
    takes ``"numba"`` where it is available (the CPU backend). Both give exact int32 sums, so the same bits.
    ``decode_rows`` pads a decode to that many rows (default: 1 with the Numba kernel; 2 with XLA's, whose int8
    dot is several times faster for a few rows than for one vector), ``prefill_chunk`` is the row count of
    prefill / ingest blocks, and attention reads a window of ``min_window * 2**k`` positions (capped at
    ``capacity``); none of them changes a single bit of the results (rows are independent and masked positions
    contribute exact zeros), only the speed and the number of compilations (one per block shape and window
    size). ``int8_kernel`` and ``decode_rows`` may be reassigned between calls.
    """

    def __init__(
        self,
        llm: LlmSpec,
        params: QuantizedParams,
        capacity: int = 2048,
        kvmu: Any = None,
        decode_rows: int | None = None,
        prefill_chunk: int = 32,
        min_window: int = 64,
        int8_kernel: str | None = None,
    ) -> None:
        if not isinstance(capacity, (int, np.integer)) or not 1 <= capacity <= min(MAX_CONTEXT, llm.max_position):
            raise DraftModelError(
                f"KV capacity must be an integer in 1..{min(MAX_CONTEXT, llm.max_position)} "
                f"positions for '{llm.name}', got {capacity!r}"
            )
        if int8_kernel is None:
            int8_kernel = "numba" if gemv.available() else "xla"
        _check_kernel(int8_kernel)
        if decode_rows is None:
            decode_rows = 1 if int8_kernel == "numba" else 2
        if decode_rows < 1 or prefill_chunk < 1 or min_window < 1:
            raise DraftModelError("decode_rows, prefill_chunk and min_window must be at least 1")
        check_layer_structure(llm, params)
        self.llm = llm
        self.params = params
        self.capacity = int(capacity)
        self.decode_rows = int(decode_rows)
        self.prefill_chunk = int(prefill_chunk)
        self.min_window = int(min_window)
        self.kvmu = kvmu if kvmu is not None else default_kvmu(self.capacity)
        if getattr(self.kvmu, "capacity", self.capacity) != self.capacity:
            raise DraftModelError(
                f"the KVMU's capacity ({self.kvmu.capacity}) differs from the KV buffer's ({self.capacity})"
            )
        self.dims = dp.Dims.of(llm, self.capacity, int8_kernel)
        self._tokens = np.full(self.capacity, -1, np.int64)
        with jax.enable_x64(True):
            self._params = dp.device_params(params, llm, self.capacity)
            self._kv, self._stash = dp.empty_cache(self.dims)

    # ---------------------------------------------------------------------------------------- constructors
    @classmethod
    def from_synthetic(cls, llm: LlmSpec, seed: int = 0, **kwargs: Any) -> DraftModel:
        """Seeded synthetic float weights (:class:`~fpga.functional.weights.SyntheticWeights`), quantized."""
        return cls(llm, quantize_model(llm, SyntheticWeights(llm, seed)), **kwargs)

    @classmethod
    def from_safetensors(cls, path: Path | str, llm: LlmSpec, **kwargs: Any) -> DraftModel:
        """A Hugging Face Qwen2 safetensors checkpoint (file or sharded directory), quantized at load."""
        return cls(llm, quantize_model(llm, SafetensorsWeights(path, llm)), **kwargs)

    @property
    def int8_kernel(self) -> str:
        """The int8 products' kernel (``"numba"`` or ``"xla"``; see the class docstring)."""
        return self.dims.int8_kernel

    @int8_kernel.setter
    def int8_kernel(self, kernel: str) -> None:
        _check_kernel(kernel)
        self.dims = dataclasses.replace(self.dims, int8_kernel=kernel)

    # ---------------------------------------------------------------------------------------- KVMU state
    @property
    def valid(self) -> int:
        return int(self.kvmu.valid)

    @property
    def curr(self) -> int:
        return int(self.kvmu.curr)

    @property
    def ahead(self) -> int:
        return int(self.kvmu.ahead)

    @property
    def tokens(self) -> np.ndarray:
        """The token fed at each position ``[0, ahead)`` (what the KV cache holds)."""
        return self._tokens[: self.ahead].copy()

    # ---------------------------------------------------------------------------------------- operations
    def prefill(self, tokens: Sequence[int]) -> None:
        """Start a new context: KVMU ``init 0``, then the prompt is ingested (committed) at positions 0..n-1."""
        toks = self._check_tokens(tokens)
        if len(toks) > self.capacity:
            raise DraftModelError(f"prompt of {len(toks)} tokens exceeds the KV capacity of {self.capacity}")
        self.kvmu.init(0)
        positions = self.kvmu.ingest(len(toks))
        self._run(toks, np.asarray(positions, np.int64), self.prefill_chunk)

    def ingest(self, tokens: Sequence[int]) -> None:
        """Shadow synchronization: forward passes over tokens from the target (logits discarded); the KVMU
        commits them (legal after ``rollback`` or ``init``)."""
        toks = self._check_tokens(tokens)
        positions = self.kvmu.ingest(len(toks))
        self._run(toks, np.asarray(positions, np.int64), self.prefill_chunk)

    def decode(self) -> int:
        """Draft one token greedily from the position below ``ahead`` and feed it (KVMU ``speculate 1``)."""
        if self.ahead < 1:
            raise DraftModelError("decode needs at least one token in the KV cache (prefill first)")
        prev = self.ahead - 1
        positions = self.kvmu.speculate(1)
        pos = int(positions[0])
        rows = self.decode_rows
        with jax.enable_x64(True):
            token, h0 = dp.head_and_embed(
                self._params.top, self._stash, np.int64(prev), rows=rows, kernel=self._kernel(rows)
            )
            p = np.full(rows, self.capacity, np.int64)
            p[0] = pos
            window = dp.window_for(pos + 1, self.capacity, self.min_window)
            self._kv, self._stash, _ = dp.forward(
                self._params,
                self._kv,
                self._stash,
                None,
                p,
                np.arange(rows) == 0,
                d=self._dims(rows),
                window=window,
                h0=h0,
            )
            tok = int(token)
        self._tokens[pos] = tok
        return tok

    def next_token(self) -> int:
        """The greedy token the next :meth:`decode` will produce, without feeding it (nothing changes)."""
        if self.ahead < 1:
            raise DraftModelError("there is no token in the KV cache to predict from (prefill first)")
        prev = self.ahead - 1
        with jax.enable_x64(True):
            return int(
                dp.greedy_at(
                    self._params.top,
                    self._stash,
                    np.int64(prev),
                    rows=self.decode_rows,
                    kernel=self._kernel(self.decode_rows),
                )
            )

    def logits(self, position: int | Sequence[int]) -> np.ndarray:
        """Integer logits (F_L = 12 fractional bits) predicted at cached position(s) ``position < ahead``."""
        pos = np.atleast_1d(np.asarray(position, np.int64))
        if pos.size == 0 or pos.min() < 0 or pos.max() >= self.ahead:
            raise DraftModelError(f"logits need positions in [0, {self.ahead}), got {position!r}")
        rows = max(len(pos), self.decode_rows)
        idx = np.resize(pos, rows)
        with jax.enable_x64(True):
            logits, _ = dp.lm_head(
                self._params.top, *(self._stash[k][idx] for k in dp.STASH_KEYS), kernel=self._kernel(rows)
            )
            out = np.asarray(logits)[: len(pos)]
        return out[0] if np.ndim(position) == 0 else out

    def mark(self) -> None:
        """Close the drafted step and submit it for verification (KVMU ``mark``: ``curr <- ahead``)."""
        self.kvmu.mark()

    def accept(self) -> None:
        """The step under verification is accepted (KVMU ``accept``); nothing is recomputed."""
        self.kvmu.accept()

    def rollback(self) -> None:
        """The step under verification is rejected (KVMU ``rollback``: ``curr, ahead <- valid``); a pointer move."""
        self.kvmu.rollback()

    def init(self, pos: int) -> None:
        """Backtrack (or restart) at ``pos`` (KVMU ``init``): the first ``pos`` cached tokens are kept."""
        self.kvmu.init(pos)

    # ---------------------------------------------------------------------------------------- inspection
    def kv_state(self, end: int | None = None) -> dict[str, np.ndarray]:
        """A copy of the KV buffer's positions ``[0, end)`` (default ``ahead``): K/V int8 and scales per layer,
        and the LM-head inputs."""
        end = self.ahead if end is None else int(end)
        out = {name: np.stack([np.asarray(c[name])[:end] for c in self._kv]) for name in dp.CACHE_KV_KEYS}
        out.update({name: np.asarray(self._stash[name])[:end].copy() for name in dp.STASH_KEYS})
        return out

    def trace_forward(self, tokens: Sequence[int], start: int = 0) -> dict[str, np.ndarray]:
        """Run ``tokens`` at positions ``start..`` as one block on a scratch copy of the cache and return every
        layer's internals (accumulators, int8 activations; docs/w8a8.md 4.8). The model's state is unchanged."""
        toks = self._check_tokens(tokens)
        pos = np.arange(start, start + len(toks), dtype=np.int64)
        if start < 0 or pos[-1] >= self.capacity:
            raise DraftModelError(f"positions {start}..{pos[-1]} exceed the KV capacity of {self.capacity}")
        with jax.enable_x64(True):
            kv = [{k: jax.numpy.array(v, copy=True) for k, v in c.items()} for c in self._kv]
            stash = {k: jax.numpy.array(v, copy=True) for k, v in self._stash.items()}
            _kv, _stash, per_layer = dp.forward(
                self._params,
                kv,
                stash,
                np.asarray(toks, np.int32),
                pos,
                np.ones(len(toks), bool),
                d=self._dims(len(toks)),
                window=dp.window_for(int(pos[-1]) + 1, self.capacity, self.min_window),
                collect=True,
            )
            logits, acc = dp.lm_head(
                self._params.top, per_layer["xf"], per_layer["xf_m"], per_layer["xf_e"], kernel=self._kernel(len(toks))
            )
            out = dp.as_numpy(per_layer)
            out["logits"] = np.asarray(logits)
            out["acc_lm"] = np.asarray(acc)
        return out

    # ---------------------------------------------------------------------------------------- internals
    def _check_tokens(self, tokens: Sequence[int]) -> np.ndarray:
        toks = np.asarray(tokens)
        if toks.ndim != 1 or toks.size == 0 or not np.issubdtype(toks.dtype, np.integer):
            raise DraftModelError(f"tokens must be a non-empty 1-D sequence of integers, got {tokens!r:.80}")
        if toks.min() < 0 or toks.max() >= self.llm.vocab:
            bad = toks[(toks < 0) | (toks >= self.llm.vocab)][0]
            raise DraftModelError(f"token id {int(bad)} is outside the vocabulary [0, {self.llm.vocab})")
        return toks.astype(np.int64)

    def _kernel(self, rows: int) -> str:
        """The int8 kernel a block of ``rows`` rows runs with (XLA's dot above the Numba kernel's row limit: the same
        choice :func:`fpga.functional.datapath.matmul` makes, named so that equal computations share a compilation)."""
        return self.int8_kernel if rows <= gemv.MAX_ROWS else "xla"

    def _dims(self, rows: int) -> dp.Dims:
        kernel = self._kernel(rows)
        return self.dims if kernel == self.dims.int8_kernel else dataclasses.replace(self.dims, int8_kernel=kernel)

    def _run(self, toks: np.ndarray, positions: np.ndarray, rows: int) -> None:
        """Forward passes over ``toks`` at ``positions`` (from the KVMU) in blocks of ``rows`` rows; a short last
        block is padded with rows that write nothing."""
        with jax.enable_x64(True):
            for i in range(0, len(toks), rows):
                t = toks[i : i + rows]
                p = positions[i : i + rows]
                n = len(t)
                tokens = np.zeros(rows, np.int32)
                tokens[:n] = t
                pos = np.full(rows, self.capacity, np.int64)
                pos[:n] = p
                valid = np.arange(rows) < n
                window = dp.window_for(int(p.max()) + 1, self.capacity, self.min_window)
                self._kv, self._stash, _ = dp.forward(
                    self._params, self._kv, self._stash, tokens, pos, valid, d=self._dims(rows), window=window
                )
        self._tokens[positions] = toks
