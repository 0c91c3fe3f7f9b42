"""Link timing, two-hop host-staged pipelining, peer-to-peer, and KV migration overlapped with prefill."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from gpu.latency import GpuEngine
from hwmodel.cli import main
from hwmodel.errors import HwmodelError
from hwmodel.specs import library
from interconnect.pcie import (
    host_staged_path,
    host_staged_s,
    kv_migration,
    p2p_s,
    path_between,
    transfer_s,
)

LIB = library()
GEN3, GEN4 = LIB.link("pcie-gen3-x16"), LIB.link("pcie-gen4-x16")


def test_one_dma_is_latency_plus_bytes_over_bandwidth() -> None:
    assert transfer_s(0, GEN3) == 0.0
    assert transfer_s(12e6, GEN3) == pytest.approx(GEN3.latency_s + 12e6 / GEN3.effective_bw_bytes_per_s)
    with pytest.raises(HwmodelError, match="transfer size"):
        transfer_s(-1, GEN3)


def test_p2p_holds_both_ports() -> None:
    assert p2p_s(1e8, GEN4, GEN3) == pytest.approx(max(GEN4.latency_s, GEN3.latency_s) + 1e8 / 12e9)


@given(n=st.floats(1.0, 2e9), chunk=st.floats(4096.0, 64e6))
def test_host_staged_pipelining_bounds(n: float, chunk: float) -> None:
    """At least the slower hop alone, at most both hops one after the other (no overlap) plus chunk latencies."""
    t = host_staged_s(n, GEN4, GEN3, chunk)
    slow = n / min(GEN3.effective_bw_bytes_per_s, GEN4.effective_bw_bytes_per_s)
    chunks = -(-n // chunk)
    assert t >= slow + GEN3.latency_s - 1e-12
    assert (
        t
        <= n / GEN4.effective_bw_bytes_per_s
        + n / GEN3.effective_bw_bytes_per_s
        + chunks * (GEN3.latency_s + GEN4.latency_s)
        + 1e-12
    )


def test_host_staged_overlaps_the_hops() -> None:
    n = 400e6
    serial = transfer_s(n, GEN4) + transfer_s(n, GEN3)
    piped = host_staged_s(n, GEN4, GEN3)
    assert piped < 0.75 * serial
    # one chunk: store and forward, nothing overlaps
    assert host_staged_s(n, GEN4, GEN3, chunk_bytes=n) == pytest.approx(serial)


@given(a=st.floats(0.0, 1e9), b=st.floats(0.0, 1e9))
def test_more_bytes_never_faster(a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    for kind in ("direct", "host", "p2p"):
        route = path_between(kind, GEN4, GEN3)
        assert route.time_s(hi) >= route.time_s(lo)


def test_schedule_respects_ready_times_and_order() -> None:
    route = host_staged_path(GEN4, GEN3)
    done = route.schedule([(0.0, 8e6), (0.5, 8e6), (0.5, 0.0)])
    assert done[0] < 0.5 < done[1] and done[2] == done[1]
    assert route.schedule([(0.0, 8e6)], host_free_s=1.0)[0] > 1.0  # hop 2 waits for the host


def test_unknown_path_is_a_clear_error() -> None:
    with pytest.raises(HwmodelError, match="valid choices: direct, host, p2p"):
        path_between("carrier-pigeon", GEN4, GEN3)


# ------------------------------------------------------------------------------------------------ KV migration
@pytest.fixture(scope="module")
def a100_hf() -> GpuEngine:
    return GpuEngine("a100-40gb", "llama2-7b", "hf")


def test_long_prompt_migration_is_mostly_hidden(a100_hf: GpuEngine) -> None:
    m = kv_migration(a100_hf, "u280", 1536, path="host")
    assert m.kv_bytes == 1536 * 32 * 2 * 4096  # int8 K and V of every layer
    assert m.transfer_s > 0.1 * m.prefill_s  # a real amount of data ...
    assert m.hidden_fraction >= 0.9  # ... almost all of it behind the prefill
    assert 0 < m.exposed_s < 0.01 * m.prefill_s


def test_short_prompt_migration_is_exposed(a100_hf: GpuEngine) -> None:
    """HF prefill of 64 tokens is host-bound: the host thread that would drive the staging is busy issuing kernels
    until the prefill is almost over, so most of the transfer comes after it."""
    m = kv_migration(a100_hf, "u280", 64, path="host")
    assert m.hidden_fraction < 0.5
    assert m.exposed_s > 0.5 * m.transfer_s
    # a thread of its own for the staging, or a peer-to-peer DMA, hides it again
    assert kv_migration(a100_hf, "u280", 64, path="host", host_thread="dedicated").hidden_fraction >= 0.9
    assert kv_migration(a100_hf, "u280", 64, path="p2p").hidden_fraction >= 0.9


@pytest.mark.parametrize("prompt", [1, 16, 64, 300, 1536, 3000])
@pytest.mark.parametrize("path", ["host", "p2p"])
def test_exposure_is_bounded(a100_hf: GpuEngine, prompt: int, path: str) -> None:
    m = kv_migration(a100_hf, "u280", prompt, path=path)
    assert 0.0 <= m.exposed_s <= m.transfer_s + 1e-12
    assert m.total_s == pytest.approx(m.prefill_s + m.exposed_s)
    assert m.prefill_s >= a100_hf.prefill_s(prompt)  # quantization kernels only add GPU time


def test_quantization_shrinks_the_bytes(a100_hf: GpuEngine) -> None:
    m16 = kv_migration(a100_hf, "u280", 512, kv_bits=16)
    m8 = kv_migration(a100_hf, "u280", 512, kv_bits=8)
    m4 = kv_migration(a100_hf, "u280", 512, kv_bits=4)
    assert m16.kv_bytes == 2 * m8.kv_bytes == 4 * m4.kv_bytes
    assert m4.transfer_s < m8.transfer_s < m16.transfer_s
    with pytest.raises(HwmodelError, match="migrated KV bits"):
        kv_migration(a100_hf, "u280", 512, kv_bits=3)


def test_faster_fpga_link_never_exposes_more(a100_hf: GpuEngine) -> None:
    for prompt in (64, 1536):
        gen3 = kv_migration(a100_hf, "u280", prompt, dst_link=GEN3)
        gen5 = kv_migration(a100_hf, "u280", prompt, dst_link=LIB.link("pcie-gen5-x16"))
        assert gen5.exposed_s <= gen3.exposed_s
        assert gen5.transfer_s <= gen3.transfer_s


def _migrate_json(prompt: int, *extra: str) -> dict:
    r = CliRunner().invoke(
        main,
        [
            "migrate",
            "--llm",
            "llama2-7b",
            "--prompt",
            str(prompt),
            "--gpu",
            "a100-40gb",
            "--fpga",
            "u280",
            *extra,
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def test_migrate_cli_hidden_long_exposed_short() -> None:
    long, short = _migrate_json(1536), _migrate_json(64)
    for d in (long, short):
        assert {"prefill_s", "transfer_s", "exposed_s", "hidden_fraction"} <= set(d)
    assert long["hidden_fraction"] >= 0.9 and short["hidden_fraction"] < 0.5
    assert _migrate_json(64, "--path", "p2p")["hidden_fraction"] >= 0.9
    table = CliRunner().invoke(
        main, ["migrate", "--llm", "llama2-7b", "--prompt", "1536", "--gpu", "a100-40gb", "--fpga", "u280"]
    )
    assert "mostly hidden" in table.output and "exposed after the prefill" in table.output


def test_link_transfer_cli() -> None:
    r = CliRunner().invoke(main, ["link", "transfer", "--bytes", "12MB", "--link", "pcie-gen3-x16", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["time_s"] == pytest.approx(transfer_s(12e6, GEN3))
    r = CliRunner().invoke(
        main,
        ["link", "transfer", "--bytes", "1GiB", "--path", "host", "--gpu", "a100-40gb", "--fpga", "u280", "--json"],
    )
    assert json.loads(r.stdout)["time_s"] == pytest.approx(host_staged_s(2**30, GEN4, GEN3))
    bad = CliRunner().invoke(main, ["link", "transfer", "--bytes", "12 parsecs", "--link", "pcie-gen3-x16"])
    assert bad.exit_code == 2 and "expected a size like" in bad.output
    missing = CliRunner().invoke(main, ["link", "transfer", "--bytes", "1MB", "--path", "host"])
    assert missing.exit_code == 2 and "needs --gpu and --fpga" in missing.output and "Traceback" not in missing.output


def _schedule_reference(route, items, chunk, host_free):  # chunk by chunk, hop by hop
    import math

    free = [0.0] * len(route.hops)
    done = []
    for ready, b in items:
        pieces = [b] if len(route.hops) == 1 else [min(chunk, b - k * chunk) for k in range(math.ceil(b / chunk))]
        for piece in pieces:
            t = ready
            for h, hop in enumerate(route.hops):
                start = max(t, free[h], host_free if (h > 0 and route.needs_host) else 0.0)
                t = start + hop.time_s(piece)
                free[h] = t
        done.append(free[-1])
    return done


@given(
    items=st.lists(st.tuples(st.floats(0.0, 1e-2), st.floats(1.0, 5e7)), min_size=1, max_size=6),
    chunk=st.floats(1e5, 2e7),
    host=st.floats(0.0, 2e-2),
    kind=st.sampled_from(["host", "p2p", "direct"]),
)
def test_schedule_scan_equals_chunk_by_chunk(items: list, chunk: float, host: float, kind: str) -> None:
    route = path_between(kind, GEN4, GEN3)
    fast = route.schedule(items, chunk, host_free_s=host)
    ref = _schedule_reference(route, items, chunk, host)
    assert fast == pytest.approx(ref, rel=1e-9, abs=1e-15)
