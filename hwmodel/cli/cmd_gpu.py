"""`hwmodel gpu prefill|decode|prm|frameworks`: the calibrated GPU engine from the command line."""

from __future__ import annotations

from typing import Any

import click

from hwmodel.cli.base import SpecName, console, echo_json, group, json_option
from hwmodel.domains import check_context
from hwmodel.units import fmt_bytes, fmt_s

gpu_group = group("gpu")


def _engine_options(f: Any) -> Any:
    from gpu.frameworks import FRAMEWORKS

    options = [
        click.option("--gpu", "gpu", type=SpecName("gpu"), required=True, help="GPU spec name (`hwmodel specs list`)."),
        click.option("--llm", "llm", type=SpecName("llm"), required=True, help="LLM spec name."),
        click.option(
            "--framework",
            type=click.Choice(sorted(FRAMEWORKS)),
            default="vllm",
            show_default=True,
            help="Serving framework (`hwmodel gpu frameworks`).",
        ),
        click.option(
            "--weight-bits",
            type=click.Choice(["4", "8", "16"]),
            default=None,
            help="Weight precision [default: the framework's, 16 except edge-w8a8].",
        ),
        click.option(
            "--kv-bits", type=click.Choice(["8", "16"]), default="16", show_default=True, help="KV-cache precision."
        ),
        json_option,
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _engine(gpu: Any, llm: Any, framework: str, weight_bits: str | None, kv_bits: str) -> Any:
    from gpu.latency import GpuEngine

    return GpuEngine(
        gpu, llm, framework=framework, weight_bits=int(weight_bits) if weight_bits else None, kv_bits=int(kv_bits)
    )


def _cost_rows(cost: Any, tokens: int) -> list[tuple[str, str]]:
    return [
        ("time", fmt_s(cost.time_s)),
        ("tokens/s", f"{tokens / cost.time_s:.1f}"),
        ("bound by", cost.bound),
        ("GPU busy (sum of kernels)", fmt_s(cost.gpu_busy_s)),
        ("host done issuing at", fmt_s(cost.host_done_s)),
        ("kernels", str(cost.kernels)),
        ("DRAM bytes", fmt_bytes(cost.dram_bytes)),
        ("operations", f"{cost.ops:.3g}"),
        ("board power", f"{cost.power_w:.0f} W"),
        ("energy", f"{cost.energy_j:.3g} J ({cost.energy_j / tokens:.3g} J/token)"),
    ]


def _show(title: str, rows: list[tuple[str, str]]) -> None:
    from rich.table import Table

    t = Table("quantity", "value", title=title)
    for k, v in rows:
        t.add_row(k, v)
    console().print(t)


def _cost_json(eng: Any, cost: Any, **extra: Any) -> dict[str, Any]:
    return {
        "engine": eng.name,
        "weight_bits": eng.weight_bits,
        "kv_bits": eng.kv_bits,
        **extra,
        "time_s": cost.time_s,
        "gpu_busy_s": cost.gpu_busy_s,
        "host_done_s": cost.host_done_s,
        "bound": cost.bound,
        "kernels": cost.kernels,
        "dram_bytes": cost.dram_bytes,
        "ops": cost.ops,
        "power_w": cost.power_w,
        "energy_j": cost.energy_j,
    }


@gpu_group.command("prefill")
@_engine_options
@click.option("--tokens", type=click.IntRange(min=1), required=True, help="New tokens to prefill.")
@click.option(
    "--ctx",
    "ctx_tokens",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Tokens already in the KV cache (prefix cache hit).",
)
def prefill_cmd(
    gpu: Any,
    llm: Any,
    framework: str,
    weight_bits: str | None,
    kv_bits: str,
    as_json: bool,
    tokens: int,
    ctx_tokens: int,
) -> None:
    """Prefill time, power and energy of TOKENS new tokens on one GPU."""
    check_context(ctx_tokens, llm, "--ctx/--tokens", new_tokens=tokens)
    eng = _engine(gpu, llm, framework, weight_bits, kv_bits)
    cost = eng.prefill_cost(tokens, ctx_tokens)
    if as_json:
        echo_json(_cost_json(eng, cost, tokens=tokens, ctx=ctx_tokens))
        return
    _show(f"Prefill: {eng.name}, {tokens} tokens after {ctx_tokens}", _cost_rows(cost, tokens))


@gpu_group.command("decode")
@_engine_options
@click.option(
    "--ctx",
    "ctx_tokens",
    type=click.IntRange(min=0),
    default=1024,
    show_default=True,
    help="Tokens already in the KV cache.",
)
@click.option(
    "--batch",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Sequences decoded together (all at --ctx).",
)
@click.option(
    "--output-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Also the mean figures of this many decode steps from --ctx (a generation window).",
)
def decode_cmd(
    gpu: Any,
    llm: Any,
    framework: str,
    weight_bits: str | None,
    kv_bits: str,
    as_json: bool,
    ctx_tokens: int,
    batch: int,
    output_tokens: int | None,
) -> None:
    """Time of one decode step (batch 1: with power, energy per token and the bandwidth floor)."""
    from hwmodel.bounds import decode_bytes

    check_context(ctx_tokens, llm, "--ctx")
    eng = _engine(gpu, llm, framework, weight_bits, kv_bits)
    if batch > 1:
        step = eng.decode_batch_s([ctx_tokens] * batch)
        if as_json:
            echo_json(
                {"engine": eng.name, "ctx": ctx_tokens, "batch": batch, "step_s": step, "tokens_per_s": batch / step}
            )
            return
        _show(
            f"Batched decode: {eng.name}, {batch} x ctx {ctx_tokens}",
            [("step time", fmt_s(step)), ("tokens/s (all sequences)", f"{batch / step:.1f}")],
        )
        return
    from hwmodel.quantities import decode_point, decode_window

    cost = eng.decode_cost(ctx_tokens)
    floor = decode_bytes(eng.llm, eng.weight_bits, eng.kv_bits, ctx_tokens).total_bytes / eng.gpu.mem_bw_bytes_per_s
    point = decode_point(eng, ctx_tokens)
    window = decode_window(eng, ctx_tokens, output_tokens) if output_tokens else None
    if as_json:
        echo_json(
            {
                **_cost_json(eng, cost, ctx=ctx_tokens, bandwidth_floor_s=floor),
                "decode": point.to_dict(),
                **({"window": window.to_dict()} if window else {}),
            }
        )
        return
    _show(
        f"Decode: {eng.name}, ctx {ctx_tokens}",
        [
            *_cost_rows(cost, 1),
            ("tokens/s/W (this step)", f"{point.tokens_per_s_per_w:.3f}"),
            ("bandwidth floor (peak BW)", f"{fmt_s(floor)} ({cost.time_s / floor:.2f}x)"),
        ]
        + (
            [
                (
                    f"mean of {output_tokens} steps",
                    f"{fmt_s(window.seconds_per_token)}/token, "
                    f"{window.power_w:.1f} W, {window.tokens_per_s_per_w:.3f} tokens/s/W",
                )
            ]
            if window
            else []
        ),
    )


@gpu_group.command("prm")
@_engine_options
@click.option(
    "--ctx",
    "ctx_tokens",
    type=click.IntRange(min=0),
    required=True,
    help="Tokens before the scored step (question + accepted steps).",
)
@click.option("--step-tokens", type=click.IntRange(min=1), required=True, help="Tokens of the step being scored.")
@click.option(
    "--prefix-cache/--no-prefix-cache",
    default=False,
    show_default=True,
    help="Reuse the cached prefix (only the step is computed) or recompute the whole context.",
)
def prm_cmd(
    gpu: Any,
    llm: Any,
    framework: str,
    weight_bits: str | None,
    kv_bits: str,
    as_json: bool,
    ctx_tokens: int,
    step_tokens: int,
    prefix_cache: bool,
) -> None:
    """One PRM scoring pass (prefill only, value head) of a reasoning step."""
    check_context(ctx_tokens, llm, "--ctx/--step-tokens", new_tokens=step_tokens)
    eng = _engine(gpu, llm, framework, weight_bits, kv_bits)
    cost = eng.score_cost(step_tokens, ctx_tokens, prefix_cache=prefix_cache)
    computed = step_tokens if prefix_cache else ctx_tokens + step_tokens
    if as_json:
        echo_json(
            _cost_json(
                eng, cost, ctx=ctx_tokens, step_tokens=step_tokens, prefix_cache=prefix_cache, computed_tokens=computed
            )
        )
        return
    _show(
        f"PRM score: {eng.name}, step of {step_tokens} after {ctx_tokens} "
        f"({'prefix cache' if prefix_cache else 'no prefix cache'}: {computed} tokens computed)",
        _cost_rows(cost, computed),
    )


@gpu_group.command("frameworks")
@json_option
def frameworks_cmd(as_json: bool) -> None:
    """The serving frameworks and the calibrated parameters each uses."""
    from gpu.frameworks import FRAMEWORKS
    from gpu.params import default_params

    p = default_params()
    rows = []
    for fw in FRAMEWORKS.values():
        used = {
            "eta_bw": p["eta_bw"],
            "t_kernel_s": p["t_kernel_s"],
            "n_half_tokens": p["n_half_tokens"],
            fw.host_op_param: p[fw.host_op_param],
            fw.compute_eff_param: p[fw.compute_eff_param],
            "power_gamma": p["power_gamma"],
        }
        if fw.engine_step:
            used["t_step_vllm_s"] = p["t_step_vllm_s"]
            used["c_seq_vllm_s"] = p["c_seq_vllm_s"]
        if fw.program in ("hf", "w8a8"):  # eager KV-cache copies (gpu.launch.COPY_KERNELS)
            used["eta_copy_hf"] = p["eta_copy_hf"]
        rows.append(
            {
                "name": fw.name,
                "display_name": fw.display_name,
                "decode": "CUDA graph" if fw.decode_graph else "eager",
                "kv_layout": fw.kv_layout,
                "weight_bits": list(fw.allowed_weight_bits),
                "doc": fw.doc,
                "params": used,
            }
        )
    if as_json:
        echo_json(rows)
        return
    from rich.table import Table

    t = Table("framework", "decode", "KV", "parameters", "what it models", title="GPU serving frameworks")
    for r in rows:
        t.add_row(
            r["name"],
            r["decode"],
            r["kv_layout"],
            "\n".join(f"{k} = {v:.4g}" for k, v in r["params"].items()),
            r["doc"],
        )
    console().print(t)
