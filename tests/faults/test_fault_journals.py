"""The study journal and the sweep's CSV journal under faults (issue #31): a full disk, a SIGKILL in the middle of
writing, a second writer, damaged bytes. Each ends in a clear error or a resume to exactly the points that were
whole -- never a damaged line read back as a finished point."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hwmodel.studies.runner import Journal, StudyError, journal_results

ROOT = Path(__file__).resolve().parents[2]


def _lines(n: int, start: int = 0) -> list[str]:
    return [json.dumps({"key": f"p{i}", "result": {"x": i * 0.1}}, sort_keys=True) for i in range(start, start + n)]


def _journal(path: Path, n: int) -> Journal:
    jr = Journal(path, "fp")
    jr.open()
    jr.append(_lines(n))
    jr.close()
    return jr


def test_full_disk_mid_append_resumes_to_the_whole_lines(tmp_path: Path, full_disk: object) -> None:
    path = tmp_path / "journal.jsonl"
    _journal(path, 3)
    jr = Journal(path, "fp")
    assert len(jr.open()) == 3
    real = jr._fh
    from tests.faults.conftest import FullDisk

    jr._fh = FullDisk(real, 30)  # the disk fills 30 characters into the next batch
    with pytest.raises(OSError) as exc:
        jr.append(_lines(4, start=3))
    assert exc.value.errno == errno.ENOSPC
    real.close()
    jr2 = Journal(path, "fp")
    done = jr2.open()  # the torn line is cut
    jr2.close()
    assert sorted(done) == ["p0", "p1", "p2"]
    assert path.read_bytes().endswith(b"\n") and all(json.loads(x) for x in path.read_text().splitlines())


def test_sigkill_while_appending_keeps_only_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    child = (
        f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
        "from hwmodel.studies.runner import Journal\n"
        f"jr = Journal({str(path)!r}, 'fp'); jr.open()\n"
        "i = 0\n"
        "while True:\n"
        '    jr.append([\'{"key": "p%d", "result": "%s"}\' % (i, \'x\' * 5000)]); i += 1\n'
        "    if i == 20: print('ready', flush=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"  # 20 points journaled; it keeps appending
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = Journal(path, "fp").open()
    assert len(done) >= 20 and sorted(done, key=lambda k: int(k[1:])) == [f"p{i}" for i in range(len(done))]
    assert all(json.loads(v)["result"] == "x" * 5000 for v in done.values())


def test_a_second_writer_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "journal.jsonl"
    first = Journal(path, "fp")
    first.open()
    try:
        with pytest.raises(StudyError, match="being written by another run"):
            Journal(path, "fp").open()
    finally:
        first.close()
    assert Journal(path, "fp").open() == {}


@pytest.mark.parametrize(
    "damage", ["truncated-header", "scrambled-middle", "binary", "other-fingerprint", "wrong-shape"]
)
def test_damaged_journal_keeps_the_points_before_the_damage(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "journal.jsonl"
    _journal(path, 5)
    data = path.read_bytes()
    lines = data.split(b"\n")
    expect = {
        "truncated-header": [],
        "scrambled-middle": ["p0", "p1"],
        "binary": [],
        "other-fingerprint": [],
        "wrong-shape": ["p0", "p1", "p2"],
    }[damage]
    if damage == "truncated-header":
        data = lines[0][:10]
    elif damage == "scrambled-middle":
        lines[3] = lines[3][:5] + b"\xff\xfe#" + lines[3][8:]
        data = b"\n".join(lines)
    elif damage == "binary":
        data = os.urandom(64) + b"\n" + data
    elif damage == "other-fingerprint":
        data = data.replace(b'"fp"', b'"other"', 1)
    else:
        lines[4] = json.dumps({"key": 5, "result": 1}).encode()  # a key that is not a string
        data = b"\n".join(lines)
    path.write_bytes(data)
    assert sorted(journal_results(path, "fp")) == expect  # read-only readers agree
    jr = Journal(path, "fp")
    assert sorted(jr.open()) == expect
    jr.append(_lines(1, start=9))
    jr.close()
    err = capsys.readouterr().err
    assert err.count("hwmodel: warning:") == 1 and str(path) in err, err
    assert sorted(journal_results(path, "fp")) == sorted([*expect, "p9"])  # rebuilt: whole and readable


def test_read_only_output_directory_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    import hwmodel.io
    from hwmodel.cli import main
    from tests.test_dse_support import spec_file

    spec = spec_file(tmp_path, "lanes = [8]\nports = [4]\nclock_mhz = [300]\n")
    out = tmp_path / "ro"

    real = open

    def refused(file: object, mode: str = "r", *a: object, **k: object) -> object:  # a read-only --out
        if str(file).startswith(str(out)) and any(c in mode for c in "wa+"):  # (root ignores file modes)
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real(file, mode, *a, **k)

    monkeypatch.setattr(hwmodel.io, "open", refused, raising=False)
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out), "--workers", "1", "--quiet"])
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    last = r.output.strip().splitlines()[-1]
    assert last == f"Error: {out / 'results.csv'}: Permission denied", r.output


# ------------------------------------------------------------------------------------------------ sweep CSV
def _sweep(tmp_path: Path) -> tuple[object, Path]:
    from hwmodel.dse import load_plan, run_sweep
    from tests.test_dse_support import spec_file

    plan = load_plan(spec_file(tmp_path, "lanes = [8, 16, 32]\nports = [4, 8]\nclock_mhz = [300]\n"))
    run_sweep(plan, tmp_path / "out", workers=1, progress=False)
    return plan, tmp_path / "out" / "results.csv"


def test_damaged_sweep_rows_are_evaluated_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hwmodel.dse import run_sweep
    from hwmodel.dse.runner import open_store
    from hwmodel.dse.store import rows_equal

    plan, path = _sweep(tmp_path)
    full = open_store(plan, path.parent).read()
    lines = path.read_bytes().split(b"\n")
    lines[3] = lines[3].replace(b",", b"\xff", 1)  # row 3 (the third point) scrambled
    path.write_bytes(b"\n".join(lines))
    assert len(open_store(plan, path.parent).read()) == 2  # read-only: the rows before the damage
    stats = run_sweep(plan, path.parent, workers=1, progress=False)
    assert stats.evaluated == len(plan.points) - 2
    assert rows_equal(open_store(plan, path.parent).read(), full)
    assert "damaged results journal" in capsys.readouterr().err

    path.write_bytes(os.urandom(200))  # a damaged header: moved aside, not overwritten
    run_sweep(plan, path.parent, workers=1, progress=False)
    assert (path.parent / "results.csv.damaged").is_file()
    assert rows_equal(open_store(plan, path.parent).read(), full)
