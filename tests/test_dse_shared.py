"""The streaming-decode evaluator's shared path (hwmodel/dse/streaming_shared.py) writes the same rows, byte for
byte, as the reference path that builds every point from scratch -- valid points at several clocks and both clock
policies, points whose design cannot hold the context, and a design that deadlocks."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("fpga.streaming.engine")

from hwmodel.dse import load_plan, run_sweep  # noqa: E402
from hwmodel.dse.streaming_eval import clear_caches  # noqa: E402
from hwmodel.dse.worker import collector_paused, collector_running  # noqa: E402

DESIGNS = Path(__file__).resolve().parent.parent / "fpga" / "designs"


def _deadlocking_design(tmp_path: Path) -> Path:
    """draft-u280 with the down projection and the final norm on one temporal engine and the residual add between
    them on another, FIFOs of one block (tests/test_streaming.py: it deadlocks)."""
    src = (DESIGNS / "draft-u280.toml").read_text()
    for old, new in (
        ('"down", "lm_head"]', '"down", "lm_head", "final_norm"]'),
        ('ops = ["attn_norm", "ffn_norm", "final_norm"]', 'ops = ["attn_norm", "ffn_norm"]'),
        ('ops = ["rope", "attn_add", "silu_mul", "ffn_add"]', 'ops = ["rope", "attn_add", "silu_mul"]'),
        ('ops = ["argmax"]', 'ops = ["argmax", "ffn_add"]'),
    ):
        assert old in src
        src = src.replace(old, new)
    path = tmp_path / "deadlocks.toml"
    path.write_text(src.replace('name = "draft-u280"', 'name = "deadlocks"'))
    return path


def _rows(path: Path) -> dict[str, list[str]]:
    with open(path, newline="") as fh:
        return {r[0]: r for r in csv.reader(fh)}


def test_shared_path_writes_the_reference_rows(tmp_path: Path) -> None:
    bad = _deadlocking_design(tmp_path)
    params = f"""
design = ["draft-u280", "{bad}"]
ctx = [0, 40]
max_ctx = [32, 4096]
fifo_depth = [1, 8]
clock_policy = ["constrain", "clamp"]
clock_mhz = [200.0, 450.0]

[parameters.linear]
ports = [16, 28]
"""
    rows = {}
    for name, ref in (("shared", "streaming-decode"), ("reference", "hwmodel.dse.streaming_eval:REFERENCE_EVALUATOR")):
        spec = tmp_path / f"{name}.toml"
        spec.write_text(
            f'[sweep]\nname = "{name}"\nevaluator = "{ref}"\n\n[parameters]{params}\n[objectives]\nlatency_s = "min"\n'
        )
        clear_caches()
        stats = run_sweep(load_plan(spec), tmp_path / name, workers=1, progress=False)
        assert stats.remaining == 0
        rows[name] = _rows(tmp_path / name / "results.csv")
    assert rows["shared"] == rows["reference"]
    status = [r[1] for r in rows["shared"].values()]
    messages = " ".join(r[-1] for r in rows["shared"].values())
    assert status.count("ok") > 0 and "exceeds its KV-cache reservation" in messages and "deadlocks" in messages


def test_collector_paused_for_a_chunk_and_running_for_the_reference() -> None:
    import gc

    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_running():
            assert gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()


def test_chunks_keep_the_clocks_of_a_design_together() -> None:
    from hwmodel.dse.runner import auto_chunk_size, chunks_of, shared_run
    from hwmodel.dse.spec import Point

    grid = [(d, c) for d in ("a", "b") for c in (200.0, 250.0, 300.0)]
    pts = [Point(i, f"{d}-{c}", {"design": d, "clock_mhz": c}) for i, (d, c) in enumerate(grid)]
    assert shared_run(pts, ("clock_mhz",)) == 3 and shared_run(pts, ()) == 1
    for n, workers, run in ((864, 2, 9), (100, 2, 9), (10_000, 2, 9), (50, 2, 7)):
        size = auto_chunk_size(n, workers, run)
        assert size % run == 0 and size <= 64
    assert auto_chunk_size(10_000, 2, 100) == 64  # a run longer than a chunk: the plain size
    many = [Point(i, str(i), {}) for i in range(864)]
    sizes = [len(c) for c in chunks_of(many, 27, taper=4, run=9)]
    assert sum(sizes) == 864 and all(s % 9 == 0 for s in sizes)  # no design's clocks split, every point once
    assert sizes[0] == 27 and sizes[-4:] == [9] * 4  # the last chunks in flight are one design each
    assert [p for c in chunks_of(many, 27, taper=4, run=9) for p, _ in c] == [p.id for p in many]


def test_points_of_one_affinity_key_share_a_chunk() -> None:
    """Designs differing only in the attention engine's fields (whose programs share every part but attention)
    are put together, each group in plan order, and no chunk boundary splits a group."""
    from hwmodel.dse.evaluators import resolve
    from hwmodel.dse.runner import auto_chunk_size, chunks_of, with_affinity
    from hwmodel.dse.spec import Point

    ev = resolve("streaming-decode")
    grid = [(ap, lanes, c) for ap in (2, 4) for lanes in (1024, 2048) for c in (200.0, 300.0)]
    pts = [
        Point(i, f"p{i}", {"design": "draft-u280", "attn.ports": ap, "linear.lanes": lanes, "clock_mhz": c})
        for i, (ap, lanes, c) in enumerate(grid)
    ]
    ordered, run = with_affinity(pts, ev)
    assert sorted(p.id for p in ordered) == sorted(p.id for p in pts) and run == 4
    assert [p.params["linear.lanes"] for p in ordered] == [1024] * 4 + [2048] * 4
    assert [(p.params["attn.ports"], p.params["clock_mhz"]) for p in ordered[:4]] == [
        (2, 200),
        (2, 300),
        (4, 200),
        (4, 300),
    ]
    chunks = list(chunks_of(ordered, auto_chunk_size(len(ordered), 2, run), taper=4, run=run))
    assert all(len(c) % run == 0 for c in chunks)
    plain = dataclasses.replace(ev, affinity=None)
    assert with_affinity(pts, plain) == (pts, 2)  # no key: the plan's order and its clock runs
