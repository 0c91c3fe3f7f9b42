"""The suite's own safety net: a test that hangs fails, with its stack, instead of holding the whole run
(pytest-timeout, configured in pyproject.toml; docs/testing.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HANGING_TEST = """
import threading


def test_waits_forever():
    threading.Event().wait()  # never set: only the timeout ends this test
"""


def test_the_suite_has_a_per_test_timeout_far_above_its_longest_test() -> None:
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert 600 <= int(ini["timeout"]) <= 3600, ini.get("timeout")


def test_a_hanging_test_fails_with_its_stack_and_the_run_ends(tmp_path: Path) -> None:
    (tmp_path / "test_hang.py").write_text(HANGING_TEST)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HWMODEL_TEST_TIMES", "PYTEST_XDIST"))}
    child = subprocess.run(
        # the project's ini (plugins, options), a short timeout, and the hanging test from its scratch folder
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", str(ROOT / "pyproject.toml")]
        + ["--rootdir", str(tmp_path), "-o", "timeout=2", str(tmp_path / "test_hang.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = child.stdout + child.stderr
    assert child.returncode == 1, out[-2000:]
    assert "Timeout (>2.0s) from pytest-timeout" in out and "1 failed" in out, out[-2000:]
    assert "in test_waits_forever" in out or "test_hang.py:6" in out, out[-2000:]  # where it hung
