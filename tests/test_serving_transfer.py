"""KV migration paths and link calendars: first-fit booking, no double use of a link, pipelining by layer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodel.serving.transfer import LinkCalendar, Path, build_path, migrate
from hwmodel.specs import library
from interconnect.pcie import Hop


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.sets(st.sampled_from("abc"), min_size=1), st.floats(0, 100), st.floats(0.01, 10)),
        min_size=1,
        max_size=40,
    )
)
def test_calendar_books_disjoint_first_fit(bookings: list[tuple[set[str], float, float]]) -> None:
    cal = LinkCalendar()
    for keys, ready, dur in bookings:
        keys_t = tuple(sorted(keys))
        t = cal.book(keys_t, ready, dur)
        assert t >= ready
        for k in keys_t:
            iv = cal.intervals(k)
            assert (t, t + dur) in iv
            for (_s0, e0), (s1, _e1) in zip(iv, iv[1:]):
                assert e0 <= s1, f"link {k} double-booked"
        # first fit: no earlier start in [ready, t) would have been free on every key
        candidates = [ready] + [e for k in keys_t for _s, e in cal.intervals(k) if ready <= e < t]
        for c in candidates:
            if c >= t:
                continue
            clash = any(s < c + dur and c < e for k in keys_t for s, e in cal.intervals(k) if (s, e) != (t, t + dur))
            assert clash, f"start {c} was free but {t} was booked"


def test_prune_keeps_future() -> None:
    cal = LinkCalendar()
    for i in range(5):
        cal.book(("a",), float(i * 2), 1.0)
    cal.prune(4.5)
    assert cal.intervals("a") == [(4.0, 5.0), (6.0, 7.0), (8.0, 9.0)]


def test_layer_pipelined_migration_hides_behind_prefill() -> None:
    """Chunks ready every 10 ms, 1 ms per stage: only the last chunk's two stages are exposed."""
    path = Path("host-staged", (Hop(1e9, 0.0, ("up", 0)), Hop(1e9, 0.0, ("down", 1))))
    m = migrate(LinkCalendar(), path, 32 * 10**6, [0.01 * (i + 1) for i in range(32)])
    assert m.kv_ready_s == pytest.approx(0.32 + 0.002)
    assert m.link_busy_s == pytest.approx(0.064) and m.dst_busy_s == pytest.approx(0.032)


def test_migration_limited_by_link_when_prefill_is_fast() -> None:
    path = Path("p2p", (Hop(1e9, 0.0, ("up", 0)),))
    m = migrate(LinkCalendar(), path, 10**9, [1e-6 * (i + 1) for i in range(10)])
    assert m.kv_ready_s == pytest.approx(1.0 + 1e-6, rel=1e-6)


def test_two_migrations_share_a_link_chunk_by_chunk() -> None:
    cal = LinkCalendar()
    path = Path("p2p", (Hop(1e9, 0.0, ("net",)),))
    ready = [0.01 * (i + 1) for i in range(10)]
    a = migrate(cal, path, 10 * 4 * 10**6, ready)  # 4 ms per 10 ms chunk
    b = migrate(cal, path, 10 * 4 * 10**6, ready)
    assert a.kv_ready_s == pytest.approx(0.104)
    assert b.kv_ready_s == pytest.approx(0.108)  # interleaved: not queued behind the whole of a


def test_build_path_kinds() -> None:
    lib = library()
    g3, g4, eth = lib.link("pcie-gen3-x16"), lib.link("pcie-gen4-x16"), lib.link("ethernet-100g")
    kw = dict(src=0, dst=1, src_link=g4, dst_link=g3, network=eth)
    hs = build_path("host-staged", src_node=0, dst_node=0, **kw)
    assert hs.kind == "host-staged" and [s.bw_bytes_per_s for s in hs.stages] == [
        g4.effective_bw_bytes_per_s,
        g3.effective_bw_bytes_per_s,
    ]
    p2p = build_path("p2p", src_node=0, dst_node=0, **kw)
    assert p2p.kind == "p2p" and p2p.stages[0].bw_bytes_per_s == g3.effective_bw_bytes_per_s
    assert set(p2p.stages[0].keys) == {("up", 0), ("down", 1)}
    net = build_path("host-staged", src_node=0, dst_node=1, **kw)
    assert net.kind == "network-host-staged" and len(net.stages) == 3
    assert net.stages[1].keys == (("nic-tx", 0), ("nic-rx", 1))
    assert build_path("p2p", src_node=0, dst_node=1, **kw).kind == "network-p2p"
    for n in (1e3, 1e7):
        assert p2p.uncontended_s(n) <= hs.uncontended_s(n) < net.uncontended_s(n)


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted intervals with those that touch (to float rounding) joined."""
    out: list[list[float]] = []
    for s, e in intervals:
        if out and s <= out[-1][1] * (1 + 1e-12) + 1e-15:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


@settings(max_examples=100)
@given(
    kind=st.sampled_from(["host-staged", "p2p", "network-host-staged", "network-p2p"]),
    kv_mb=st.floats(0.001, 600),
    layers=st.integers(1, 32),
    per_layer_s=st.floats(0, 0.02),
    host_done_s=st.floats(0, 0.5),
    busy_until_s=st.floats(0, 0.3),
)
def test_fast_fifo_equals_calendar_search(
    kind: str, kv_mb: float, layers: int, per_layer_s: float, host_done_s: float, busy_until_s: float
) -> None:
    """The uncontended fast path books what the general first-fit search books (up to float rounding: it shifts
    one layer's chunk pattern instead of summing the stage times again)."""
    lib = library()
    g4, g3, eth = lib.link("pcie-gen4-x16"), lib.link("pcie-gen3-x16"), lib.link("ethernet-100g")
    p2p = kind.endswith("p2p")
    path = build_path(
        "p2p" if p2p else "host-staged",
        src=0,
        dst=1,
        src_node=0,
        dst_node=1 if kind.startswith("network") else 0,
        src_link=g4,
        dst_link=g3,
        network=eth,
    )
    ready = [busy_until_s + per_layer_s * (i + 1) for i in range(layers)]
    cals = [LinkCalendar(), LinkCalendar()]
    for cal in cals:  # an earlier transfer on the GPU's link, finished before this one's first chunk is ready
        cal.book((("up", 0),), 0.0, busy_until_s)
    a = migrate(cals[0], path, kv_mb * 1e6, ready, host_free_s=host_done_s)
    b = migrate(cals[1], path, kv_mb * 1e6, ready, host_free_s=host_done_s, force_calendar=True)
    assert a.kv_ready_s == pytest.approx(b.kv_ready_s, rel=1e-12)
    assert (a.link_busy_s, a.dst_busy_s) == (b.link_busy_s, b.dst_busy_s)
    for key in (("up", 0), ("down", 1), ("nic-tx", 0), ("nic-rx", 1)):  # the same busy time (the fast path books
        ia, ib = _union(cals[0].intervals(key)), _union(cals[1].intervals(key))  # back-to-back chunks as one)
        assert len(ia) == len(ib)
        for (s0, e0), (s1, e1) in zip(ia, ib):
            assert s0 == pytest.approx(s1, rel=1e-12, abs=1e-15) and e0 == pytest.approx(e1, rel=1e-12, abs=1e-15)


def test_host_started_stage_waits_for_the_host() -> None:
    path = Path("host-staged", (Hop(1e9, 0.0, ("up", 0)), Hop(1e9, 0.0, ("down", 1))), (False, True))
    m = migrate(LinkCalendar(), path, 4 * 10**6, [0.001 * (i + 1) for i in range(4)], host_free_s=0.5)
    assert m.kv_ready_s == pytest.approx(0.5 + 0.004)  # all four 1 ms hop-2 DMAs wait for the host
