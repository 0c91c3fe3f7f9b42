"""Output writers under faults (issue #31): CSV tables, JSON reports, Perfetto traces, VCD waveforms and the
engine-table cache are written whole or not at all. A full disk leaves the previous file (or none) and no
temporary file, with one clear error; a SIGKILL mid-write never leaves a short file under the real name; two
writers of one file leave one whole version."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import hwmodel.io
from hwmodel.report.perfetto import Slice, write_chrome_trace
from hwmodel.report.tables import read_csv, write_csv
from hwmodel.serving.report import write_json

ROOT = Path(__file__).resolve().parents[2]
ROWS = [{"a": i, "b": i * 0.5, "c": f"row {i}"} for i in range(2000)]


def _csv(path: Path) -> None:
    write_csv(path, ROWS, ["a", "b", "c"])


def _json(path: Path) -> None:
    write_json(path, {"rows": ROWS})


def _perfetto(path: Path) -> None:
    write_chrome_trace(path, {"dev": [Slice(i * 1e-3, i * 1e-3 + 5e-4, f"op{i}") for i in range(1000)]})


def _vcd(path: Path) -> None:
    from fpga.kvmu.model import parse_commands, run_commands, write_vcd

    trace = run_commands(parse_commands("capacity 64\ninit 4\n" + "speculate 3\naccept\n" * 40).commands, 64)
    write_vcd(trace, path, clock_signal=True)


WRITERS: dict[str, Callable[[Path], None]] = {"csv": _csv, "json": _json, "perfetto": _perfetto, "vcd": _vcd}


def _read_back(kind: str, path: Path) -> object:
    if kind == "csv":
        return read_csv(path)
    if kind == "vcd":
        from fpga.kvmu.model import read_vcd

        return read_vcd(path)
    return json.loads(path.read_text())


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_full_disk_keeps_the_old_file_and_no_temporary(tmp_path: Path, kind: str, full_disk: Callable) -> None:
    path = tmp_path / f"out.{kind}"
    path.write_text("previous version\n")
    full_disk(hwmodel.io, 1000)  # the disk fills 1000 bytes into the new file
    with pytest.raises(OSError) as exc:
        WRITERS[kind](path)
    assert exc.value.errno == errno.ENOSPC or "No space left" in str(exc.value)
    assert path.read_text() == "previous version\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]  # no temporary file left behind


@pytest.mark.parametrize("kind", sorted(WRITERS))
def test_two_writers_leave_one_whole_file(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"out.{kind}"
    threads = [threading.Thread(target=WRITERS[kind], args=(path,)) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _read_back(kind, path)  # whole and parseable
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_sigkill_mid_write_leaves_no_short_file(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    child = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from hwmodel.report.tables import write_csv\n"
        "def rows():\n"
        "    for i in range(10**9):\n"
        "        if i == 5000: print('writing', flush=True)\n"
        "        yield {'a': i}\n"
        f"write_csv({str(path)!r}, rows(), ['a'])\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert not path.exists()  # only the temporary file exists: a reader never sees a short table
    assert [p.name.startswith(".t.csv.") for p in tmp_path.iterdir()] == [True]


def test_read_only_output_is_one_clear_cli_error(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hwmodel.cli import main

    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the output directory should be (root ignores read-only modes)
    r = CliRunner().invoke(main, ["workload", "requests", "generate", "--n", "3", "--out", str(blocker / "r.csv")])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    assert r.output.strip().splitlines()[-1].startswith("Error: ") and "Traceback" not in r.output


def test_engine_table_cache_on_a_full_disk_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    from hwmodel.serving import devices
    from hwmodel.serving.cluster import load_cluster, resolve_cluster
    from hwmodel.specs import library

    cluster = resolve_cluster(load_cluster("a100+7xu280"))
    group = next(g for _i, role, _j, g in cluster.spec.groups() if role == "prefill")
    fac = devices.EngineFactory(cache=tmp_path)
    model = fac.build(group, cluster.llm, library(), "test", "group")
    model.table.step_s(0)
    real_savez = np.savez

    def savez_full(file: object, **arrays: object) -> None:
        real_savez(file, **arrays)
        with open(file, "r+b") as fh:  # type: ignore[arg-type]
            fh.truncate(50)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(np, "savez", savez_full)
    fac.save()  # no exception: the cache only costs the next run its set-up
    assert list(tmp_path.iterdir()) == []  # no short table, no temporary file
