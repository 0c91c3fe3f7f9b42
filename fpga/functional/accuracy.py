"""What the W8A8 integer datapath costs in accuracy: its logits against a float64 forward on the same float weights.

Both models are teacher-forced over a fixed prompt set (every position of every prompt predicts the next token);
the integer logits (``F_L = 12`` fractional bits) are converted to real values and compared with the float64 ones:

* **top-1 agreement**: the integer argmax (lowest index on ties) equals the float64 argmax;
* **top-5 containment**: the float64 argmax is among the integer model's five largest logits;
* **logit error**: RMS and maximum of ``|int - float|`` over the whole vocabulary, and the RMS relative to the
  float logits' own standard deviation (scale-free).

:func:`measure_weight_only` is the ablation that separates the weights' share: the same float64 forward with every
matrix replaced by its per-channel int8 quantization (dequantized), activations and everything else in float64.

``hwmodel fpga accuracy`` runs it; the table in docs/functional.md comes from that command.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from fpga.functional import float_reference as fref
from fpga.functional.formats import F_L
from fpga.functional.quantize import CheckpointError, TensorSource, quantize_model
from hwmodel.specs import LlmSpec


@dataclass(frozen=True)
class AccuracyReport:
    """Integer datapath vs float64 on one prompt set (all positions of all prompts)."""

    llm: str
    weights: str
    datapath: str
    prompts: int
    positions: int
    top1_agreement: float
    top5_containment: float
    logit_rms_error: float
    logit_max_abs_error: float
    logit_relative_rms_error: float
    float_logit_std: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def prompt_set(vocab: int, n_prompts: int, n_tokens: int, seed: int) -> np.ndarray:
    """A fixed, seeded set of ``n_prompts`` random token sequences of ``n_tokens`` tokens."""
    rng = np.random.default_rng([seed, 0x5EED])
    return rng.integers(0, vocab, size=(n_prompts, n_tokens), dtype=np.int64)


def load_prompt_file(path: Path | str, vocab: int) -> np.ndarray:
    """Prompts from a JSON file: a list of equally long lists of token ids."""
    path = Path(path)
    from hwmodel.io import errors_as, read_json

    with errors_as(CheckpointError):
        data = read_json(path, "JSON file of token-id lists")
    if not isinstance(data, list) or not data or not all(isinstance(p, list) and p for p in data):
        raise CheckpointError(f"{path}: expected a non-empty JSON list of non-empty token-id lists")
    if len({len(p) for p in data}) != 1:
        raise CheckpointError(f"{path}: every prompt must have the same number of tokens")
    if not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for p in data for t in p):
        raise CheckpointError(f"{path}: token ids must be integers in [0, {vocab})")
    arr = np.asarray(data, dtype=np.int64)
    if not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() >= vocab:
        raise CheckpointError(f"{path}: token ids must be integers in [0, {vocab})")
    return arr.astype(np.int64)


def int8_weights(source: TensorSource) -> TensorSource:
    """``source`` with every matrix replaced by its per-output-channel int8 quantization, dequantized (float64)."""
    from fpga.functional.quantize import quantize_linear

    def get(name: str) -> np.ndarray:
        t = source(name)
        if np.ndim(t) != 2:
            return t
        w_q, _m, _e = quantize_linear(t, name)
        wamax = np.max(np.abs(np.asarray(t).astype(np.float64)), axis=1)
        return w_q.astype(np.float64) * (wamax / 127.0)[:, None]

    return get


Logits = Callable[[int], np.ndarray]

#: the last float64 reference (source, llm, prompts, hidden, head): :func:`measure` and :func:`measure_weight_only`
#: on the same source and prompts (``fpga accuracy --weight-only``) compare against it, so it is computed once
_LAST_REFERENCE: list[tuple[TensorSource, LlmSpec, bytes, np.ndarray, np.ndarray]] = []


def float_reference(llm: LlmSpec, source: TensorSource, prompts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float64 reference's final hidden states of ``prompts`` and its LM-head matrix, reused by the next call on
    the same source object, LLM and prompts (the source is kept with it, so its identity cannot be reused)."""
    key = np.ascontiguousarray(prompts).tobytes()
    for src, spec, k, hidden, head in _LAST_REFERENCE:
        if src is source and spec == llm and k == key:
            return hidden, head
    hidden = fref.final_hidden(llm, source, prompts)
    head = fref.lm_head_weight(llm, source)
    _LAST_REFERENCE[:] = [(source, llm, key, hidden, head)]
    return hidden, head


def _compare(
    P: int,
    T: int,
    got_logits: Logits,
    want_logits: Logits,
    llm: LlmSpec,
    label: str,
    datapath: str,
    progress: Callable[[], object] | None,
) -> AccuracyReport:
    agree = top5 = 0
    sq_err = 0.0
    max_err = 0.0
    sum_f = sum_f2 = 0.0
    count = 0
    for p in range(P):
        got = got_logits(p)
        want = want_logits(p)
        want_top = np.argmax(want, axis=1)
        agree += int(np.sum(np.argmax(got, axis=1) == want_top))
        top5_idx = np.argpartition(-got, 5, axis=1)[:, :5]
        top5 += int(np.sum(np.any(top5_idx == want_top[:, None], axis=1)))
        err = got - want
        sq_err += float(np.sum(err * err))
        max_err = max(max_err, float(np.max(np.abs(err))))
        sum_f += float(np.sum(want))
        sum_f2 += float(np.sum(want * want))
        count += want.size
        if progress is not None:
            progress()
    n = P * T
    rms = float(np.sqrt(sq_err / count))
    std = float(np.sqrt(max(sum_f2 / count - (sum_f / count) ** 2, 0.0)))
    return AccuracyReport(
        llm=llm.name,
        weights=label,
        datapath=datapath,
        prompts=P,
        positions=n,
        top1_agreement=agree / n,
        top5_containment=top5 / n,
        logit_rms_error=rms,
        logit_max_abs_error=max_err,
        logit_relative_rms_error=rms / std if std > 0 else float("nan"),
        float_logit_std=std,
    )


def measure(
    llm: LlmSpec,
    source: TensorSource,
    prompts: np.ndarray,
    weights_label: str,
    progress: Callable[[], object] | None = None,
) -> AccuracyReport:
    """Teacher-forced comparison of the W8A8 integer model and the float64 reference on ``prompts`` (P, T)."""
    from fpga.functional.model import DraftModel

    prompts = np.asarray(prompts, np.int64)
    P, T = prompts.shape
    model = DraftModel(llm, quantize_model(llm, source), capacity=max(T, 1), min_window=max(T, 1))
    hidden, head = float_reference(llm, source, prompts)

    def got(p: int) -> np.ndarray:
        model.prefill(prompts[p])
        return model.logits(np.arange(T)).astype(np.float64) / 2.0**F_L

    return _compare(
        P, T, got, lambda p: fref.logits(hidden[p], head), llm, weights_label, "W8A8 integer (this model)", progress
    )


def measure_weight_only(
    llm: LlmSpec,
    source: TensorSource,
    prompts: np.ndarray,
    weights_label: str,
    progress: Callable[[], object] | None = None,
) -> AccuracyReport:
    """The ablation: float64 forward with int8 (per-channel) weights against the float64 reference."""
    prompts = np.asarray(prompts, np.int64)
    P, T = prompts.shape
    q_source = int8_weights(source)
    hidden, head = float_reference(llm, source, prompts)
    hidden_q = fref.final_hidden(llm, q_source, prompts)
    head_q = fref.lm_head_weight(llm, q_source)
    return _compare(
        P,
        T,
        lambda p: fref.logits(hidden_q[p], head_q),
        lambda p: fref.logits(hidden[p], head),
        llm,
        weights_label,
        "int8 weights only, float64 activations",
        progress,
    )


def describe(reports: Sequence[AccuracyReport]) -> list[list[str]]:
    """Rows for a table (one per report)."""
    return [
        [
            r.llm,
            r.weights,
            r.datapath,
            f"{r.prompts} x {r.positions // max(r.prompts, 1)}",
            f"{r.top1_agreement:.1%}",
            f"{r.top5_containment:.1%}",
            f"{r.logit_rms_error:.4f}",
            f"{r.logit_max_abs_error:.3f}",
            f"{r.logit_relative_rms_error:.2%}",
        ]
        for r in reports
    ]
