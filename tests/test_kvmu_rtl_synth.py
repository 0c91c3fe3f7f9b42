"""The reference KVMU RTL's yosys counts: recorded with their source for the current fpga/kvmu/rtl/kvmu.v, reproduced
by yosys when it is installed, and used by the resource model (and `hwmodel fpga designs`) for the KVMU."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest
from click.testing import CliRunner

from fpga.kvmu.verify import synth
from fpga.streaming.design import load_design
from fpga.streaming.resources import estimate, kvmu_resources
from hwmodel.cli import main


def test_record_is_for_the_current_rtl() -> None:
    rec = synth.recorded()
    assert rec["rtl_sha256"] == synth.rtl_sha256(), (
        "fpga/kvmu/rtl/kvmu.v changed since its yosys counts were recorded: run `hwmodel kvmu synth --write`"
    )
    assert rec["source"].startswith(f"yosys {rec['yosys']}: ") and "synth_xilinx -family xcup" in rec["source"]
    cells = rec["cells"]
    assert rec["lut"] == sum(cells.get(c, 0) for c in synth.LUT_CELLS)
    assert rec["ff"] == sum(cells.get(c, 0) for c in synth.FF_CELLS)
    # three 32-bit pointers, the 32-bit write address, the 32-bit busy counter, mode, status, busy kind, write enable
    assert rec["ff"] == 3 * 32 + 32 + 32 + 2 + 4 + 2 + 1


@pytest.mark.skipif(shutil.which("yosys") is None, reason="yosys not installed (apt-get install yosys)")
def test_yosys_reproduces_the_record() -> None:
    rec = synth.recorded()
    if synth.yosys_version() != rec["yosys"]:
        pytest.skip(f"yosys {synth.yosys_version()} installed, the record is from yosys {rec['yosys']}")
    fresh = synth.synthesize()
    assert (fresh["lut"], fresh["ff"], fresh["cells"]) == (rec["lut"], rec["ff"], rec["cells"])
    res = CliRunner().invoke(main, ["kvmu", "synth", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["lut"] == rec["lut"]


def test_resource_model_uses_the_synthesized_kvmu() -> None:
    rec = synth.recorded()
    assert kvmu_resources() == {"lut": rec["lut"], "ff": rec["ff"], "dsp": 0, "bram18k": 0, "uram": 0}
    draft = load_design("draft-u280")
    assert draft.kvmu
    with_kvmu = estimate(draft)
    without = estimate(dataclasses.replace(draft, kvmu=False))
    assert with_kvmu.blocks == {"kvmu": kvmu_resources()} and without.blocks == {}
    assert with_kvmu.lut - without.lut == rec["lut"] and with_kvmu.ff - without.ff == rec["ff"]
    assert with_kvmu.per_engine == without.per_engine
    assert not load_design("flexllm-u280").kvmu


def test_fpga_designs_shows_the_kvmu() -> None:
    rec = synth.recorded()
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(main, ["fpga", "designs", "--json"]).stdout)}
    assert rows["draft-u280"]["blocks"]["kvmu"]["lut"] == rec["lut"]
    assert rows["flexllm-u280-mem-opt-new"]["blocks"] == {}
    res = CliRunner().invoke(main, ["fpga", "designs"], terminal_width=250)
    assert res.exit_code == 0
    assert f"{rec['lut']}/{rec['ff']}" in res.output and f"yosys {rec['yosys']}" in res.output
