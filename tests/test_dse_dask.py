"""The Dask runner on a LocalCluster (2 worker processes) gives exactly the local runner's results."""

from __future__ import annotations

from pathlib import Path

import pytest

from hwmodel.dse import load_plan, read_report, run_sweep, write_report
from hwmodel.dse.runner import open_store
from hwmodel.dse.store import rows_equal
from hwmodel.errors import HwmodelError
from tests.test_dse_support import spec_file

GRID = "lanes = [8, 16, 32, 64]\nports = [4, 8, 16, 32]\nclock_mhz = [200, 300, 400]\nbits = [4, 8]\n"


def test_dask_local_cluster_matches_local_runner(tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    spec = spec_file(tmp_path, GRID, "lut_util = { max = 0.3 }\n")
    plan = load_plan(spec)
    local = run_sweep(plan, tmp_path / "local", workers=2, progress=False)
    assert local.remaining == 0
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=40
    ) as cluster:
        # half the points first, then resume on the cluster by its address (what --scheduler does)
        half = load_plan(
            spec_file(tmp_path, GRID.replace("[4, 8]", "[4]"), "lut_util = { max = 0.3 }\n", name="half.toml")
        )
        with distributed.Client(cluster) as client:
            first = run_sweep(half, tmp_path / "dask", client=client, chunk_size=4, progress=False)
        assert first.backend == "dask" and first.workers == 2 and first.remaining == 0
        rest = run_sweep(plan, tmp_path / "dask", scheduler=cluster.scheduler_address, chunk_size=4, progress=False)
    assert rest.already_done == first.evaluated + first.screened and rest.remaining == 0
    a = open_store(plan, tmp_path / "local").read()
    b = open_store(plan, tmp_path / "dask").read()
    assert rows_equal(a, b)
    for out in ("local", "dask"):
        write_report(read_report(plan, tmp_path / out), tmp_path / out)
    assert (tmp_path / "local" / "points.csv").read_text() == (tmp_path / "dask" / "points.csv").read_text()


def test_unreachable_scheduler_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("hwmodel.dse.runner.DASK_CONNECT_TIMEOUT_S", 1.0)
    plan = load_plan(spec_file(tmp_path, "lanes = [8]\nports = [4]\nclock_mhz = [300]\n"))
    with pytest.raises(HwmodelError, match="cannot reach the Dask scheduler at tcp://127.0.0.1:1"):
        run_sweep(plan, tmp_path / "o", scheduler="tcp://127.0.0.1:1", progress=False)
