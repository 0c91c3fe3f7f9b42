"""Quantities checked for meaning and the global output flags (issue #31): byte counts whole and positive, request
arrivals within the simulated horizon, every integer option bounded, ``--quiet`` on every command."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from hwmodel.cli import main
from hwmodel.cli.harden import walk
from hwmodel.workload.requests import MAX_ARRIVAL_S, MAX_REQUEST_TOKENS


def _err(args: list[str]) -> str:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2 and isinstance(r.exception, SystemExit), r.output
    last = r.output.strip().splitlines()[-1]
    assert last.startswith("Error: "), r.output
    return last


@pytest.mark.parametrize("size", ["0.5", "0", "1.0001KB", "1e30", "0.1GiB"])
def test_transfer_bytes_are_whole_and_positive(size: str) -> None:
    last = _err(["link", "transfer", "--bytes", size, "--link", "pcie-gen3-x16"])
    assert "whole number of bytes" in last and repr(size) in last


def test_transfer_of_whole_bytes_runs() -> None:
    r = CliRunner().invoke(main, ["link", "transfer", "--bytes", "1.5GiB", "--link", "pcie-gen3-x16", "--json"])
    assert r.exit_code == 0, r.output
    assert '"bytes": 1610612736' in r.output


@pytest.mark.parametrize("t, field", [("1e300", "arrival_s"), (str(MAX_ARRIVAL_S * 2), "arrival_s")])
def test_arrivals_beyond_the_horizon_are_refused(tmp_path: Path, t: str, field: str) -> None:
    f = tmp_path / "r.csv"
    f.write_text(f"arrival_s,prompt_tokens,output_tokens\n0,10,10\n{t},10,10\n")
    last = _err(["workload", "requests", "validate", str(f)])
    assert f"{f}:3: field '{field}'" in last and "horizon" in last
    assert "horizon" in _err(["serve", "run", "--requests", str(f)])
    f.write_text(f"arrival_s,prompt_tokens,output_tokens\n{MAX_ARRIVAL_S},10,10\n")  # the limit itself is fine
    assert CliRunner().invoke(main, ["workload", "requests", "validate", str(f)]).exit_code == 0


def test_token_counts_and_generated_horizon_are_bounded(tmp_path: Path) -> None:
    f = tmp_path / "r.jsonl"
    f.write_text('{"arrival_s": 0, "prompt_tokens": 100000000000000000000000, "output_tokens": 3}\n')
    assert f"at most {MAX_REQUEST_TOKENS:,} tokens" in _err(["workload", "requests", "validate", str(f)])
    assert "horizon" in _err(["serve", "run", "--rate", "1e-9", "--n", "10"])
    assert "1<=x<=1000000" in _err(["serve", "run", "--n", "99999999999999999999"])


def test_every_integer_option_is_bounded() -> None:
    unbounded = [
        (" ".join(path), p.opts)
        for path, cmd in walk(main)
        for p in cmd.params
        if isinstance(p.type, click.types.IntParamType) and getattr(p.type, "max", None) is None
    ]
    assert unbounded == []


def test_every_command_accepts_quiet_and_the_global_flags() -> None:
    missing = [
        " ".join(path)
        for path, cmd in walk(main)
        if not isinstance(cmd, click.Group) and not any("--quiet" in getattr(p, "opts", ()) for p in cmd.params)
    ]
    assert missing == []
    r = CliRunner().invoke(main, ["--quiet", "--json", "specs", "list"])
    assert r.exit_code == 0 and r.output.lstrip().startswith("["), r.output
    assert "has no JSON output" in _err(["--json", "reason", "policies"])


def test_quiet_silences_the_heartbeat_and_progress_bars(monkeypatch: pytest.MonkeyPatch) -> None:
    from rich import progress as rich_progress

    from hwmodel.cli import progress

    monkeypatch.setenv("HWMODEL_HEARTBEAT_S", "0.001")  # the heartbeat would fire at once
    monkeypatch.delenv("HWMODEL_QUIET", raising=False)
    init = rich_progress.Progress.__init__
    seen: list[bool] = []

    @main.command("faults-probe", hidden=True)
    def probe() -> None:
        seen.append(progress.quiet())
        bar = rich_progress.Progress()
        seen.append(bar.disable)

    try:
        from hwmodel.cli.harden import harden

        harden(main)
        r = CliRunner().invoke(main, ["faults-probe", "--quiet"])
        assert r.exit_code == 0 and "working" not in r.output, r.output
        assert seen == [True, True]
        assert rich_progress.Progress.__init__ is init and not progress.quiet()  # undone after the command
    finally:
        main.commands.pop("faults-probe")
