"""The board library (issue 26): every card loads with sourced values; memory sections a card lacks are absent,
and whatever needs them stops with one line naming the board and the section."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwmodel.bounds import device_bandwidths
from hwmodel.cli import main
from hwmodel.errors import HwmodelError, SpecError
from hwmodel.specs import BUILTIN_DIRS, library, load_spec_file

HBM_ONLY = ("u50", "u50lv", "u55c")
DDR_ONLY = ("u200", "u250", "vck5000")


def test_library_has_the_cards() -> None:
    names = library().names("fpga-board")
    assert {"u50", "u50lv", "u55c", "u200", "u250", "u280", "v80", "vck5000", "vhk158"} <= set(names)
    for name in names:
        board = library().board(name)
        assert board.sources, name
        for field, src in board.sources.items():
            assert src.strip(), (name, field)


@pytest.mark.parametrize("name", HBM_ONLY + DDR_ONLY)
def test_absent_memory_is_absent_and_refused_in_one_line(name: str) -> None:
    board = library().board(name)
    missing = "ddr" if name in HBM_ONLY else "hbm"
    assert not getattr(board, missing) and bool(getattr(board, "hbm" if missing == "ddr" else "ddr"))
    with pytest.raises(HwmodelError, match=rf"board '{name}' .* has no \[{missing}\] section") as info:
        _ = getattr(board, missing).capacity_bytes
    assert "\n" not in str(info.value)
    text = (BUILTIN_DIRS["fpga-board"] / f"{name}.toml").read_text()
    assert not re.search(rf"^\[{missing}\]", text, flags=re.MULTILINE)


def test_published_peaks() -> None:
    """Derived peaks equal the data sheets': U55C 460 GB/s (UG1393), U50 316 GB/s (DS965), U200/U250 77 GB/s."""
    lib = library()
    assert lib.board("u55c").hbm.peak_bw_bytes_per_s == pytest.approx(460e9)
    assert lib.board("u55c").hbm.capacity_bytes == 16 * 2**30
    assert lib.board("u50").hbm.peak_bw_bytes_per_s == pytest.approx(316e9)
    for name in ("u200", "u250"):
        peak, measured, cap = device_bandwidths(lib.board(name))
        assert (peak, measured, cap) == (76.8e9, 76.8e9, 64 * 2**30)
    assert device_bandwidths(lib.board("vck5000"))[0] == 102.4e9
    # the two boards that extend another: the U50LV is the U50's XCU50 behind a Gen3 x4 platform (LoopLynx's
    # xclbin.info), the VHK158 the V80's two-stack HBM2e subsystem (PG313: 819.2 GB/s)
    u50lv = lib.board("u50lv")
    assert u50lv.host_link == "pcie-gen3-x4" and u50lv.hbm.peak_bw_bytes_per_s == pytest.approx(316e9)
    assert "[inherited from u50]" in u50lv.sources["hbm.axi_ports"]
    vhk158 = lib.board("vhk158")
    assert vhk158.hbm.peak_bw_bytes_per_s == pytest.approx(819.2e9) and vhk158.hbm.capacity_bytes == 32 * 2**30


def test_a_board_needs_one_memory(tmp_path: Path) -> None:
    text = (BUILTIN_DIRS["fpga-board"] / "u250.toml").read_text().replace('name = "u250"', 'name = "nomem"')
    text = text[: text.index("[ddr]")] + text[text.index("[resources]") :]
    (tmp_path / "nomem.toml").write_text(text)
    with pytest.raises(SpecError, match="an \\[hbm\\] or a \\[ddr\\] section"):
        load_spec_file(tmp_path / "nomem.toml")


def test_streaming_design_on_a_ddr_card_is_refused(tmp_path: Path) -> None:
    src = Path(__file__).resolve().parent.parent / "fpga" / "designs" / "draft-u280.toml"
    (tmp_path / "d.toml").write_text(src.read_text().replace('board = "u280"', 'board = "u250"'))
    r = CliRunner().invoke(main, ["fpga", "decode", "--design", str(tmp_path / "d.toml"), "--ctx", "10"])
    assert r.exit_code != 0 and "has no [hbm] section" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["bounds", "--llm", "qwen2.5-0.5b", "--device", "u250", "--json"])
    assert r.exit_code == 0, r.output
