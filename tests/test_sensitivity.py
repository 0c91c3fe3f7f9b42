"""The prediction band (hwmodel/studies/sensitivity.py): which fields count as guesses, their ranges, per-field movement and the
joint band, on a latency function whose answer is known, and on the cycle model through `fpga decode --sensitivity`."""

from __future__ import annotations

import json

from click.testing import CliRunner

from fpga.streaming.design import load_design
from hwmodel.errors import HwmodelError
from hwmodel.studies.sensitivity import field_range, knobs, sensitivity


def test_sourced_fields_are_facts_and_the_rest_are_guesses() -> None:
    d = load_design("draft-u280")
    ks = {k.key: k for k in knobs(d)}
    assert "operand_passes" not in ks and "softmax_passes" not in ks  # sourced to FlexLLM's code
    assert ks["slr_crossing_cycles"].status == "default"
    assert ks["engines[linear].burst_bytes"].status == "unsourced"
    assert (ks["engines[linear].burst_bytes"].low, ks["engines[linear].burst_bytes"].high) == (2048, 8192)
    assert "engines[norm].burst_bytes" not in ks  # an engine without ports has no port fields
    assert "layer_io_cycles" not in ks  # 0 is a mechanism, not a latency


def test_an_estimate_tag_makes_a_sourced_field_a_guess(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from fpga.streaming.design import DESIGN_DIR

    text = (
        (DESIGN_DIR / "draft-u280.toml")
        .read_text()
        .replace("fifo_depth = 8", 'fifo_depth = { value = 8, source = "[estimate] copied from the FlexLLM design" }')
    )
    p = tmp_path / "mine.toml"
    p.write_text(text)
    assert {k.key: k.status for k in knobs(load_design(p))}["fifo_depth"] == "estimate"


def test_ranges() -> None:
    assert field_range("burst_bytes", 65536) == (32768, 65536)
    assert field_range("fifo_latency_cycles", 1) == (1, 4)
    assert field_range("pipeline_latency_cycles", 0) == (0, 8)
    assert field_range("softmax_passes", 1) == (1, 2)


def test_per_field_swing_and_joint_band_on_a_known_latency() -> None:
    """latency = 1 ms + 1 us per FIFO-depth step below 16 + 2 us per pipeline cycle of 'linear'; a burst of 2 KB is
    refused. The swings, the refused end and the band follow exactly."""
    d = load_design("draft-u280")

    def lat(x):  # type: ignore[no-untyped-def]
        if x.engines[0].burst_bytes == 2048:
            raise HwmodelError("buffer too small\nsecond line")
        return 1e-3 + 1e-6 * (16 - x.fifo_depth) + 2e-6 * x.engines[0].pipeline_latency_cycles

    out = sensitivity(d, lat, fields=["fifo_depth", "pipeline_latency_cycles", "burst_bytes"])
    rows = {r["field"]: r for r in out["fields"]}
    nominal = lat(d)
    assert out["nominal_s"] == nominal
    assert abs(rows["fifo_depth"]["swing_s"] - 12e-6) < 1e-12  # 4 .. 16
    assert abs(rows["engines[linear].pipeline_latency_cycles"]["swing_s"] - 2e-6 * 36) < 1e-12  # 12 .. 48
    assert rows["engines[linear].burst_bytes"]["low_s"] is None
    assert rows["engines[linear].burst_bytes"]["low_error"] == "buffer too small"
    assert out["fields"][0]["field"] == "engines[linear].pipeline_latency_cycles"  # largest swing first
    lo, hi = out["band_s"]
    assert abs(lo - (1e-3 + 0 + 2e-6 * 12)) < 1e-12 and abs(hi - (1e-3 + 12e-6 + 2e-6 * 48)) < 1e-12


def test_fpga_decode_sensitivity_json() -> None:
    from hwmodel.cli import main

    r = CliRunner().invoke(
        main,
        [
            "fpga",
            "decode",
            "--design",
            "draft-u280",
            "--ctx",
            "64",
            "--sensitivity",
            "--vary",
            "buffer_depth,fifo_depth",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    band = json.loads(r.stdout)["sensitivity"]
    assert set(band) >= {"nominal_s", "fields", "band_s", "varied"}
    lo, hi = band["band_s"]
    assert lo < band["nominal_s"] < hi
    assert all(
        {"field", "status", "value", "low", "high", "low_s", "high_s", "swing_s"} <= set(f) for f in band["fields"]
    )
    bad = CliRunner().invoke(main, ["fpga", "decode", "--design", "draft-u280", "--ctx-range", "0,64", "--sensitivity"])
    assert bad.exit_code != 0 and "one point at a time" in bad.output
    bad = CliRunner().invoke(main, ["fpga", "decode", "--design", "draft-u280", "--sensitivity", "--vary", "lanes"])
    assert bad.exit_code != 0 and "unknown field 'lanes'" in bad.output


def test_instruction_run_sensitivity_and_ingest() -> None:
    from hwmodel.cli import main

    args = ["fpga", "instruction", "run", "--design", "draft-instr-u280", "--ctx", "64", "--json"]
    r = CliRunner().invoke(main, [*args, "--sensitivity", "--vary", "request_queue_depth,port_width_bits"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert {f["field"] for f in out["sensitivity"]["fields"]} == {
        "datamover.request_queue_depth",
        "datamover.port_width_bits",
    }
    wide = next(f for f in out["sensitivity"]["fields"] if f["field"] == "datamover.port_width_bits")
    assert wide["high_s"] < out["sensitivity"]["nominal_s"] < wide["low_s"]  # a wider port streams faster
    from fpga.instruction.design import load_design as load_instr
    from hwmodel.studies.sensitivity import instruction_knobs

    ks = {k.key: k for k in instruction_knobs(load_instr("draft-instr-u280"))}
    assert (ks["buffers.overlap_loads"].status, ks["buffers.overlap_loads"].low) == ("default", 0)
    assert ks["buffers.overlap_loads"].apply(load_instr("draft-instr-u280"), 0).buffers.overlap_loads is False
    assert "datamover.channels" not in ks  # sourced to PG276, a fact
    ing = json.loads(CliRunner().invoke(main, [*args, "--no-lm-head"]).stdout)
    assert ing["ingest"] and ing["seconds"] < out["seconds"]
