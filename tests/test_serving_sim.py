"""Serving simulator invariants over random streams and clusters, hand-computed cases, reference equivalence."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodel.engine import Phase
from hwmodel.errors import HwmodelError
from hwmodel.graph import params_of
from hwmodel.schema import build
from hwmodel.serving.cluster import ClusterSpec, load_cluster, resolve_cluster
from hwmodel.serving.metrics import compute_metrics
from hwmodel.serving.schedulers import SCHEDULERS, Slo
from hwmodel.serving.simulator import SimResult, simulate
from hwmodel.specs import library
from hwmodel.workload.requests import Fixed, Request, Uniform, poisson_stream
from tests.test_serving_fakes import A100_LIKE, U280_LIKE, FakeFactory

HOST = {"sampling_s_per_logit": {"value": 5.9e-9, "source": "test"}}
GiB = 2**30


def cluster_from(
    nodes: list[dict[str, Any]], kv_path: str = "host-staged", network: str | None = None, llm: str = "llama2-7b"
) -> Any:
    def pools(n: dict[str, Any]) -> dict[str, Any]:  # shorthand: gpus -> prefill pool, fpgas (design) -> decode pool
        out = {k: v for k, v in n.items() if k not in ("gpus", "fpgas")}
        if n.get("gpus"):
            out["prefill"] = n["gpus"]
        if n.get("fpgas"):
            out["decode"] = [{("device" if k == "design" else k): v for k, v in g.items()} for g in n["fpgas"]]
        return out

    table: dict[str, Any] = {
        "name": "test",
        "display_name": "test",
        "llm": llm,
        "kv_path": kv_path,
        "nodes": [{"host": HOST, **pools(n)} | {"name": f"n{i}"} for i, n in enumerate(nodes)],
    }
    if network:
        table["network"] = {"link": network}
    return resolve_cluster(build(ClusterSpec, table, path="<test>"))


def check_invariants(res: SimResult, requests: list[Request]) -> None:
    """Completion, conservation, causality, exclusivity, memory (the issue's 'done when' properties)."""
    by_id = {r.id: r for r in requests}
    assert sorted(rs.id for rs in res.requests) == sorted(by_id)
    for rs in res.requests:
        r = by_id[rs.id]
        assert rs.done == 1, f"request {rs.id} completed {rs.done} times"
        assert rs.steps_prefill_pool + rs.steps_decode_pool == r.output_tokens - 1, "decode steps not conserved"
        assert rs.steps_prefill_pool == 0 or rs.steps_decode_pool == 0, "a request decoded on two devices"
        assert rs.ctx == r.prompt_tokens + r.output_tokens - 1
        assert r.arrival_s <= rs.t_prefill_start <= rs.t_prefill_end <= rs.t_first_token <= rs.t_finish
        if r.output_tokens > 1:
            assert rs.t_prefill_end <= rs.t_kv_ready <= rs.t_decode_start <= rs.t_finish
            assert rs.t_first_token <= rs.t_decode_start
    for d in res.devices:
        assert d.mem_peak <= d.model.memory_bytes, f"{d.name} memory exceeded"
        assert d.mem_used == d.model.weights_bytes, f"{d.name} leaked memory"
        segs = sorted(d.segments)
        for (s0, e0, _, _), (s1, _e1, _, _) in zip(segs, segs[1:]):
            assert e0 <= s1 + 1e-12, f"{d.name} ran two things at once: {(s0, e0)} and {s1}"
        busy = sum(e - s for s, e, _, _ in segs)
        assert busy == pytest.approx(d.phase_s[Phase.PREFILL] + d.phase_s[Phase.DECODE], rel=1e-9, abs=1e-12)
        if d.role == "decode":
            assert all(len(ids) == 1 for _, _, _, ids in segs)
        else:
            assert all(len(ids) <= d.model.max_decode_batch for _, _, _, ids in segs)


# ------------------------------------------------------------------------------------------------ random runs
device_groups = st.fixed_dictionaries(
    {
        "gpus": st.lists(
            st.fixed_dictionaries(
                {
                    "device": st.sampled_from(["a100-40gb", "rtx3090"]),
                    "count": st.integers(1, 2),
                    "max_decode_batch": st.integers(1, 4),
                }
            ),
            max_size=1,
        ),
        "fpgas": st.lists(
            st.fixed_dictionaries({"design": st.sampled_from(["fake-u280"]), "count": st.integers(1, 3)}), max_size=1
        ),
    }
).filter(lambda n: n["gpus"] or n["fpgas"])


@st.composite
def scenarios(draw: Any) -> tuple[Any, list[Request], str, FakeFactory]:
    nodes = draw(st.lists(device_groups, min_size=1, max_size=2))
    has_gpu = any(n["gpus"] for n in nodes)
    kv_path = draw(st.sampled_from(["host-staged", "p2p"]))
    cluster = cluster_from(
        [{k: v for k, v in n.items() if v} for n in nodes], kv_path, "ethernet-100g" if len(nodes) > 1 else None
    )
    n = draw(st.integers(1, 25))
    rate = draw(st.sampled_from([0.5, 2.0, 20.0, math.inf]))
    prompt = Uniform(1, draw(st.sampled_from([64, 1536, 3000])))
    output = Uniform(1, draw(st.sampled_from([2, 64, 600])))
    reqs = list(poisson_stream(n, rate, prompt, output, seed=draw(st.integers(0, 2**16))))
    # memory from roomy to tight: too-long requests must avoid the FPGAs, GPU batches wait for memory
    llm = cluster.llm
    fpga_kv_tokens = draw(st.sampled_from([2000, 3600, 20000] if has_gpu else [3600, 20000]))
    gpu_kv_tokens = draw(st.sampled_from([3600, 8000, 40000]))
    weights = 3 * GiB
    factory = FakeFactory(
        fpga_memory_bytes=weights + llm.kv_bytes(fpga_kv_tokens, 8),
        fpga_weights_bytes=weights,
        gpu_memory_bytes=params_of(llm).total * 2 + llm.kv_bytes(gpu_kv_tokens, 16),
        gpu_padded=draw(st.booleans()),
    )
    return cluster, reqs, draw(st.sampled_from(sorted(SCHEDULERS))), factory


@settings(max_examples=300)
@given(scenarios())
def test_invariants_random_streams_and_clusters(case: tuple[Any, list[Request], str, FakeFactory]) -> None:
    cluster, reqs, sched, factory = case
    res = simulate(cluster, reqs, sched, factory=factory, record_segments=True)
    check_invariants(res, reqs)


@settings(max_examples=100)
@given(scenarios())
def test_fast_path_equals_per_token_reference(case: tuple[Any, list[Request], str, FakeFactory]) -> None:
    """One timed event per FPGA decode / per GPU decode run gives the same timeline as one event per token."""
    cluster, reqs, sched, factory = case
    fast = simulate(cluster, reqs, sched, factory=factory, record_segments=True)
    ref = simulate(cluster, reqs, sched, factory=factory, per_token_events=True)
    for a, b in zip(sorted(fast.requests, key=lambda r: r.id), sorted(ref.requests, key=lambda r: r.id)):
        assert (a.prefill_dev, a.decode_dev, a.steps_prefill_pool, a.steps_decode_pool) == (
            b.prefill_dev,
            b.decode_dev,
            b.steps_prefill_pool,
            b.steps_decode_pool,
        )
        for f in ("t_prefill_start", "t_first_token", "t_decode_start", "t_finish"):
            assert getattr(a, f) == pytest.approx(getattr(b, f), rel=1e-9, abs=1e-9, nan_ok=True), f


def test_deterministic() -> None:
    c = resolve_cluster(load_cluster("a100+7xu280"))
    reqs = poisson_stream(60, 0.8, Uniform(100, 2000), Uniform(10, 600), seed=3)
    a = compute_metrics(simulate(c, reqs, "fcfs", factory=FakeFactory()))
    b = compute_metrics(simulate(c, reqs, "fcfs", factory=FakeFactory()))
    assert a == b


# ------------------------------------------------------------------------------------------------ hand cases
def test_single_request_hybrid_timeline_by_hand() -> None:
    c = resolve_cluster(load_cluster("a100+7xu280"))
    r = Request(0, 0.0, 1536, 512)
    res = simulate(c, [r], factory=FakeFactory())
    rs = res.requests[0]
    gpu, fpga = res.devices[0], res.devices[1]
    llm = c.llm
    prefill = A100_LIKE["prefill_per_token_s"] * 1536
    quant = (llm.kv_bytes(1536, 16) + llm.kv_bytes(1536, 8)) / gpu.model.mem_bw_bytes_per_s
    assert rs.t_prefill_end == pytest.approx(prefill + quant, rel=1e-12)
    glink = gpu.model.link
    sampling = 5.9e-9 * llm.vocab
    assert rs.t_first_token == pytest.approx(
        rs.t_prefill_end + glink.latency_s + llm.vocab * 2 / glink.effective_bw_bytes_per_s + sampling, rel=1e-12
    )
    # the last layer's 4 MiB staging chunks: the first crosses GPU->host, then the (slower) host->FPGA hop sends
    # all of them back to back
    layer = llm.kv_bytes(1536, 8) / llm.layers
    assert layer == 3 * 4 * 2**20  # 1536 tokens x 256 KB / 32 layers: exactly three staging chunks
    chunks = [4 * 2**20] * 3
    flink = fpga.model.link
    tail = (
        glink.latency_s
        + chunks[0] / glink.effective_bw_bytes_per_s
        + sum(flink.latency_s + c / flink.effective_bw_bytes_per_s for c in chunks)
    )
    assert rs.t_kv_ready == pytest.approx(rs.t_prefill_end + tail, rel=1e-9)
    assert rs.decode_dev == fpga.index and rs.path_kind == "host-staged"
    steps = sum(U280_LIKE["decode_base_s"] + U280_LIKE["decode_per_ctx_s"] * ctx for ctx in range(1536, 2047))
    per_token = (
        flink.latency_s * 2
        + llm.vocab * 2 / flink.effective_bw_bytes_per_s
        + sampling
        + 4 / flink.effective_bw_bytes_per_s
    )
    assert rs.t_finish - rs.t_decode_start == pytest.approx(steps + 511 * per_token, rel=1e-9)
    m = compute_metrics(res)
    assert m.decode_tokens_decode_pool == 511 and m.decode_tokens_prefill_pool == 0
    assert m.kv_migrations == {"host-staged": 1}


def test_gpu_only_saturation_throughput_by_hand() -> None:
    """8 GPUs at batch 1, all requests at t=0: 8 requests every (prefill + 511 decode steps)."""
    c = resolve_cluster(load_cluster("8xa100"))
    reqs = poisson_stream(80, math.inf, Fixed(1536), Fixed(512), seed=0)
    m = compute_metrics(simulate(c, reqs, factory=FakeFactory()))
    per_req = A100_LIKE["prefill_per_token_s"] * 1536 + sum(
        A100_LIKE["decode_base_s"] + A100_LIKE["decode_per_ctx_s"] * ctx for ctx in range(1536, 2047)
    )
    assert m.window_s == pytest.approx(10 * per_req, rel=1e-9)
    assert m.throughput_tok_per_s == pytest.approx(80 * 512 / (10 * per_req), rel=1e-9)
    assert all(d.utilization == pytest.approx(1.0) for d in m.devices)


def test_fcfs_prefills_in_arrival_order_and_gpu_takes_overflow() -> None:
    c = resolve_cluster(load_cluster("a100+7xu280"))
    reqs = list(poisson_stream(40, 5.0, Fixed(1536), Fixed(512), seed=1))
    res = simulate(c, reqs, "fcfs", factory=FakeFactory(), record_segments=True)
    starts = [rs.t_prefill_start for rs in sorted(res.requests, key=lambda r: r.arrival_s)]
    assert starts == sorted(starts)
    m = compute_metrics(res)
    assert m.decode_tokens_prefill_pool > 0, "the GPU never decoded although all FPGAs were busy"
    # the GPU decodes only requests it took when every FPGA was busy: while it prefills for an FPGA it is preempted
    gpu = res.devices[0]
    kinds = [k for _, _, k, _ in sorted(gpu.segments)]
    assert "decode" in kinds and kinds.count("prefill") == 40


def test_p2p_never_slower_and_network_slower_than_local() -> None:
    r = [Request(0, 0.0, 2048, 16)]
    exposed = {}
    for kv_path in ("host-staged", "p2p"):
        for two in (False, True):
            nodes = (
                [{"gpus": [{"device": "a100-40gb", "count": 1}]}, {"fpgas": [{"design": "fake-u280", "count": 1}]}]
                if two
                else [{"gpus": [{"device": "a100-40gb", "count": 1}], "fpgas": [{"design": "fake-u280", "count": 1}]}]
            )
            c = cluster_from(nodes, kv_path, "ethernet-100g" if two else None)
            rs = simulate(c, r, factory=FakeFactory()).requests[0]
            exposed[kv_path, two] = rs.t_kv_ready - rs.t_prefill_end
            assert rs.path_kind == ("network-" if two else "") + kv_path
    assert exposed["p2p", False] <= exposed["host-staged", False]
    assert exposed["p2p", True] <= exposed["host-staged", True]
    assert exposed["host-staged", True] > exposed["host-staged", False]


def test_requests_wait_when_fpga_memory_is_short() -> None:
    """FPGA memory for one 3000-token request at a time; no GPU: requests serialize on each card."""
    c = cluster_from([{"fpgas": [{"design": "fake-u280", "count": 1}]}])
    llm = c.llm
    f = FakeFactory(fpga_memory_bytes=GiB + llm.kv_bytes(3000, 8), fpga_weights_bytes=GiB)
    reqs = [Request(i, 0.0, 2000, 800) for i in range(3)]
    res = simulate(c, reqs, factory=f, record_segments=True)
    check_invariants(res, reqs)
    order = sorted(res.requests, key=lambda r: r.t_prefill_start)
    for a, b in zip(order, order[1:]):
        assert b.t_prefill_start >= a.t_finish


def test_request_that_fits_nowhere_is_refused_up_front() -> None:
    c = cluster_from([{"fpgas": [{"design": "fake-u280", "count": 1}]}])
    f = FakeFactory(fpga_memory_bytes=GiB + c.llm.kv_bytes(1000, 8), fpga_weights_bytes=GiB)
    with pytest.raises(HwmodelError, match="request 7 .*fits on no device"):
        simulate(c, [Request(7, 0.0, 900, 200)], factory=f)


def test_gpu_batch_respects_limit_and_helps_throughput() -> None:
    reqs = poisson_stream(60, math.inf, Fixed(512), Fixed(256), seed=0)
    thr = {}
    for b in (1, 4):
        c = cluster_from([{"gpus": [{"device": "a100-40gb", "count": 2, "max_decode_batch": b}]}])
        res = simulate(c, reqs, factory=FakeFactory(), record_segments=True)
        check_invariants(res, list(reqs))
        thr[b] = compute_metrics(res).throughput_tok_per_s
    assert thr[4] > 2.5 * thr[1]


def test_slo_aware_caps_gpu_batch_by_tpot() -> None:
    c = cluster_from([{"gpus": [{"device": "a100-40gb", "count": 1, "max_decode_batch": 8}]}])
    reqs = poisson_stream(16, math.inf, Fixed(256), Fixed(64), seed=0)
    # batched step = b * (1 + 0.05 (B - 1)) + c * sum(ctx): a TPOT SLO just above the batch-2 step allows only 2
    step2 = A100_LIKE["decode_base_s"] * 1.05 + A100_LIKE["decode_per_ctx_s"] * 2 * 400
    res = simulate(
        c, reqs, "slo-aware", slo=Slo(ttft_s=100.0, tpot_s=step2 * 1.01), factory=FakeFactory(), record_segments=True
    )
    check_invariants(res, list(reqs))
    assert max(len(ids) for _, _, k, ids in res.devices[0].segments if k == "decode") == 2
    res_fcfs = simulate(c, reqs, "fcfs", factory=FakeFactory(), record_segments=True)
    assert max(len(ids) for _, _, k, ids in res_fcfs.devices[0].segments if k == "decode") == 8


def test_spf_cuts_mean_ttft_with_mixed_prompts() -> None:
    c = resolve_cluster(load_cluster("a100+7xu280"))
    reqs = poisson_stream(120, 1.0, Uniform(64, 3000), Fixed(128), seed=5)
    ttft = {s: compute_metrics(simulate(c, reqs, s, factory=FakeFactory())).ttft_s.mean for s in ("fcfs", "spf")}
    assert ttft["spf"] < ttft["fcfs"]


def test_two_node_cluster_uses_the_network_and_scales() -> None:
    reqs = poisson_stream(200, math.inf, Fixed(1536), Fixed(512), seed=0)
    one = compute_metrics(simulate(resolve_cluster(load_cluster("a100+7xu280")), reqs, factory=FakeFactory()))
    two = compute_metrics(simulate(resolve_cluster(load_cluster("2x-a100+7xu280")), reqs, factory=FakeFactory()))
    assert 1.9 < two.throughput_tok_per_s / one.throughput_tok_per_s < 2.1
    dis = compute_metrics(simulate(resolve_cluster(load_cluster("a100-node+8xu280-node")), reqs, factory=FakeFactory()))
    assert set(dis.kv_migrations) == {"network-host-staged"}


def test_memory_aware_backfills_where_fcfs_blocks() -> None:
    """GPU memory for 5000 tokens of KV: FCFS holds three short requests behind a long one that does not fit yet;
    memory-aware lets them through."""
    c = cluster_from([{"gpus": [{"device": "a100-40gb", "count": 1, "max_decode_batch": 4}]}])
    llm = c.llm
    reqs = [Request(0, 0.0, 2500, 500), Request(1, 0.01, 2500, 500)] + [Request(i, 0.02, 200, 100) for i in range(2, 5)]
    ttft = {}
    for sched in ("fcfs", "memory-aware"):
        f = FakeFactory(gpu_memory_bytes=params_of(llm).total * 2 + llm.kv_bytes(5000, 16))
        res = simulate(c, reqs, sched, factory=f, record_segments=True)
        check_invariants(res, reqs)
        ttft[sched] = {rs.id: rs.t_first_token - rs.arrival_s for rs in res.requests}
    for i in (2, 3, 4):
        assert ttft["memory-aware"][i] < ttft["fcfs"][i] / 5
    assert ttft["memory-aware"][1] >= ttft["fcfs"][1]  # the long one pays for it


def test_padded_gpu_batch_reserves_longest() -> None:
    c = cluster_from([{"gpus": [{"device": "a100-40gb", "count": 1, "max_decode_batch": 4}]}])
    reqs = [Request(0, 0.0, 1000, 1001), Request(1, 0.0, 10, 11)]
    for padded, expect in ((False, 2000 + 20), (True, 2 * 2000)):
        res = simulate(c, reqs, factory=FakeFactory(gpu_padded=padded), record_segments=True)
        g = res.devices[0]
        assert g.mem_peak - g.model.weights_bytes == c.llm.kv_bytes(expect, 16)
        check_invariants(res, reqs)


class _RealGpuFakeFpga(FakeFactory):
    """The project's calibrated GPU model with a stand-in FPGA (to compare migrations with interconnect.pcie)."""

    def gpu(self, group: Any, spec: Any, llm: Any, link: Any) -> Any:
        from hwmodel.serving.devices import EngineFactory

        return EngineFactory(cache=False).build(group, llm, library(), "test", "gpu")


@pytest.mark.parametrize("kv_path, pcie_path", [("host-staged", "host"), ("p2p", "p2p")])
@pytest.mark.parametrize("prompt", [64, 1536, 4000])
def test_uncontended_migration_matches_interconnect_pcie(kv_path: str, pcie_path: str, prompt: int) -> None:
    """One request alone: the simulator's layer-by-layer migration exposes what interconnect.pcie.kv_migration
    computes for the same GPU engine, board link, path and KV precision."""
    from interconnect.pcie import kv_migration

    c = cluster_from(
        [{"gpus": [{"device": "a100-40gb", "count": 1}], "fpgas": [{"design": "fake-u280", "count": 1}]}], kv_path
    )
    res = simulate(c, [Request(0, 0.0, prompt, 2)], factory=_RealGpuFakeFpga())
    rs = res.requests[0]
    ref = kv_migration(res.devices[0].model.engine, "u280", prompt, pcie_path, kv_bits=8)
    assert rs.t_prefill_end == pytest.approx(ref.prefill_s, rel=1e-12)
    assert rs.t_kv_ready - rs.t_prefill_end == pytest.approx(ref.exposed_s, rel=1e-9, abs=1e-12)


def test_slo_aware_never_starves_a_lone_request() -> None:
    """A TPOT SLO no GPU step can meet still lets each GPU decode one request at a time."""
    c = cluster_from([{"gpus": [{"device": "a100-40gb", "count": 1, "max_decode_batch": 4}]}])
    reqs = poisson_stream(6, math.inf, Fixed(100), Fixed(20), seed=0)
    res = simulate(c, reqs, "slo-aware", slo=Slo(ttft_s=1.0, tpot_s=1e-6), factory=FakeFactory(), record_segments=True)
    check_invariants(res, list(reqs))
    assert max(len(ids) for _, _, k, ids in res.devices[0].segments if k == "decode") == 1
