"""A serving run replicated over request-stream seeds (Poisson arrivals and length draws change with the seed;
the cluster, scheduler and device models do not): each metric's mean and confidence interval
(:mod:`hwmodel.replicas`). The device models are built once and shared by every seed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hwmodel.replicas import Replicas, seed_list

#: metrics the CLI and the plots show by default
HEADLINE = (
    "throughput_tok_per_s",
    "ttft_s.p50",
    "ttft_s.p90",
    "tpot_s.p50",
    "e2e_s.p90",
    "energy_per_token_j",
    "slo_attainment",
)


def run_seeds(
    cluster: Any,
    make_requests: Callable[[int], tuple[Any, ...]],
    seeds: int,
    first_seed: int = 0,
    scheduler: str = "fcfs",
    slo: Any = None,
    on_seed: Callable[[int], None] | None = None,
) -> Replicas:
    """Simulate ``cluster`` (a resolved cluster) on ``make_requests(seed)`` for ``seeds`` seeds from
    ``first_seed``; ``runs`` holds each seed's :class:`hwmodel.serving.metrics.Metrics`."""
    from hwmodel.io import jsonable
    from hwmodel.serving.metrics import compute_metrics
    from hwmodel.serving.simulator import simulate

    ss = seed_list(first_seed, seeds)
    kw = {} if slo is None else {"slo": slo}
    metrics = []
    for s in ss:
        metrics.append(compute_metrics(simulate(cluster, make_requests(s), scheduler, **kw)))
        if on_seed is not None:
            on_seed(s)
    per_seed = [{k: v for k, v in jsonable(m).items() if k != "devices"} for m in metrics]
    what = f"{cluster.spec.name} / {scheduler}, {metrics[0].requests} requests per seed"
    return Replicas.of(what, ss, metrics, per_seed)
