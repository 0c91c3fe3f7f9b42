"""Checked derivations (issue 26): board times that become whole AXI cycles report their rounding."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest

from hwmodel.derive import RoundingWarning, checked_cycles, hbm_cycles
from hwmodel.errors import SpecError
from hwmodel.specs import BUILTIN_DIRS, library, load_spec_file

U280 = BUILTIN_DIRS["fpga-board"] / "u280.toml"


def _board(tmp_path: Path, name: str, **values: float) -> Path:
    """A copy of u280.toml with some [hbm] values replaced."""
    text = U280.read_text().replace('name = "u280"', f'name = "{name}"')
    for key, v in values.items():
        text, n = re.subn(rf"^{key} = {{ value = [^,]+,", f"{key} = {{ value = {v!r},", text, flags=re.MULTILINE)
        assert n == 1, key
    path = tmp_path / f"{name}.toml"
    path.write_text(text)
    return path


def test_issue_example_warns_with_field_and_both_numbers(tmp_path: Path) -> None:
    """tCCD_S = 2.5063 ns at a 399 MHz AXI clock is 1.00001 cycles; rounding up makes it 2 (a halved column rate)."""
    path = _board(tmp_path, "u280-399", axi_clock_hz=399e6, port_bw_cap_bytes_per_s=12.768e9, tccds_s=2.5063e-9)
    board = load_spec_file(path)
    with pytest.warns(RoundingWarning) as rec:
        cycles = hbm_cycles(board)
    assert cycles["tccds_s"].cycles == 2
    msgs = [str(w.message) for w in rec]
    (msg,) = [m for m in msgs if "hbm.tccds_s" in m]
    assert str(path) in msg and "2.5063e-09 s" in msg and "1.00001 cycles" in msg and "399 MHz" in msg
    assert "became 2 cycles" in msg


def test_shipped_boards_round_without_warning() -> None:
    """The shipped timings round up by the JEDEC rule (8.1 -> 9 cycles) without a warning; the rounding is reported."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", RoundingWarning)
        for name in library().names("fpga-board"):
            board = library().board(name)
            if board.hbm:
                d = hbm_cycles(board)["tcl_s"]
                assert d.cycles >= d.exact_cycles - 1e-6


@pytest.mark.parametrize(
    ("seconds", "clock", "cycles", "warns"),
    [
        (2.5063e-9, 399e6, 2, True),  # 1.00001 -> 2
        (18e-9, 450e6, 9, False),  # 8.1 -> 9: ordinary JEDEC rounding
        (2.2222e-9, 450e6, 1, False),  # 0.99999 -> 1: float noise absorbed
        (9e-9, 450e6, 5, False),  # 4.05 -> 5: 1.25 % above a whole count, ordinary
        (8.9e-9, 450e6, 5, True),  # 4.005 -> 5: 0.125 % above 4
    ],
)
def test_checked_cycles_rule(seconds: float, clock: float, cycles: int, warns: bool) -> None:
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        d = checked_cycles(seconds, clock, origin=f"x{seconds}{clock}", field="f", clock_field="c")
    assert bool([w for w in rec if issubclass(w.category, RoundingWarning)]) == warns
    assert d.cycles == cycles


def test_refresh_that_never_ends_is_refused(tmp_path: Path) -> None:
    """tRFC below tREFI in seconds but equal after rounding to AXI cycles: the channel would never leave refresh."""
    path = _board(tmp_path, "u280-rfc", refresh_interval_s=1000 / 450e6, refresh_cycle_s=999.5 / 450e6)
    with pytest.raises(SpecError, match=r"field 'hbm.refresh_cycle_s'.*never leave refresh"):
        hbm_cycles(load_spec_file(path))


def test_cli_prints_one_line_warning_and_derived_cycles(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from hwmodel.cli import main

    _board(tmp_path, "u280-399", axi_clock_hz=399e6, port_bw_cap_bytes_per_s=12.768e9, tccds_s=2.5063e-9)
    res = CliRunner().invoke(main, ["--spec-dir", str(tmp_path), "specs", "show", "u280-399", "--json"])
    assert res.exit_code == 0, res.output
    assert "warning: " in res.stderr and "hbm.tccds_s" in res.stderr and "Traceback" not in res.stderr
    import json

    derived = json.loads(res.stdout)["derived"]
    assert derived["hbm.tccds_cycles"]["value"] == 2
    assert "NEAR-WHOLE" in derived["hbm.tccds_cycles"]["how"]
