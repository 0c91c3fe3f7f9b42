"""`hwmodel workload requests generate | validate`: serving request streams as files."""

from __future__ import annotations

from pathlib import Path

import click

from hwmodel.cli.base import CONTEXT_SETTINGS, echo_json, group, json_option

workload = group("workload")


@workload.group("requests", context_settings=CONTEXT_SETTINGS)
def requests_group() -> None:
    """Serving request streams: generate (Poisson, fixed or distributed lengths) and validate."""


@requests_group.command("generate", context_settings=CONTEXT_SETTINGS)
@click.option(
    "--n", "n_requests", type=click.IntRange(min=1), default=1000, show_default=True, help="Requests to generate."
)
@click.option(
    "--rate",
    type=float,
    default=1.0,
    show_default=True,
    help="Poisson arrival rate (requests/s); inf puts every arrival at t=0.",
)
@click.option(
    "--prompt",
    default="1536",
    show_default=True,
    help="Prompt length law: N, fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:MAX.",
)
@click.option("--output", default="512", show_default=True, help="Output length law (same forms).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the request generator.")
@click.option(
    "-o",
    "--out",
    "out_file",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Output file (.csv or .jsonl).",
)
def requests_generate(n_requests: int, rate: float, prompt: str, output: str, seed: int, out_file: Path) -> None:
    """Write a request stream to a file."""
    from hwmodel.workload.requests import parse_length, poisson_stream, summary, write_requests

    reqs = poisson_stream(n_requests, rate, parse_length(prompt, "--prompt"), parse_length(output, "--output"), seed)
    write_requests(out_file, reqs)
    s = summary(reqs)
    click.echo(
        f"wrote {out_file}: {s['requests']} requests over {s['span_s']:.1f} s, "
        f"mean prompt {s['prompt_tokens_mean']:.0f}, mean output {s['output_tokens_mean']:.0f} tokens"
    )


@requests_group.command("validate", context_settings=CONTEXT_SETTINGS)
@click.argument("path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--llm", default=None, help="Also check prompt + output against this LLM's context limit.")
@json_option
def requests_validate(path: Path, llm: str | None, as_json: bool) -> None:
    """Check a request file; print its summary or a one-line error naming the line and field."""
    from hwmodel.specs import library
    from hwmodel.workload.requests import load_requests, summary

    limit = library().llm(llm).max_position if llm else None
    s = summary(load_requests(path, max_context_tokens=limit))
    if as_json:
        echo_json(s)
        return
    click.echo(f"{path}: OK, " + ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}" for k, v in s.items()))
