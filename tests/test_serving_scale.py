"""Datacenter-scale serving runs: many nodes on one network, invariants, repeatability, the per-token reference."""

from __future__ import annotations

import json

import pytest

from hwmodel.serving.cluster import resolve_cluster
from hwmodel.serving.metrics import compute_metrics
from hwmodel.serving.report import jsonable
from hwmodel.serving.scale import host_figures, model_figures, run_scale, scale_point, scaled_cluster
from hwmodel.serving.simulator import simulate
from hwmodel.workload.requests import Fixed, poisson_stream
from tests.test_serving_fakes import FakeFactory
from tests.test_serving_sim import check_invariants


def test_scaled_cluster_replicates_the_node() -> None:
    spec = scaled_cluster("a100+7xu280", 5)
    assert [n.name for n in spec.nodes] == [f"node{i}" for i in range(5)] and spec.network is not None
    with pytest.raises(ValueError, match="one-node cluster"):
        scaled_cluster("a100-node+8xu280-node", 2)


def test_scale_run_invariants_and_cross_node_kv() -> None:
    """Twelve nodes near saturation: every request completes once, tokens and memory are conserved, and some KV
    caches cross the network (a request whose node has no free FPGA goes to another node's)."""
    cluster = resolve_cluster(scaled_cluster("a100+7xu280", 12))
    reqs = list(poisson_stream(1500, 12 * 0.6, Fixed(1536), Fixed(512), seed=0))
    res = simulate(cluster, reqs, factory=FakeFactory(), record_segments=True)
    check_invariants(res, reqs)
    paths = compute_metrics(res).kv_migrations
    assert paths.get("host-staged", 0) > 0 and paths.get("network-host-staged", 0) > 0, paths


def test_scale_run_is_bit_identical_from_run_to_run() -> None:
    point = scale_point(nodes=8, requests=2000)
    a, b = run_scale(point, factory=FakeFactory()), run_scale(point, factory=FakeFactory())
    assert json.dumps(jsonable(model_figures(a))) == json.dumps(jsonable(model_figures(b)))
    assert host_figures(a)["host_s"]["total"] > 0 and host_figures(a)["peak_rss_bytes"] > 0


def test_scale_fast_path_equals_per_token_reference() -> None:
    """The fast path (memoized KV schedules shifted to each prefill, link-calendar blocks, decode callbacks) gives
    the timeline of the reference with one event per decoded token, on a multi-node cluster with contention."""
    cluster = resolve_cluster(scaled_cluster("a100+7xu280", 4))
    reqs = poisson_stream(300, 4 * 2.0, Fixed(1536), Fixed(128), seed=1)  # some KV over the network, GPU batches
    fast = simulate(cluster, reqs, factory=FakeFactory())
    ref = simulate(cluster, reqs, factory=FakeFactory(), per_token_events=True)
    assert compute_metrics(fast).kv_migrations.get("network-host-staged", 0) > 0
    for a, b in zip(fast.requests, ref.requests):
        assert (a.prefill_dev, a.decode_dev, a.steps_prefill_pool, a.steps_decode_pool) == (
            b.prefill_dev,
            b.decode_dev,
            b.steps_prefill_pool,
            b.steps_decode_pool,
        )
        for f in ("t_prefill_start", "t_kv_ready", "t_first_token", "t_decode_start", "t_finish"):
            assert getattr(a, f) == pytest.approx(getattr(b, f), rel=1e-9, abs=1e-9, nan_ok=True), f
