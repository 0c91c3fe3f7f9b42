"""`hwmodel fpga run` (co-simulation: functional W8A8 tokens timed by the cycle-level model) and
`hwmodel fpga accuracy` (the integer datapath against float64)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import SpecName, console, echo_json, group, json_option
from hwmodel.cli.options import clock_option
from hwmodel.errors import HwmodelError

fpga = group("fpga")


def _model(llm: Any, checkpoint: Path | None, seed: int, capacity: int) -> Any:
    from fpga.functional.model import DraftModel

    if checkpoint is not None:
        return DraftModel.from_safetensors(checkpoint, llm, capacity=capacity)
    return DraftModel.from_synthetic(llm, seed=seed, capacity=capacity)


def _prompt(llm: Any, n_tokens: int, seed: int, prompt_file: Path | None) -> list[int]:
    import numpy as np

    if prompt_file is not None:
        from fpga.functional.accuracy import load_prompt_file

        return [int(t) for t in load_prompt_file(prompt_file, llm.vocab)[0]]
    return [int(t) for t in np.random.default_rng([seed, 0x9E37]).integers(0, llm.vocab, n_tokens)]


@fpga.command("run")
@click.option(
    "--design",
    required=True,
    help="Streaming accelerator design: a built-in name (draft-u280, draft-v80) or a design TOML file.",
)
@click.option(
    "--prompt-tokens",
    type=click.IntRange(min=1),
    default=32,
    show_default=True,
    help="Prompt length (seeded random token ids unless --prompt-file).",
)
@click.option("--steps", type=click.IntRange(min=0), default=32, show_default=True, help="Tokens to decode.")
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the synthetic weights and of the random prompt.",
)
@click.option(
    "--checkpoint",
    type=click.Path(path_type=Path),
    default=None,
    help="Hugging Face Qwen2 safetensors file or directory (quantized at load) instead of synthetic weights.",
)
@click.option(
    "--prompt-file",
    type=click.Path(path_type=Path),
    default=None,
    help="JSON list of token-id lists; the first list is the prompt.",
)
@clock_option("clock_mhz", help="Kernel clock in MHz [default: the design's].")
@click.option(
    "--out",
    "out_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write one JSON line per decoded token as it is produced, then a summary line.",
)
@json_option
def fpga_run(
    design: str,
    prompt_tokens: int,
    steps: int,
    seed: int,
    checkpoint: Path | None,
    prompt_file: Path | None,
    clock_mhz: float | None,
    out_path: Path | None,
    as_json: bool,
) -> None:
    """Co-simulate the FPGA draft: the functional W8A8 model decodes real tokens (greedy, bit-exact integer
    datapath) and the cycle-level streaming model times each one at its context length."""
    from rich.progress import Progress

    from fpga.functional import cosim

    timing = cosim.streaming_timing(design, clock_hz=None if clock_mhz is None else clock_mhz * 1e6)
    llm = timing.llm
    prompt = _prompt(llm, prompt_tokens, seed, prompt_file)
    from hwmodel.domains import check_context

    # before any work: the last decoded token sits after prompt + steps - 1 cached tokens
    check_context(
        len(prompt) + max(steps, 1) - 1,
        llm,
        "--prompt-tokens + --steps",
        max_ctx=timing.design.max_ctx,
        design=timing.design.name,
    )
    capacity = len(prompt) + steps
    capacity = min(max(64, -(-capacity // 64) * 64), llm.max_position)
    if len(prompt) + steps > capacity:
        raise HwmodelError(
            f"prompt ({len(prompt)}) + steps ({steps}) exceed the context of '{llm.name}' ({llm.max_position})"
        )
    model = _model(llm, checkpoint, seed, capacity)
    out = out_path.open("w") if out_path is not None else None
    try:
        with Progress(console=console(), transient=True, disable=as_json) as progress:
            task = progress.add_task("decoding", total=steps)

            def on_token(rec: cosim.TokenRecord) -> None:
                if out is not None:
                    out.write(json.dumps(rec.__dict__) + "\n")
                    out.flush()
                progress.advance(task)

            result = cosim.run(model, timing, prompt, steps, on_token=on_token)
        if out is not None:
            summary = result.as_dict()
            summary.pop("records")
            out.write(json.dumps({"summary": summary}) + "\n")
    finally:
        if out is not None:
            out.close()
    if as_json:
        echo_json(result.as_dict())
        return
    from rich.table import Table

    t = Table(
        "step",
        "position",
        "token",
        "cycles",
        "decode (ms)",
        "host (ms)",
        title=f"{result.timing}: {llm.name}, prompt {len(prompt)} tokens, prefill {result.prefill_s * 1e3:.3f} ms",
    )
    rows = list(result.records)
    shown = rows if len(rows) <= 20 else rows[:10] + rows[-10:]
    for r in shown:
        t.add_row(
            str(r.step),
            str(r.position),
            str(r.token),
            "-" if r.cycles is None else str(r.cycles),
            f"{r.decode_s * 1e3:.4f}",
            f"{r.host_s * 1e3:.1f}",
        )
    console().print(t)
    click.echo(
        f"decoded {len(rows)} tokens in {result.decode_total_s * 1e3:.3f} ms simulated "
        f"({result.decode_tokens_per_s:.1f} tokens/s); total with prefill {result.total_s * 1e3:.3f} ms"
    )


@fpga.command("accuracy")
@click.option(
    "--llm",
    "llm",
    type=SpecName("llm"),
    default="qwen2.5-0.5b",
    show_default=True,
    help="LLM spec name (the draft's architecture).",
)
@click.option(
    "--seed",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Seed of the synthetic weights and of the prompt set.",
)
@click.option("--prompts", type=click.IntRange(min=1), default=8, show_default=True, help="Number of prompts.")
@click.option(
    "--prompt-tokens",
    type=click.IntRange(min=1),
    default=64,
    show_default=True,
    help="Tokens per prompt (every position is compared).",
)
@click.option(
    "--checkpoint",
    type=click.Path(path_type=Path),
    default=None,
    help="Hugging Face Qwen2 safetensors file or directory instead of synthetic weights.",
)
@click.option(
    "--prompt-file",
    type=click.Path(path_type=Path),
    default=None,
    help="JSON list of equally long token-id lists instead of the seeded random prompts.",
)
@click.option(
    "--weight-only",
    is_flag=True,
    help="Also measure the ablation: int8 weights with float64 activations (the weights' share).",
)
@json_option
def fpga_accuracy(
    llm: Any,
    seed: int,
    prompts: int,
    prompt_tokens: int,
    checkpoint: Path | None,
    prompt_file: Path | None,
    weight_only: bool,
    as_json: bool,
) -> None:
    """Accuracy of the W8A8 integer datapath against a float64 forward on the same float weights: top-1 agreement,
    top-5 containment and logit error over every position of a fixed prompt set (teacher-forced)."""
    from rich.progress import Progress

    from fpga.functional import accuracy
    from fpga.functional.weights import SafetensorsWeights, SyntheticWeights

    if checkpoint is not None:
        source: Any = SafetensorsWeights(checkpoint, llm)
        label = f"checkpoint {checkpoint}"
    else:
        source = SyntheticWeights(llm, seed)
        label = f"synthetic seed {seed}"
    if prompt_file is not None:
        ids = accuracy.load_prompt_file(prompt_file, llm.vocab)
    else:
        ids = accuracy.prompt_set(llm.vocab, prompts, prompt_tokens, seed)
    reports = []
    with Progress(console=console(), transient=True, disable=as_json) as progress:
        task = progress.add_task("comparing prompts", total=len(ids) * (2 if weight_only else 1))
        reports.append(accuracy.measure(llm, source, ids, label, progress=lambda: progress.advance(task)))
        if weight_only:
            reports.append(
                accuracy.measure_weight_only(llm, source, ids, label, progress=lambda: progress.advance(task))
            )
    if as_json:
        echo_json([r.as_dict() for r in reports] if weight_only else reports[0].as_dict())
        return
    from rich.table import Table

    t = Table(
        "LLM",
        "weights",
        "datapath",
        "prompts x tokens",
        "top-1 agree",
        "top-5 contain",
        "logit RMS err",
        "logit max err",
        "RMS err / logit std",
        title="Against a float64 forward on the same float weights",
    )
    for row in accuracy.describe(reports):
        t.add_row(*row)
    console().print(t)
