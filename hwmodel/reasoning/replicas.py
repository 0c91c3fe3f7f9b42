"""A system-A replay replicated over trace seeds: the synthetic trace generator (:mod:`hwmodel.workload.generator`)
draws each problem's steps, tokens per step and PRM verdicts from its seed, so a replay of ``limit`` problems of a
dataset is a sample; ``N`` seeds give each summary metric's mean and confidence interval (:mod:`hwmodel.replicas`).
The platform (device models) is built once and shared by every seed."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from hwmodel.replicas import Replicas, seed_list

#: metrics the CLI and the plots show by default
HEADLINE = ("latency_mean_s", "goodput_tokens_per_s", "energy_per_token_j", "stall_ratio", "comm_share")


def run_seeds(
    dataset: str,
    policy: str,
    system: str | Any,
    seeds: int,
    *,
    first_seed: int | None = None,
    target: str | None = None,
    backtracking: bool = True,
    limit: int | None = None,
    draft: str | None = None,
    on_seed: Callable[[int], None] | None = None,
) -> Replicas:
    """Generate ``seeds`` traces of ``dataset`` (seeds ``first_seed ..``; default: the generator's own seed first)
    for the system's target and replay each under ``policy``; ``runs`` holds each seed's summary."""
    from hwmodel.reasoning.metrics import summarize
    from hwmodel.reasoning.runner import run_trace
    from hwmodel.reasoning.system import build_platform, load_system
    from hwmodel.workload.generator import DEFAULT_SEED, generate

    spec = load_system(str(system)) if isinstance(system, (str, os.PathLike)) else system  # a name/path, or loaded
    platform = build_platform(spec, policy, draft=draft)
    ss = seed_list(DEFAULT_SEED if first_seed is None else first_seed, seeds)
    tgt = target or spec.target_llm
    summaries = []
    for s in ss:
        trace = generate(dataset, tgt, backtracking, seed=s, limit=limit)
        summaries.append(summarize(run_trace(trace, policy, platform, spec.name)))
        if on_seed is not None:
            on_seed(s)
    per_seed = [s.as_row() for s in summaries]
    what = (
        f"{policy} on {spec.name}, {dataset}"
        + (f" ({limit} problems)" if limit else "")
        + ("" if backtracking else ", no backtracking")
    )
    return Replicas.of(what, ss, summaries, per_seed)
