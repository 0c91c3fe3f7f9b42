"""Datacenter-scale serving runs (issue 18): many identical nodes on one network, a long Poisson stream.

:func:`scaled_cluster` replicates one node of a built-in cluster ``nodes`` times on a network link;
:func:`scale_point` / :func:`run_scale` run one stream on it and report the simulated metrics together with the host
time and peak memory of the run (the benchmark in benchmarks/bench_serving.py times 10k / 100k / 1M requests).
Engine set-up is shared by every identical device (one device model per group) and kept on disk between runs
(:class:`hwmodel.serving.devices.EngineFactory`), so a second run starts at once.
"""

from __future__ import annotations

import dataclasses
import resource
import time
from collections.abc import Callable
from typing import Any

from hwmodel.serving.cluster import ClusterSpec, NetworkSpec, load_cluster, resolve_cluster
from hwmodel.serving.devices import DeviceFactory, EngineFactory
from hwmodel.serving.metrics import compute_metrics
from hwmodel.serving.simulator import Simulation
from hwmodel.workload.requests import parse_length, poisson_stream


def scaled_cluster(node_cluster: str = "a100+7xu280", nodes: int = 64, network: str = "ethernet-100g") -> ClusterSpec:
    """``nodes`` copies of the (single) node of ``node_cluster``, joined by ``network``."""
    base = load_cluster(node_cluster)
    if len(base.nodes) != 1:
        raise ValueError(
            f"{node_cluster}: a scaled cluster replicates a one-node cluster, this one has {len(base.nodes)} nodes"
        )
    node = base.nodes[0]
    reps = tuple(dataclasses.replace(node, name=f"node{i}") for i in range(nodes))
    return dataclasses.replace(
        base,
        name=f"{nodes}x-{base.name}",
        display_name=f"{nodes} x ({base.display_name})",
        nodes=reps,
        network=NetworkSpec(link=network) if nodes > 1 else base.network,
    )


def scale_point(
    nodes: int = 64,
    requests: int = 1_000_000,
    node_cluster: str = "a100+7xu280",
    rate_per_node_per_s: float = 0.6,
    prompt: str = "fixed:1536",
    output: str = "fixed:512",
    seed: int = 0,
    scheduler: str = "fcfs",
) -> dict[str, Any]:
    """A JSON-serializable scale point (0.6 requests/s per node: below the hybrid node's ~0.68/s saturation at
    1,536 + 512, so queues stay bounded)."""
    return {
        "nodes": nodes,
        "requests": requests,
        "node_cluster": node_cluster,
        "rate_per_node_per_s": rate_per_node_per_s,
        "prompt": prompt,
        "output": output,
        "seed": seed,
        "scheduler": scheduler,
    }


def run_scale(
    point: dict[str, Any], factory: DeviceFactory | None = None, progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    """Run one scale point; the simulated metrics plus host seconds (set-up, stream, simulation, metrics) and the
    process's peak resident memory."""
    t0 = time.perf_counter()
    spec = scaled_cluster(point["node_cluster"], point["nodes"])
    cluster = resolve_cluster(spec)
    fac = factory or EngineFactory()
    reqs = poisson_stream(
        point["requests"],
        point["rate_per_node_per_s"] * point["nodes"],
        parse_length(point["prompt"], "prompt"),
        parse_length(point["output"], "output"),
        point["seed"],
    )
    t1 = time.perf_counter()
    sim = Simulation(cluster, reqs, point["scheduler"], factory=fac, progress=progress)
    t2 = time.perf_counter()
    res = sim.run()
    t3 = time.perf_counter()
    m = compute_metrics(res)
    t4 = time.perf_counter()
    if factory is None:
        fac.save()  # type: ignore[attr-defined]
    return {
        "point": point,
        "metrics": m,
        "devices": len(res.devices),
        "host_s": {"stream": t1 - t0, "setup": t2 - t1, "simulate": t3 - t2, "metrics": t4 - t3, "total": t4 - t0},
        "host_s_per_request": (t4 - t0) / point["requests"],
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


HOST_KEYS = ("host_s", "host_s_per_request", "peak_rss_bytes")  # measurements of this machine, not model results


def host_figures(res: dict[str, Any]) -> dict[str, Any]:
    """What :func:`run_scale` measured of the host (it differs from run to run)."""
    return {k: res[k] for k in HOST_KEYS}


def model_figures(res: dict[str, Any]) -> dict[str, Any]:
    """What :func:`run_scale` simulated (bit-identical from run to run)."""
    return {k: v for k, v in res.items() if k not in HOST_KEYS}
