"""Every `hwmodel` example in the README runs on a fresh checkout: each command of each ```sh block is executed
(optional `[...]` parts dropped) in a scratch directory that sees the checkout's example and fixture files, and must
exit 0. Exceptions, each visible in the README itself: lines marked `# [illustrative]` (they name the user's own
files or a cluster address) and `hwmodel reproduce ...` (the main job's studies: `python3 tasks.py run`; each study
also has its own small-scale test). An example that needs an OS package the machine lacks (``NEEDS_TOOL``:
Icarus Verilog for `hwmodel kvmu verify`, which `.ci/run` installs) skips, naming it.

The examples are collected from whatever the README holds when the tests are collected, and each chain of commands
is its own parametrized case (so pytest-xdist spreads them over its workers): commands that share a file they write
or read (a path-like argument, e.g. `--out math500.jsonl.gz` then `--trace math500.jsonl.gz`) form one chain and
run in README order in one scratch directory; every other command is a case of its own.

A case that follows a test module's shared fixture (``README_AFTER_FIXTURE`` in tests/conftest.py, which marks it
``in_process``: the validation table) runs in-process (click's CliRunner, the same ``main`` that ``python -m hwmodel`` calls), in the worker that
built the fixture: it reuses the engines, compilers and tables that process memoized (`hwmodel validate ...`: 46
CPU-s in a fresh process with warm disk caches, 7 in-process after the fixture). Every other case runs as a real
``python -m hwmodel`` process."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fpga.kvmu.verify.session import missing_tool

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
LINKED = ("examples", "tests", "fpga")  # relative paths the README's commands use
_OPTIONAL = re.compile(r"\s*\[[^\]]*\]")
_EXTENSION = re.compile(r"\.[A-Za-z]")
#: README examples that need an OS package a user's machine may lack (.ci/run installs them), with the simulator
#: they run: without it the case skips with the package's own one-line reason, as the RTL tests do
NEEDS_TOOL = {"hwmodel kvmu verify": "icarus"}


def clean(line: str) -> str:
    """A README line without its trailing comment and its optional `[...]` parts."""
    return _OPTIONAL.sub("", line.split("  #")[0].split(" # ")[0].strip())


def readme_commands(text: str | None = None) -> list[str]:
    """The `hwmodel` commands of the README's ```sh blocks, in order (illustrative lines and reproduce left out)."""
    text = README.read_text(encoding="utf-8") if text is None else text
    cmds = []
    for block in re.findall(r"```sh\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            line = line.strip()
            if not line.startswith("hwmodel ") or "[illustrative]" in line:
                continue
            line = clean(line)
            if line.startswith("hwmodel reproduce"):
                continue
            cmds.append(line)
    return cmds


def _paths(cmd: str) -> set[str]:
    """The path-like arguments of a command (a `/` or a file extension; option values after `=` included), with a
    trailing `/` dropped: the files a command may write or read."""
    out = set()
    for tok in shlex.split(cmd)[1:]:
        tok = tok.split("=", 1)[1] if tok.startswith("-") and "=" in tok else tok
        if tok.startswith("-"):
            continue
        if "/" in tok or _EXTENSION.search(tok):
            out.add(tok.rstrip("/"))
    return out


def _related(a: str, b: str) -> bool:
    """The same path, or one is a folder holding the other."""
    return a == b or b.startswith(a + "/") or a.startswith(b + "/")


def chains(cmds: list[str]) -> list[list[str]]:
    """Group commands into chains: a command joins the chain of every earlier command it shares a path-like
    argument with, or a folder of one (chains it links are merged); the order within a chain is the README's."""
    groups: list[tuple[set[str], list[int]]] = []
    for i, cmd in enumerate(cmds):
        paths = _paths(cmd)
        linked = [g for g in groups if any(_related(a, b) for a in g[0] for b in paths)]
        merged: tuple[set[str], list[int]] = (set(paths), [i])
        for g in linked:
            merged[0].update(g[0])
            merged[1].extend(g[1])
            groups.remove(g)
        merged[1].sort()
        groups.append(merged)
    groups.sort(key=lambda g: g[1][0])
    return [[cmds[i] for i in idx] for _, idx in groups]


def _case_id(n: int, chain: list[str]) -> str:
    words = shlex.split(chain[0])[1:4]
    return f"{n:02d}-" + "-".join(re.sub(r"[^A-Za-z0-9.]+", "_", w).strip("_") for w in words)[:60]


CHAINS = chains(readme_commands()) if README.exists() else []


def test_the_readme_has_examples_and_the_two_setup_commands_first() -> None:
    text = README.read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)```", text, flags=re.S)
    assert first is not None
    lines = [ln.split("#")[0].strip() for ln in first.group(1).splitlines() if ln.strip()]
    assert lines == ["python3 tasks.py run", "python3 tasks.py test"]
    assert len(readme_commands(text)) >= 30


def _run_in_process(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str]:
    """(exit status, last line of output) of ``hwmodel ARGS`` run by click in this process, in ``tmp_path``."""
    from click.testing import CliRunner

    from hwmodel.cli import main

    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, args, env={"HWMODEL_PROGRESS": "0"})
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        return res.exit_code or 1, f"{type(res.exception).__name__}: {res.exception}"
    tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["(no output)"]
    return res.exit_code, tail[0]


@pytest.mark.parametrize("chain", CHAINS, ids=[_case_id(n, c) for n, c in enumerate(CHAINS)])
def test_readme_example_runs(
    chain: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    in_process = request.node.get_closest_marker("in_process") is not None  # follows a fixture (docstring)
    for cmd in chain:
        for prefix, simulator in NEEDS_TOOL.items():
            missing = missing_tool(simulator) if cmd.startswith(prefix) else None
            if missing is not None:
                pytest.skip(f"{cmd!r}: {missing} (.ci/run installs it)")
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HWMODEL_PROGRESS": "0"}
    for cmd in chain:
        args = shlex.split(cmd)[1:]
        if in_process:
            code, line = _run_in_process(args, tmp_path, monkeypatch)
            assert code == 0, f"README example fails: {cmd}: exit {code}: {line}"
            continue
        proc = subprocess.run(
            [sys.executable, "-m", "hwmodel", *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900
        )
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        assert proc.returncode == 0, f"README example fails: {cmd}: exit {proc.returncode}: {tail[0]}"


@pytest.mark.parametrize(
    "line, expected",
    [
        ("hwmodel calibrate [--cv]   # every point", "hwmodel calibrate"),
        ("hwmodel validate [--out out/validation] [--json]", "hwmodel validate"),
    ],
)
def test_optional_parts_and_comments_are_dropped(line: str, expected: str) -> None:
    assert clean(line) == expected


def test_commands_that_share_a_file_run_in_one_chain_in_order() -> None:
    text = """```sh
hwmodel specs list
hwmodel workload generate --dataset math500 --limit 40 --out math500.jsonl.gz
hwmodel fpga designs
hwmodel reason run --trace math500.jsonl.gz --policy heteroreason
hwmodel sweep examples/sweeps/a.toml
hwmodel sweep examples/sweeps/a.toml --report-only
hwmodel reason timeline --trace math500.jsonl.gz --out=t.json
hwmodel export vidur --out vidur/a/ [--x]
hwmodel reason cosim --trace gsm8k.jsonl --out-dir cosim/
hwmodel report cosim/run.json
hwmodel reproduce system-a
hwmodel serve plan cluster.toml  # [illustrative]
```"""
    assert chains(readme_commands(text)) == [
        ["hwmodel specs list"],
        [
            "hwmodel workload generate --dataset math500 --limit 40 --out math500.jsonl.gz",
            "hwmodel reason run --trace math500.jsonl.gz --policy heteroreason",
            "hwmodel reason timeline --trace math500.jsonl.gz --out=t.json",
        ],
        ["hwmodel fpga designs"],
        ["hwmodel sweep examples/sweeps/a.toml", "hwmodel sweep examples/sweeps/a.toml --report-only"],
        ["hwmodel export vidur --out vidur/a/"],
        ["hwmodel reason cosim --trace gsm8k.jsonl --out-dir cosim/", "hwmodel report cosim/run.json"],
    ]
