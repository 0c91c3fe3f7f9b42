"""`hwmodel fpga profile-port`: patterns, read/write mix, port-to-channel map, reordering, AXI IDs, plots, bad
input."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from hwmodel.cli import main


def test_profile_port_patterns_map_and_plot(tmp_path: Path) -> None:
    run = CliRunner().invoke
    base = ["fpga", "profile-port", "--sizes", "64", "--outstanding", "64", "--total-bytes", "131072", "--json"]

    def bw(*extra: str) -> float:
        r = run(main, base + list(extra))
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)[0]["bw_bytes_per_s"]

    seq = bw()
    assert bw("--pattern", "strided:4096") < 0.6 * seq
    assert bw("--pattern", "random", "--channels", "0:4") < 0.5 * bw("--pattern", "random")
    assert bw("--write-fraction", "0.5") < seq
    # the reorder queue passes bank conflicts; several AXI IDs lift the switch's per-ID ordering across channels
    assert bw("--pattern", "random", "--sizes", "128") > 1.2 * bw(
        "--pattern", "random", "--sizes", "128", "--no-reorder"
    )
    assert bw("--pattern", "random", "--channels", "0:4", "--ids", "16") > 3 * bw(
        "--pattern", "random", "--channels", "0:4"
    )
    png = tmp_path / "p.png"
    r = run(
        main,
        [
            "fpga",
            "profile-port",
            "--sizes",
            "64,4096",
            "--outstanding",
            "1,16",
            "--total-bytes",
            "65536",
            "--plot",
            str(png),
        ],
    )
    assert r.exit_code == 0, r.output
    assert png.stat().st_size > 1000


def test_profile_port_bad_input_is_one_line() -> None:
    run = CliRunner().invoke
    r = run(main, ["fpga", "profile-port", "--pattern", "zigzag"])
    assert r.exit_code != 0 and "pattern 'zigzag'" in r.output and "Traceback" not in r.output
    r = run(main, ["fpga", "profile-port", "--channels", "99"])
    assert r.exit_code != 0 and "pseudo-channel 99" in r.output
