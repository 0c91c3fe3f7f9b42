"""Every `hwmodel` example in the README runs, in order, on a fresh checkout: each command of each ```sh block is
executed (optional `[...]` parts dropped) in a scratch directory that sees the checkout's example and fixture files,
and must exit 0. Exceptions, each visible in the README itself: lines marked `# [illustrative]` (they name the
user's own files or a cluster address) and `hwmodel reproduce ...` (the main job's studies: `python3 tasks.py run`;
each study also has its own small-scale test)."""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINKED = ("examples", "tests", "fpga")  # relative paths the README's commands use


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    cmds = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.strip()
            if not line.startswith("hwmodel ") or "[illustrative]" in line:
                continue
            line = line.split("  #")[0].split(" # ")[0].strip()
            line = re.sub(r"\s*\[[^\]]*\]", "", line)  # optional parts
            if line.startswith("hwmodel reproduce"):
                continue
            cmds.append(line)
    return cmds


def test_the_readme_has_examples_and_the_two_setup_commands_first() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)```", text, flags=re.S)
    assert first is not None
    lines = [ln.split("#")[0].strip() for ln in first.group(1).splitlines() if ln.strip()]
    assert lines == ["python3 tasks.py run", "python3 tasks.py test"]
    assert len(readme_commands()) >= 30


def test_every_readme_example_runs(tmp_path: Path) -> None:
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HWMODEL_PROGRESS": "0"}
    failures = []
    for cmd in readme_commands():
        args = shlex.split(cmd)[1:]
        proc = subprocess.run([sys.executable, "-m", "hwmodel", *args], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=900)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
            failures.append(f"{cmd}: exit {proc.returncode}: {tail[0]}")
    assert not failures, "README examples that fail:\n" + "\n".join(failures)


@pytest.mark.parametrize("line, expected", [
    ("hwmodel calibrate [--cv]   # every point", "hwmodel calibrate"),
    ("hwmodel validate [--out out/validation] [--json]", "hwmodel validate"),
])
def test_optional_parts_and_comments_are_dropped(line: str, expected: str) -> None:
    got = re.sub(r"\s*\[[^\]]*\]", "", line.split("  #")[0].split(" # ")[0].strip())
    assert got == expected
