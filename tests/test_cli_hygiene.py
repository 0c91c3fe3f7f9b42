"""CLI hygiene over the whole command tree (issue #20 item 4, #19): help on every option, one clock option name
and unit, NaN/inf refused by every float option, bounded seeds, checked Dask addresses."""

from __future__ import annotations

import math

import click
import pytest
from click.testing import CliRunner

from hwmodel.cli import main
from hwmodel.cli.harden import walk
from hwmodel.cli.options import Finite

OPTIONS = [(path, p) for path, cmd in walk(main) for p in cmd.params if isinstance(p, click.Option)]
LEGACY_CLOCKS = {"--freq-mhz", "--clock-hz", "--measured-mhz", "--target-mhz"}


def test_every_visible_option_has_help() -> None:
    missing = [f"{' '.join(path)} {p.opts}" for path, p in OPTIONS if not p.hidden and not p.help]
    assert not missing, missing


def test_one_clock_option_name_and_unit() -> None:
    visible = [(path, o) for path, p in OPTIONS if not p.hidden for o in getattr(p, "documented_opts", p.opts)]
    legacy = [(path, o) for path, o in visible if o in LEGACY_CLOCKS]
    assert not legacy, legacy
    clocks = {o for _path, o in visible if "clock" in o or "freq" in o}
    assert clocks and all(o.endswith("clock-mhz") or o in ("--clock-range", "--clock") for o in clocks), clocks


def test_every_float_option_refuses_nan() -> None:
    floats = [(path, p) for path, p in OPTIONS if isinstance(p.type, click.types.FloatParamType)]
    assert floats
    for path, p in floats:
        assert isinstance(p.type, Finite), (path, p.opts)
        with pytest.raises(click.BadParameter):
            p.type.convert("nan", p, None)


@pytest.mark.parametrize(
    "args",
    [
        ["fpga", "decode", "--design", "draft-u280", "--clock-mhz", "nan"],
        ["fpga", "decode", "--design", "draft-u280", "--freq-mhz", "inf"],
        ["fpga", "profile-port", "--clock-mhz", "-inf"],
        ["workload", "generate", "--dataset", "gsm8k", "--seed", "-1", "--out", "x.jsonl"],
        ["serve", "run", "--seed", "-3"],
        ["serve", "run", "--rate", "nan"],
        ["sweep", "examples/sweeps/draft_u280.toml", "--scheduler", "not an address"],
        ["sweep", "examples/sweeps/draft_u280.toml", "--scheduler", "tcp://host:99999"],
    ],
)
def test_bad_numbers_and_addresses_are_usage_errors(args: list[str]) -> None:
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 2, r.output
    assert "Traceback" not in r.output and "Error: Invalid value for" in r.output


def test_legacy_clock_names_still_work_and_conflicts_are_refused() -> None:
    from hwmodel.cli.options import clock_option

    seen = {}

    @click.command()
    @clock_option("freq_mhz")
    def cmd(freq_mhz: float | None) -> None:
        seen["v"] = freq_mhz

    assert CliRunner().invoke(cmd, ["--clock-mhz", "250"]).exit_code == 0 and seen["v"] == 250
    assert CliRunner().invoke(cmd, ["--freq-mhz", "200"]).exit_code == 0 and seen["v"] == 200
    assert CliRunner().invoke(cmd, ["--clock-hz", "3e8"]).exit_code == 0 and math.isclose(seen["v"], 300)
    r = CliRunner().invoke(cmd, ["--clock-mhz", "250", "--freq-mhz", "200"])
    assert r.exit_code == 2 and "give the clock once" in r.output
    assert "--freq-mhz" not in CliRunner().invoke(cmd, ["--help"]).output


def test_rate_keeps_inf_but_not_nan() -> None:
    (p,) = [p for path, p in OPTIONS if path == ("serve", "run") and "--rate" in p.opts]
    assert p.type.convert("inf", p, None) == math.inf
    with pytest.raises(click.BadParameter):
        p.type.convert("nan", p, None)


def test_heartbeat_within_two_seconds_and_silent_with_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """A command still running after the first delay prints one line to stderr; the command below waits for that
    line (an event, not a sleep), so the test cannot race. With --json nothing is printed."""
    from hwmodel.cli.progress import HEARTBEAT_FIRST_S, Heartbeat, with_heartbeat

    assert HEARTBEAT_FIRST_S < 2.0
    started: list[Heartbeat] = []
    real_start = Heartbeat.start

    def spy(self: Heartbeat) -> Heartbeat:
        started.append(self)
        return real_start(self)

    monkeypatch.setattr(Heartbeat, "start", spy)
    monkeypatch.setenv("HWMODEL_HEARTBEAT_S", "0.01")

    def slow(as_json: bool) -> None:
        if not as_json:
            assert started[-1].fired.wait(60)

    cmd = click.Command(
        "slow",
        callback=with_heartbeat("slow", slow),
        params=[click.Option(["--json", "as_json"], is_flag=True, help="JSON.")],
    )
    r = CliRunner().invoke(cmd, [])
    assert r.exit_code == 0 and "hwmodel slow: working" in r.stderr
    n = len(started)
    r = CliRunner().invoke(cmd, ["--json"])
    assert r.exit_code == 0 and r.stderr == "" and len(started) == n  # no heartbeat thread at all


def test_every_command_has_the_heartbeat() -> None:
    leaves = [(path, c) for path, c in walk(main) if not isinstance(c, click.Group)]
    assert leaves and all(getattr(c.callback, "_hwmodel_heartbeat", False) for _p, c in leaves)


def test_ctrl_c_is_clean(monkeypatch: pytest.MonkeyPatch) -> None:
    import hwmodel.cli.cmd_specs as cs

    def boom(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cs, "library", boom)
    r = CliRunner().invoke(main, ["specs", "list"])
    assert (
        r.exit_code == 130 and "interrupted" in r.output and r.exception is None or isinstance(r.exception, SystemExit)
    )
