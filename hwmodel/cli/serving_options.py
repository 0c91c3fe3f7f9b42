"""Option groups of the serving commands (`hwmodel serve run | sweep`): the request stream, the cluster and its
overrides, the scheduler (with user scheduler files) and the SLOs, and what they resolve to."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import click


def stream_options(f: Any) -> Any:
    for opt in reversed(
        [
            click.option(
                "--requests",
                "requests_file",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Request file (.csv or .jsonl with arrival_s, prompt_tokens, output_tokens). "
                "Overrides the generator options.",
            ),
            click.option(
                "--n",
                "n_requests",
                type=click.IntRange(min=1),
                default=200,
                show_default=True,
                help="Generated requests.",
            ),
            click.option(
                "--rate",
                type=float,
                default=math.inf,
                show_default=True,
                help="Poisson arrival rate (requests/s); inf queues every request at t=0 (saturation).",
            ),
            click.option(
                "--prompt",
                default="1536",
                show_default=True,
                help="Prompt length law: N, fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:MAX.",
            ),
            click.option("--output", default="512", show_default=True, help="Output length law (same forms)."),
            click.option("--seed", type=int, default=0, show_default=True, help="Seed of the request generator."),
        ]
    ):
        f = opt(f)
    return f


def load_stream(
    requests_file: Path | None,
    n_requests: int,
    rate: float,
    prompt: str,
    output: str,
    seed: int,
    max_context: int | None,
) -> tuple[Any, ...]:
    from hwmodel.workload.requests import load_requests, parse_length, poisson_stream, validate

    if requests_file is not None:
        return load_requests(requests_file, max_context_tokens=max_context)
    reqs = poisson_stream(n_requests, rate, parse_length(prompt, "--prompt"), parse_length(output, "--output"), seed)
    return validate(reqs, where="generated stream", max_context_tokens=max_context)


def cluster_of(name: str, llm: str | None, kv_path: str | None, gpu_batch: int | None) -> Any:
    from hwmodel.serving.cluster import load_cluster, resolve_cluster
    from hwmodel.serving.study import with_gpu_batch, with_kv_path

    spec = load_cluster(name)
    if kv_path:
        spec = with_kv_path(spec, kv_path)
    if gpu_batch:
        spec = with_gpu_batch(spec, gpu_batch)
    return resolve_cluster(spec, llm=llm)


def cluster_options(f: Any) -> Any:
    from hwmodel.serving.cluster import KV_PATHS

    for opt in reversed(
        [
            click.option("--llm", default=None, help="Serve this LLM instead of the cluster's (spec name)."),
            click.option(
                "--kv-path",
                type=click.Choice(KV_PATHS),
                default=None,
                help="Override the cluster's GPU -> FPGA KV migration path.",
            ),
            click.option(
                "--gpu-batch", type=click.IntRange(min=1), default=None, help="Override every GPU's decode batch limit."
            ),
        ]
    ):
        f = opt(f)
    return f


def _register_scheduler_files(_ctx: Any, _param: Any, paths: tuple[Path, ...]) -> tuple[Path, ...]:
    from hwmodel.serving.schedulers import load_scheduler_file

    for p in paths:
        load_scheduler_file(p)
    return paths


def scheduler_options(f: Any) -> Any:
    f = click.option(
        "--scheduler",
        default="fcfs",
        show_default=True,
        help="Scheduler name: fcfs, spf, memory-aware, slo-aware, or one a --scheduler-file adds.",
    )(f)
    return click.option(
        "--scheduler-file",
        "scheduler_files",
        multiple=True,
        is_eager=True,
        type=click.Path(dir_okay=False, path_type=Path),
        callback=_register_scheduler_files,
        expose_value=False,
        help="A Python file defining a scheduler (a Scheduler subclass decorated with "
        "@register_scheduler, hwmodel.serving.schedulers); repeatable.",
    )(f)


def slo_options(f: Any) -> Any:
    f = click.option("--slo-tpot", type=float, default=0.05, show_default=True, help="Time-per-output-token SLO (s).")(
        f
    )
    return click.option("--slo-ttft", type=float, default=1.0, show_default=True, help="Time-to-first-token SLO (s).")(
        f
    )
