"""``extends = "NAME"`` in spec files and overrides from Python (``hw.system``, ``hw.cluster_spec``,
``hw.with_fields``): the merged table is validated like a file, per-field sources say where each value came from,
and bad input is one line naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

import hwmodel as hw
from hwmodel.errors import SpecError
from hwmodel.spec_extends import merge, override

ROOT = Path(__file__).resolve().parent.parent


def test_merge_is_deep_for_tables_and_whole_for_leaves_and_arrays() -> None:
    parent = {"a": {"x": {"value": 1, "source": "p"}, "y": 2}, "arr": [1, 2], "s": "p"}
    child = {"a": {"x": {"value": 5, "source": "c"}}, "arr": [3]}
    assert merge(parent, child) == {"a": {"x": {"value": 5, "source": "c"}, "y": 2}, "arr": [3], "s": "p"}
    assert override(parent, {"a.x": 7})["a"]["x"] == {"value": 7, "source": "override from Python (hwmodel.api)"}


def test_the_250_mhz_draft_by_override_and_by_extends_is_the_same_system() -> None:
    by_api = hw.system("config1", devices={"fpga-v80": {"clock_hz": 250e6}})
    by_file = hw.system(ROOT / "examples/systems/config1-v80-250mhz.toml")
    base = hw.system("config1")
    assert by_api.devices["fpga-v80"].clock_hz == by_file.devices["fpga-v80"].clock_hz == 250e6
    assert base.devices["fpga-v80"].clock_hz is None
    assert by_api.devices == {**base.devices, "fpga-v80": by_api.devices["fpga-v80"]}
    assert by_file.devices["fpga"] == base.devices["fpga"] and by_file.name == "config1-v80-250mhz"
    assert "[inherited from config1]" in by_file.sources["devices.fpga-v80.design"]
    assert "250 MHz" in by_file.sources["devices.fpga-v80.clock_hz"]
    assert by_api.sources["devices.fpga-v80.clock_hz"] == "override from Python (hwmodel.api)"
    assert by_api.sources["devices.fpga.clock_hz"] == base.sources["devices.fpga.clock_hz"]
    tr = hw.generate_trace("gsm8k", limit=2)
    a = hw.replay(tr, "heteroreason", by_api, draft="fpga-v80").summary
    b = hw.replay(tr, "heteroreason", str(ROOT / "examples/systems/config1-v80-250mhz.toml"), draft="fpga-v80").summary
    assert a.latency_mean_s == b.latency_mean_s
    again = hw.with_fields(by_api, {"devices.fpga.clock_hz": 300e6})  # overrides compose
    assert again.devices["fpga-v80"].clock_hz == 250e6 and again.devices["fpga"].clock_hz == 300e6


def test_overrides_are_validated_like_files() -> None:
    with pytest.raises(SpecError, match=r"devices\.fpga-v80\.clok_hz.*did you mean 'clock_hz'"):
        hw.system("config1", devices={"fpga-v80": {"clok_hz": 1}})
    with pytest.raises(SpecError, match=r"devices\.fpga-v80\.clock_hz': expected a finite number"):
        hw.system("config1", devices={"fpga-v80": {"clock_hz": "fast"}})


def test_a_cluster_file_extends_a_built_in_and_a_spec_dir_llm_extends_a_built_in(tmp_path: Path) -> None:
    f = tmp_path / "mine.toml"
    f.write_text('extends = "a100+7xu280"\nname = "mine"\nkv_path = "p2p"\n')
    spec = hw.cluster_spec(f)
    base = hw.cluster_spec("a100+7xu280")
    assert spec.name == "mine" and spec.kv_path == "p2p" and spec.nodes == base.nodes
    assert hw.cluster_spec("a100+7xu280", kv_path="p2p").kv_path == "p2p"
    d = tmp_path / "specs"
    d.mkdir()
    (d / "llama2-7b-long.toml").write_text(
        'extends = "llama2-7b"\nname = "llama2-7b-long"\n'
        'max_position = { value = 8192, source = "what-if [estimate]" }\n'
    )
    from hwmodel.specs import load_spec_file

    long = load_spec_file(d / "llama2-7b-long.toml")
    assert long.max_position == 8192 and long.layers == hw.llm("llama2-7b").layers


def test_bad_extends_is_one_line(tmp_path: Path) -> None:
    from hwmodel.serving.cluster import load_cluster

    f = tmp_path / "a.toml"
    f.write_text('extends = "no-such-cluster"\nname = "a"\n')
    with pytest.raises(SpecError, match=r"a\.toml: field 'extends'.*no-such-cluster"):
        load_cluster(f)
    f.write_text('extends = "b"\nname = "a"\n')
    (tmp_path / "b.toml").write_text('extends = "a"\nname = "b"\n')
    with pytest.raises(SpecError, match=r"without cycles \(a\.toml -> b\.toml -> a\.toml\)"):
        load_cluster(f)


def test_built_in_streaming_llama2_designs_and_the_back_end_of_every_built_in_cluster() -> None:
    import json

    from click.testing import CliRunner

    from fpga.streaming.design import load_design
    from hwmodel.cli import main

    u, v = load_design("glitches-u280-streaming"), load_design("glitches-v80-streaming")
    assert (
        (v.llm, v.weight_bits, v.act_bits, v.kv_bits, v.max_ctx)
        == (u.llm, 4, 8, 8, u.max_ctx)
        == ("llama2-7b", 4, 8, 8, 4096)
    )
    assert v.board == "v80" and v.clock_hz == 300e6
    res = CliRunner().invoke(main, ["serve", "clusters", "--json"], catch_exceptions=False)
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert rows["a100+7xv80-streaming"]["decode back-end"] == "glitches-v80-streaming (streaming)"
    assert rows["a100+7xv80"]["decode back-end"] == "glitches-v80 (instruction)"
    assert all(r["decode back-end"] == "-" or "(" in r["decode back-end"] for r in rows.values())


def test_every_missing_field_of_a_table_is_named_in_the_one_error(tmp_path: Path) -> None:
    from hwmodel.serving.cluster import load_cluster

    f = tmp_path / "bad.toml"
    f.write_text('name = "x"\n[[nodes]]\nname = "n"\n')
    with pytest.raises(
        SpecError,
        match=r"field 'display_name': expected this required field to be present "
        r"\(a string\); also missing: llm",
    ):
        load_cluster(f)
