"""Export an engine's per-operator timing as Vidur's profiling CSVs, so Vidur (microsoft/vidur) can simulate serving
on a hwmodel device -- an FPGA decoder, or a GPU as hwmodel models it.

Schema (Vidur's ``data/profiling/compute/<device>/<model>/{mlp,attention}.csv``, read by
``vidur/execution_time_predictor/sklearn_execution_time_predictor.py``; times in milliseconds, per layer):

* ``mlp.csv``: one row per ``num_tokens``; ``time_stats.<op>.{min,max,mean,median,std}`` for ``emb``,
  ``input_layernorm``, ``attn_pre_proj``, ``attn_rope``, ``attn_post_proj``, ``post_attention_layernorm``,
  ``mlp_up_proj``, ``mlp_act``, ``mlp_down_proj``, ``add``; and the model keys Vidur filters on: ``n_head``,
  ``n_kv_head``, ``n_embd``, ``n_expanded_embd``, ``vocab_size``, ``use_gated_mlp``,
  ``num_tensor_parallel_workers``.
* ``attention.csv``: one row per (``batch_size``, ``kv_cache_size``, ``prefill_chunk_size``); ``time_stats.`` of
  ``attn_prefill`` (prefill rows) or ``attn_decode`` (decode rows, ``prefill_chunk_size`` 0), ``attn_kv_cache_save``,
  ``attn_input_reshape``, ``attn_output_reshape``; keys ``n_embd``, ``n_q_head``, ``n_kv_head``, ``block_size``,
  ``num_tensor_parallel_workers``, ``max_model_len``, ``is_prefill``.

Vidur's block time is attention layer + MLP layer + ``add`` (``vidur/entities/execution_time.py``), so ``add``
carries both residual adds of a layer. A model's times are deterministic, so min = max = mean = median, std = 0.
Batch 1 only (what the FPGA decoders run). Engines provide the times through the ``operator-times`` capability:
``operator_times_s(n_tokens, ctx)`` -> seconds per layer of each canonical operator below (plus ``embed``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hwmodel.engine import Capability, require
from hwmodel.errors import HwmodelError

#: canonical operator (what engines report) -> Vidur's compute operator
COMPUTE_OPS: dict[str, str] = {
    "embed": "emb",
    "input_norm": "input_layernorm",
    "qkv_proj": "attn_pre_proj",
    "rope": "attn_rope",
    "o_proj": "attn_post_proj",
    "post_norm": "post_attention_layernorm",
    "up_proj": "mlp_up_proj",
    "act": "mlp_act",
    "down_proj": "mlp_down_proj",
    "residual_add": "add",
}
ATTENTION_OPS = ("attention", "kv_write")
CANONICAL = tuple(COMPUTE_OPS) + ATTENTION_OPS
STATS = ("min", "max", "mean", "median", "std")


def _stats(prefix: str, ms: float) -> dict[str, float]:
    return {f"time_stats.{prefix}.{s}": (0.0 if s == "std" else ms) for s in STATS}


def _model_keys(llm: Any) -> dict[str, Any]:
    return {
        "n_head": llm.heads,
        "n_kv_head": llm.kv_heads,
        "n_embd": llm.hidden,
        "n_expanded_embd": llm.intermediate,
        "vocab_size": llm.vocab,
        "use_gated_mlp": llm.mlp != "ungated",
        "num_tensor_parallel_workers": 1,
    }


def operator_times(engine: Any, n_tokens: int, ctx: int) -> dict[str, float]:
    """Seconds per layer of every canonical operator (a missing one is an error, never a silent zero)."""
    t = dict(engine.operator_times_s(n_tokens, ctx))
    missing = [k for k in CANONICAL if k not in t]
    if missing:
        raise HwmodelError(f"{engine.name}: operator_times_s lacks {', '.join(missing)}")
    return t


def export(
    engine: Any,
    out_dir: Path | str,
    *,
    num_tokens: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128, 256),
    kv_cache_sizes: Sequence[int] = (0, 128, 256, 512, 1024, 2048),
    prefill_chunks: Sequence[int] = (1, 16, 64, 128, 256, 512),
    block_size: int = 16,
) -> list[Path]:
    """Write ``mlp.csv`` and ``attention.csv`` for ``engine`` under ``out_dir``; returns the paths."""
    require(engine, (Capability.OPERATOR_TIMES,), "Vidur profile export")
    llm = engine.llm
    max_len = int(min(llm.max_position, getattr(engine, "max_ctx", None) or llm.max_position))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    keys = _model_keys(llm)
    mlp_rows = []
    for n in num_tokens:
        t = operator_times(engine, int(n), 0)
        row: dict[str, Any] = {}
        for canon, vid in COMPUTE_OPS.items():
            row.update(_stats(vid, 1e3 * t[canon]))
        mlp_rows.append({**row, **keys, "num_tokens": int(n)})
    att_rows = []
    base = {
        "n_embd": llm.hidden,
        "n_q_head": llm.heads,
        "n_kv_head": llm.kv_heads,
        "block_size": block_size,
        "num_tensor_parallel_workers": 1,
        "max_model_len": max_len,
    }
    for kv in kv_cache_sizes:
        if kv + 1 > max_len:
            continue
        t = operator_times(engine, 1, int(kv))
        att_rows.append(
            {
                **_stats("attn_decode", 1e3 * t["attention"]),
                **_stats("attn_prefill", float("nan")),
                **_stats("attn_kv_cache_save", 1e3 * t["kv_write"]),
                **_stats("attn_input_reshape", 0.0),
                **_stats("attn_output_reshape", 0.0),
                **base,
                "batch_size": 1,
                "prefill_chunk_size": 0,
                "kv_cache_size": int(kv),
                "is_prefill": False,
            }
        )
        for chunk in prefill_chunks:
            if kv + chunk > max_len:
                continue
            tp = operator_times(engine, int(chunk), int(kv))
            att_rows.append(
                {
                    **_stats("attn_decode", float("nan")),
                    **_stats("attn_prefill", 1e3 * tp["attention"]),
                    **_stats("attn_kv_cache_save", 1e3 * tp["kv_write"]),
                    **_stats("attn_input_reshape", 0.0),
                    **_stats("attn_output_reshape", 0.0),
                    **base,
                    "batch_size": 1,
                    "prefill_chunk_size": int(chunk),
                    "kv_cache_size": int(kv),
                    "is_prefill": True,
                }
            )
    return [_write(out / "mlp.csv", mlp_rows), _write(out / "attention.csv", att_rows)]


def _write(path: Path, rows: list[Mapping[str, Any]]) -> Path:
    from hwmodel.report.tables import write_csv

    return write_csv(path, rows, list(rows[0]) if rows else [])


def vidur_block_ms(mlp_row: Mapping[str, str], att_row: Mapping[str, str]) -> float:
    """One layer's time as Vidur composes it from the two files' medians (ExecutionTime._get_block_execution_time,
    tensor/pipeline parallel terms zero): attention layer + MLP layer + add."""

    def med(row: Mapping[str, str], op: str) -> float:
        v = row.get(f"time_stats.{op}.median", "")
        return float(v) if v not in ("", None) else 0.0

    attn = sum(med(mlp_row, op) for op in ("attn_pre_proj", "attn_post_proj", "attn_rope", "input_layernorm"))
    attn += med(att_row, "attn_kv_cache_save") + med(att_row, "attn_decode") + med(att_row, "attn_prefill")
    mlp = sum(med(mlp_row, op) for op in ("mlp_up_proj", "mlp_down_proj", "mlp_act", "post_attention_layernorm"))
    return attn + mlp + med(mlp_row, "add")
