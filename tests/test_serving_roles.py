"""Roles and capabilities in system B: any engine with the capabilities a role needs takes it, a device without
one is refused at load with the capability, the role and the device named; schedulers and device families are
one file each."""

from __future__ import annotations

import math
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hwmodel.engine import Capability, MissingCapabilityError, Phase
from hwmodel.serving.devices import DecodeTable, DeviceModel
from hwmodel.serving.schedulers import REGISTRY, Slo, load_scheduler_file, make_scheduler
from hwmodel.serving.simulator import simulate
from hwmodel.specs import library
from hwmodel.workload.requests import Fixed, Request, poisson_stream
from tests.test_serving_fakes import A100_LIKE, AffineEngine, FakeFactory
from tests.test_serving_sim import check_invariants, cluster_from

ROOT = Path(__file__).resolve().parents[1]


class DecodeOnly:
    """An engine that can only decode (no prefill): fine in a decode pool beside a prefill pool, refused in a
    prefill pool or in a cluster without one."""

    CAPABILITIES = frozenset({Capability.DECODER, Capability.POWERED})

    def __init__(self, name: str) -> None:
        self.name = name
        self.inner = AffineEngine(name, **A100_LIKE)

    def decode_s(self, ctx: int) -> float:
        return self.inner.decode_s(ctx)

    def decode_steps_s(self, ctx0: int, n_steps: int) -> np.ndarray:
        return self.inner.decode_steps_s(ctx0, n_steps)

    def power_w(self, phase: Phase) -> float:
        return self.inner.power_w(phase)


class DecodeOnlyFactory(FakeFactory):
    def fpga(self, group, llm, lib, where, field):  # type: ignore[no-untyped-def]
        m = super().fpga(group, llm, lib, where, field)
        return DeviceModel(
            label=m.label,
            engine=DecodeOnly(m.label),
            llm=llm,
            memory_bytes=m.memory_bytes,
            weights_bytes=m.weights_bytes,
            kv_bits=m.kv_bits,
            link=m.link,
            price_usd=m.price_usd,
            host_sampled=True,
        )


def test_decode_only_engine_takes_a_decode_pool() -> None:
    c = cluster_from([{"gpus": [{"device": "a100-40gb", "count": 1}], "fpgas": [{"design": "fake-u280", "count": 2}]}])
    reqs = [Request(i, 0.1 * i, 100, 20) for i in range(6)]
    res = simulate(c, reqs, factory=DecodeOnlyFactory(), record_segments=True)
    check_invariants(res, reqs)
    assert sum(r.steps_decode_pool for r in res.requests) > 0


def test_missing_capability_is_refused_with_role_and_device() -> None:
    c = cluster_from([{"fpgas": [{"design": "fake-u280", "count": 2}]}])  # no prefill pool: decoders prefill
    with pytest.raises(
        MissingCapabilityError,
        match=r"nodes\[0\]\.decode\[0\] \(fake-u280\).*role 'decode pool' "
        r"needs capability 'prefiller'",
    ):
        simulate(c, [Request(0, 0.0, 8, 2)], factory=DecodeOnlyFactory())


def test_batching_needs_the_batch_decoder_capability() -> None:
    class NoBatch(AffineEngine):
        CAPABILITIES = frozenset({Capability.DECODER, Capability.PREFILLER, Capability.POWERED})

    lib = library()
    with pytest.raises(Exception, match="batch-decoder"):
        DeviceModel(
            label="x",
            engine=NoBatch("x", **A100_LIKE),
            llm=lib.llm("llama2-7b"),
            memory_bytes=80 * 2**30,
            weights_bytes=2**30,
            kv_bits=16,
            link=lib.link("pcie-gen4-x16"),
            price_usd=1.0,
            max_decode_batch=4,
        )


def test_no_device_kind_branch_in_serving() -> None:
    out = subprocess.run(
        ["grep", "-rnE", r"draft_on|kind ==|isinstance\(.*Engine|hasattr\(", "hwmodel/serving"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert out.stdout == "", out.stdout


def test_scheduler_from_a_temporary_file(tmp_path: Path) -> None:
    f = tmp_path / "longest_output_first.py"
    f.write_text("""
from hwmodel.serving.schedulers import Scheduler, register_scheduler


@register_scheduler
class LongestOutputFirst(Scheduler):
    name = "test-lof"
    summary = "longest output first (a test scheduler)"
    strict = False

    def key(self, rs):
        return (-rs.output_tokens, rs.arrival_s, rs.id)
""")
    assert load_scheduler_file(f) == ["test-lof"]
    try:
        c = cluster_from(
            [{"gpus": [{"device": "a100-40gb", "count": 1}], "fpgas": [{"design": "fake-u280", "count": 1}]}]
        )
        reqs = [Request(0, 0.0, 64, 4)] + [Request(i, 0.001, 64, 4 + 10 * i) for i in range(1, 5)]
        res = simulate(c, reqs, make_scheduler("test-lof", Slo()), factory=FakeFactory(), record_segments=True)
        check_invariants(res, reqs)
        later = sorted(res.requests[1:], key=lambda r: r.t_prefill_start)
        assert [r.id for r in later] == [4, 3, 2, 1]  # the longest outputs went first
    finally:
        REGISTRY.unregister("test-lof")


def test_bad_scheduler_file_is_one_line(tmp_path: Path) -> None:
    from hwmodel.errors import HwmodelError

    f = tmp_path / "empty.py"
    f.write_text("x = 1\n")
    with pytest.raises(HwmodelError, match="defines no scheduler"):
        load_scheduler_file(f)


def test_grid_table_interpolates_within_its_bound() -> None:
    """The 'grid' decode table interpolates between grid contexts: exact on them, and within the change of the
    step time over one interval between them (here a smooth, non-linear law)."""
    f = lambda c: 0.02 + 1e-6 * c + 3e-11 * c * c  # noqa: E731
    t = DecodeTable(f, "grid", 4095)
    for c in range(0, 4000, 37):
        g = (c // 32) * 32
        assert abs(t.step_s(c) - f(c)) <= abs(f(g + 32) - f(g)) + 1e-15
    assert t.step_s(64) == f(64)
    assert t.calls <= 4096 // 32 + 2


def test_streaming_design_in_a_decode_pool() -> None:
    """The streaming U280 design decodes in system B (real engine, a few short requests)."""
    from hwmodel.serving.cluster import load_cluster, resolve_cluster
    from hwmodel.serving.devices import EngineFactory

    c = resolve_cluster(load_cluster("a100+7xu280-streaming"))
    reqs = [Request(i, 0.0, 40, 3) for i in range(3)]
    res = simulate(c, reqs, factory=EngineFactory(cache=False), record_segments=True)
    check_invariants(res, reqs)
    dec = [d for d in res.devices if d.role == "decode"]
    assert dec[0].model.label == "glitches-u280-streaming" and sum(r.steps_decode_pool for r in res.requests) == 6


def test_decode_tables_cached_on_disk(tmp_path: Path) -> None:
    """A second factory reads the decode table the first one saved: same values, no engine calls."""
    from hwmodel.serving.cluster import load_cluster, resolve_cluster
    from hwmodel.serving.devices import EngineFactory

    c = resolve_cluster(load_cluster("a100+7xu280"))
    reqs = poisson_stream(6, math.inf, Fixed(64), Fixed(40), 0)
    f1 = EngineFactory(cache=tmp_path)
    r1 = simulate(c, reqs, factory=f1)
    f1.save()
    assert list(tmp_path.glob("decode-*.npz"))
    f2 = EngineFactory(cache=tmp_path)
    r2 = simulate(c, reqs, factory=f2)
    assert r1.end_s == r2.end_s
    fpga = [m for m in f2.models() if m.label == "glitches-u280"][0]
    assert fpga.table.calls == 0
