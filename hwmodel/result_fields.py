"""Every field of every result type the API returns, with its unit and meaning: the source of the field tables in
docs/api.md (``python -m hwmodel.result_fields`` rewrites them) and of the field lists :func:`attach_docs` appends
to the classes' docstrings, so ``help(hw.OpTiming)`` or ``help(s.metrics)`` shows them. A test fails when a result
type gains a field this table does not document, or when docs/api.md is stale."""

from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

# (module, class) -> {field: (unit, meaning)}; properties count as fields where ``to_dict`` writes them
FIELDS: dict[tuple[str, str], dict[str, tuple[str, str]]] = {
    ("hwmodel.api", "OpTiming"): {
        "engine": ("", "engine name"),
        "operation": ("", "`decode` or `prefill`"),
        "n_tokens": ("tokens", "tokens processed (1 for a decode step)"),
        "ctx": ("tokens", "tokens already in the KV cache"),
        "seconds": ("s", "time of the operation"),
        "power_w": ("W", "board power during this operation at this `ctx` (hwmodel.quantities)"),
        "tokens_per_s": ("tokens/s", "n_tokens / seconds"),
        "energy_j": ("J", "seconds x power_w"),
        "tokens_per_s_per_w": ("tokens/s/W", "n_tokens / energy_j (tokens per joule)"),
    },
    ("hwmodel.quantities", "DecodeFigures"): {
        "engine": ("", "engine name"),
        "input_tokens": ("tokens", "context before the first decode step"),
        "output_tokens": ("tokens", "decode steps averaged"),
        "seconds_per_token": ("s", "mean decode step time"),
        "power_w": ("W", "energy-weighted mean board power over the steps"),
        "steps_simulated": ("steps", "steps the engine evaluated (the others interpolated by the sampling rule)"),
        "tokens_per_s": ("tokens/s", "1 / seconds_per_token"),
        "energy_per_token_j": ("J", "seconds_per_token x power_w"),
        "tokens_per_s_per_w": ("tokens/s/W", "1 / energy_per_token_j"),
    },
    ("hwmodel.api", "Saturation"): {
        "cluster": ("", "cluster name"),
        "scheduler": ("", "scheduler name"),
        "requests": ("requests", "requests run, all queued at t = 0"),
        "prompt": ("", "prompt length law"),
        "output": ("", "output length law"),
        "request_rate_per_s": ("requests/s", "requests completed / window: the rate `hw.load(f)` scales"),
        "throughput_tok_per_s": ("tokens/s", "output tokens / window at saturation"),
    },
    ("hwmodel.replicas", "Interval"): {
        "mean": ("metric's unit", "mean over seeds"),
        "low": ("metric's unit", "lower end of the interval"),
        "high": ("metric's unit", "upper end of the interval"),
        "std": ("metric's unit", "sample standard deviation over seeds"),
        "n": ("seeds", "seeds"),
        "confidence": ("fraction", "confidence level of [low, high] (Student t)"),
    },
    ("hwmodel.replicas", "Replicas"): {
        "what": ("", "the setting, for titles"),
        "seeds": ("", "the seeds run"),
        "runs": ("", "each seed's result (serving Metrics or system-A Summary)"),
        "per_seed": ("", "each seed's metrics, flattened to `a.b` keys"),
        "summary": ("", "metric -> Interval (mean and confidence interval)"),
    },
    ("hwmodel.api", "Serving"): {
        "cluster": ("", "cluster name"),
        "scheduler": ("", "scheduler name"),
        "metrics": ("", "Metrics (below)"),
        "result": ("", "the simulator's SimResult (every request)"),
    },
    ("hwmodel.serving.metrics", "Metrics"): {
        "cluster": ("", "cluster name"),
        "scheduler": ("", "scheduler name"),
        "requests": ("requests", "completed"),
        "window_s": ("s", "first arrival to last completion"),
        "output_tokens": ("tokens", "generated, all requests"),
        "prompt_tokens": ("tokens", "prompt tokens, all requests"),
        "throughput_tok_per_s": (
            "tokens/s",
            (
                "output tokens / window (below offered load x saturation throughput: "
                "the window includes ramp-up and drain)"
            ),
        ),
        "total_throughput_tok_per_s": ("tokens/s", "(prompt + output tokens) / window"),
        "request_rate_per_s": ("requests/s", "requests / window"),
        "ttft_s": ("s", "time to first token: Dist (mean, p50, p90, p99, max)"),
        "tpot_s": ("s", "time per output token after the first: Dist"),
        "e2e_s": ("s", "arrival to completion: Dist"),
        "slo_ttft_s": ("s", "TTFT SLO"),
        "slo_tpot_s": ("s", "TPOT SLO"),
        "slo_attainment": ("fraction", "requests meeting both SLOs"),
        "goodput_req_per_s": ("requests/s", "requests meeting both SLOs / window"),
        "energy_j": ("J", "every device's power integrated over the window, idle included"),
        "energy_per_token_j": ("J", "energy_j / output tokens"),
        "cost_usd": ("USD", "accelerators' price"),
        "tok_per_s_per_usd": ("tokens/s/USD", "throughput / cost_usd"),
        "decode_tokens_prefill_pool": ("tokens", "decoded on prefill-pool devices (GPUs helping)"),
        "decode_tokens_decode_pool": ("tokens", "decoded on decode-pool devices"),
        "kv_migrations": ("requests", "KV migrations by path"),
        "kv_exposed_s": ("s", "KV migration time not hidden behind the prefill: Dist"),
        "devices": ("", "DeviceUse per device (below)"),
    },
    ("hwmodel.serving.metrics", "Dist"): {
        "mean": ("s", "mean"),
        "p50": ("s", "median"),
        "p90": ("s", "90th percentile"),
        "p99": ("s", "99th percentile"),
        "max": ("s", "maximum"),
    },
    ("hwmodel.serving.metrics", "DeviceUse"): {
        "name": ("", "device instance"),
        "role": ("", "prefill or decode pool"),
        "model": ("", "device model"),
        "utilization": ("fraction", "(prefill + decode busy) / window"),
        "prefill_s": ("s", "busy prefilling"),
        "decode_s": ("s", "busy decoding"),
        "transfer_s": ("s", "receiving KV caches"),
        "energy_j": ("J", "over the window, idle included"),
        "peak_memory_bytes": ("bytes", "peak use"),
        "memory_bytes": ("bytes", "capacity"),
    },
    ("hwmodel.api", "Replay"): {
        "policy": ("", "system-A policy"),
        "system": ("", "system name"),
        "rows": ("", "ProblemMetrics per problem"),
        "summary": ("", "Summary (below)"),
    },
    ("hwmodel.reasoning.metrics", "Summary"): {
        "dataset": ("", "dataset"),
        "config": ("", "system name"),
        "policy": ("", "policy"),
        "backtracking": ("", "trace with backtracking"),
        "problems": ("problems", "replayed"),
        "latency_mean_s": ("s", "mean end-to-end latency per problem"),
        "latency_total_s": ("s", "sum of latencies"),
        "goodput_tokens_per_s": ("tokens/s", "committed tokens / total latency"),
        "energy_per_token_j": ("J", "all devices' energy (idle included) / committed tokens"),
        "energy_total_j": ("J", "all devices' energy"),
        "stall_ratio": ("fraction", "draft idle waiting for a verdict / latency"),
        "comm_share": ("fraction", "communication time / latency"),
        "discarded_energy_share": ("fraction", "energy of discarded step-ahead tokens / energy"),
        "discarded_draft_tokens": ("tokens", "step-ahead draft tokens discarded"),
        "discarded_target_tokens": ("tokens", "target tokens discarded"),
        "reused_target_tokens": ("tokens", "cached target tokens reused"),
        "util_draft": ("fraction", "draft device busy / span"),
        "util_prm": ("fraction", "PRM device busy / span"),
        "util_target": ("fraction", "target device busy / span"),
        "accuracy": ("fraction", "problems correct (carried by the trace)"),
        "invalidated_energy_share": (
            "fraction",
            ("energy of tokens a rejection invalidates / energy (the paper's waste metric)"),
        ),
        "invalidated_draft_tokens": ("tokens", "draft tokens a rejection invalidates"),
        "invalidated_target_tokens": ("tokens", "target tokens a rejection invalidates"),
        "backtracks": ("backtracks", "over all problems"),
    },
}


def _cls(key: tuple[str, str]) -> type:
    return getattr(importlib.import_module(key[0]), key[1])


def undocumented() -> list[str]:
    """``Class.field`` for every dataclass field of a result type missing from :data:`FIELDS`."""
    out = []
    for key, fields in FIELDS.items():
        out += [f"{key[1]}.{f.name}" for f in dataclasses.fields(_cls(key)) if f.name not in fields]
    return out


def field_lines(key: tuple[str, str]) -> list[str]:
    return [
        f"{name} [{unit}]: {meaning}" if unit else f"{name}: {meaning}" for name, (unit, meaning) in FIELDS[key].items()
    ]


def attach_docs() -> None:
    """Append each result type's field list (units included) to its docstring, once."""
    for key in FIELDS:
        cls = _cls(key)
        doc = cls.__doc__ or ""
        if "\n    Fields (unit):" in doc:
            continue
        try:
            cls.__doc__ = (
                doc.rstrip() + "\n\n    Fields (unit):\n" + "".join(f"      {ln}\n" for ln in field_lines(key))
            )
        except (AttributeError, TypeError):  # a slotted class whose __doc__ cannot be set
            pass


START, END = "<!-- result-fields:start (generated by python -m hwmodel.result_fields) -->", "<!-- result-fields:end -->"


def markdown() -> str:
    """The field tables of docs/api.md."""
    parts = [START, ""]
    for key, fields in FIELDS.items():
        parts += [f"**`{key[1]}`** (`{key[0]}`)", "", "| field | unit | meaning |", "|---|---|---|"]
        parts += [f"| `{n}` | {u or '-'} | {m} |" for n, (u, m) in fields.items()]
        parts.append("")
    parts.append(END)
    return "\n".join(parts)


def rewrite(doc: Path) -> bool:
    """Put :func:`markdown` between the markers of ``doc`` (appended when absent); True when it changed."""
    text = doc.read_text()
    new = (
        (text[: text.index(START)] + markdown() + text[text.index(END) + len(END) :])
        if START in text
        else (text.rstrip() + "\n\n## Result fields\n\n" + markdown() + "\n")
    )
    if new != text:
        doc.write_text(new)
    return new != text


if __name__ == "__main__":
    print("rewrote" if rewrite(Path(__file__).resolve().parent.parent / "docs" / "api.md") else "up to date")
