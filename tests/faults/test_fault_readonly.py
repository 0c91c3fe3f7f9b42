"""A read-only install run by an unprivileged user with a read-only home (issue #31): every command must work, the
Numba kernels uncached with one warning, nothing written anywhere but where it is asked to.

The install is a copy of the five packages made read-only, run with ``PYTHONPATH`` pointing at it. As root the
commands run as ``nobody`` (``runuser``: root ignores file modes); as another user, file modes alone make the
copy and the home read-only. With neither possible the test is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from hwmodel.numba_cache import PACKAGES

ROOT = Path(__file__).resolve().parents[2]
WARNING = "hwmodel: warning: Numba kernel cache not writable"


def _as_user() -> list[str] | None:
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    if runuser is None:
        return None
    probe = subprocess.run([runuser, "-u", "nobody", "--", sys.executable, "-c", "pass"], capture_output=True)
    return [runuser, "-u", "nobody", "--"] if probe.returncode == 0 else None


def _read_only(path: Path) -> None:
    for p in [path, *path.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod(
            (
                mode
                | stat.S_IRUSR
                | stat.S_IRGRP
                | stat.S_IROTH
                | (stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH if p.is_dir() else 0)
            )
            & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
        )


@pytest.fixture(scope="module")
def install() -> Iterator[tuple[Path, list[str]]]:
    prefix = _as_user()
    if prefix is None:
        why = (
            "running as root without a `runuser -u nobody` that can run this Python (root ignores read-only file "
            "modes; nobody needs read access to the interpreter and its site-packages)"
        )
        if os.environ.get("HWMODEL_REQUIRE_READONLY_TEST"):  # CI (.ci/run): the test must run, not skip
            pytest.fail(why)
        pytest.skip(why)
    top = Path(tempfile.mkdtemp(prefix="hwmodel-ro-"))  # not under pytest's tmp (mode 0700, closed to nobody)
    top.chmod(0o755)
    try:
        for pkg in PACKAGES:
            shutil.copytree(ROOT / pkg, top / "inst" / pkg, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        (top / "home").mkdir()
        (top / "out").mkdir()
        (top / "out").chmod(0o777)  # the one writable place, for outputs asked for
        _read_only(top / "inst")
        (top / "home").chmod(0o555)
        yield top, prefix
    finally:
        for p in [top, *top.rglob("*")]:
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(top, ignore_errors=True)


def hwmodel(install: tuple[Path, list[str]], *args: str, cache: str | None = None) -> subprocess.CompletedProcess:
    top, prefix = install
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(top / "home"),
        "PYTHONPATH": str(top / "inst"),
        "PYTHONDONTWRITEBYTECODE": "0",
        "HWMODEL_PROGRESS": "",
        "LANG": "C.UTF-8",
    }
    if cache is not None:
        env["HWMODEL_CACHE_DIR"] = cache
    return subprocess.run(
        [*prefix, "env", "-i", *(f"{k}={v}" for k, v in env.items()), sys.executable, "-m", "hwmodel", *args],
        capture_output=True,
        text=True,
        cwd=top / "out",
        timeout=600,
    )


def test_cli_runs_from_a_read_only_install_with_a_read_only_home(install: tuple[Path, list[str]]) -> None:
    top, _ = install
    r = hwmodel(install, "specs", "list", "--json")
    assert r.returncode == 0, r.stderr
    assert '"u280"' in r.stdout
    assert WARNING not in r.stderr, r.stderr  # no kernel module is imported to list specs: nothing to warn about

    r = hwmodel(install, "fpga", "decode", "--design", "draft-u280", "--no-detail", "--json")
    assert r.returncode == 0, r.stderr
    assert '"cycles"' in r.stdout and r.stderr.count(WARNING) == 1, r.stderr  # one warning, not one per kernel

    # a GPU-only cluster: the FPGA kernels' uncached compile was shown by `fpga decode` above; here what is asked
    # of serving (its engine tables not cached in a read-only home, its outputs where --out says) is the same for
    # every cluster, and the default one would compile the streaming and HBM kernels again (16 of this test's 41
    # CPU-s, measured on a fresh checkout)
    r = hwmodel(
        install,
        "serve",
        "run",
        "--cluster",
        "8xa100",
        "--n",
        "3",
        "--prompt",
        "64",
        "--output",
        "4",
        "--json",
        "--out",
        str(top / "out" / "run"),
    )
    assert r.returncode == 0, r.stderr
    assert r.stderr.count(WARNING) == 1 and "Traceback" not in r.stderr, r.stderr
    assert (top / "out" / "run" / "trace.json").is_file()

    # an output directory the user cannot write: one line, exit 2
    r = hwmodel(install, "workload", "requests", "generate", "--n", "2", "--out", str(top / "home" / "r.csv"))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("Error: ") and "ermission denied" in r.stderr, r.stderr

    # nothing was written into the install (no __pycache__, no Numba index files)
    written = [p for p in (top / "inst").rglob("*") if p.suffix in (".nbi", ".nbc", ".pyc")]
    assert written == []


def test_kernels_cache_in_the_project_cache_directory(install: tuple[Path, list[str]]) -> None:
    top, _ = install
    cache = top / "out" / "cache"
    cache.mkdir()
    cache.chmod(0o777)
    # a command that imports kernel modules (serving: the transfer, HBM and instruction kernels), cheaply
    args = ("serve", "run", "--cluster", "8xa100", "--n", "3", "--prompt", "64", "--output", "4", "--json")
    r = hwmodel(install, *args, "--out", str(top / "out" / "run2"), cache=str(cache))
    assert r.returncode == 0 and WARNING not in r.stderr, r.stderr
    keyed = list((cache / "numba").iterdir())
    assert len(keyed) == 1 and len(keyed[0].name) == 16  # <root>/numba/<tree key>/
