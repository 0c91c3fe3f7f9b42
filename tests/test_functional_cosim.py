"""Co-simulation driver: functional tokens, each timed by a timing model at its context length."""

from __future__ import annotations

import dataclasses

import pytest

from fpga.functional import DraftModel, cosim, quantize_model
from fpga.functional.weights import SyntheticWeights
from hwmodel.errors import HwmodelError
from hwmodel.specs import library

LLM = dataclasses.replace(
    library().llm("qwen2.5-0.5b"),
    name="cosim-test",
    layers=2,
    hidden=32,
    heads=2,
    kv_heads=1,
    head_dim=16,
    intermediate=64,
    vocab=300,
)
PARAMS = quantize_model(LLM, SyntheticWeights(LLM, 2))  # seed 2: what `fpga run --seed 2` uses


@dataclasses.dataclass
class _Result:
    cycles: int


class RecordingTiming:
    """A timing model whose time grows with context, recording every query (a test double of the Engine)."""

    name = "recording"

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        self.calls.append(("prefill", n_tokens, ctx))
        return 1e-3 * n_tokens

    def decode_s(self, ctx: int) -> float:
        self.calls.append(("decode", 1, ctx))
        return 1e-3 + 1e-6 * ctx

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        return n_tokens * self.decode_s(ctx)

    def token(self, ctx: int) -> _Result:
        return _Result(cycles=1000 + ctx)


def model() -> DraftModel:
    return DraftModel(LLM, PARAMS, capacity=64, min_window=64)


def test_cosim_decodes_the_functional_tokens_and_times_each_at_its_context() -> None:
    prompt = [4, 8, 15, 16, 23]
    timing = RecordingTiming()
    seen = []
    res = cosim.run(model(), timing, prompt, 7, on_token=seen.append)
    direct = model()
    direct.prefill(prompt)
    assert res.tokens == [direct.decode() for _ in range(7)]
    assert [r.ctx for r in res.records] == list(range(5, 12))
    assert [r.cycles for r in res.records] == [1000 + c for c in range(5, 12)]
    assert timing.calls[0] == ("prefill", 5, 0)
    assert [c for c in timing.calls[1:]] == [("decode", 1, c) for c in range(5, 12)]
    assert res.prefill_s == pytest.approx(5e-3)
    assert res.decode_total_s == pytest.approx(sum(1e-3 + 1e-6 * c for c in range(5, 12)))
    assert res.total_s == pytest.approx(res.prefill_s + res.decode_total_s)
    assert seen == list(res.records)
    d = res.as_dict()
    assert d["tokens"] == res.tokens and len(d["records"]) == 7


def test_cosim_rejects_a_timing_model_without_the_engine_methods() -> None:
    with pytest.raises(HwmodelError, match="lacks prefill_s"):
        cosim.run(model(), object(), [1, 2], 1)
    with pytest.raises(HwmodelError, match="steps must be >= 0"):
        cosim.run(model(), RecordingTiming(), [1, 2], -1)


def _tiny_design(tmp_path) -> tuple:
    """A spec dir holding the tiny LLM and a copy of the draft-u280 design that runs it."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec_dir = tmp_path / "specs"
    spec_dir.mkdir()
    repl = {
        "name": '"cosim-test"',
        "layers": 2,
        "hidden": 32,
        "heads": 2,
        "kv_heads": 1,
        "head_dim": 16,
        "intermediate": 64,
        "vocab": 300,
    }
    lines = []
    for line in (root / "hwmodel" / "llms" / "qwen2.5-0.5b.toml").read_text().splitlines():
        key = line.split("=")[0].strip()
        if key in repl:
            line = f"{key} = {repl[key]}" if key == "name" else f'{key} = {{ value = {repl[key]}, source = "test" }}'
        lines.append(line)
    (spec_dir / "cosim-test.toml").write_text("\n".join(lines) + "\n")
    design = (root / "fpga" / "designs" / "draft-u280.toml").read_text()
    design = design.replace('name = "draft-u280"', 'name = "cosim-tiny"').replace(
        'llm = "qwen2.5-0.5b"', 'llm = "cosim-test"'
    )
    path = tmp_path / "cosim-tiny.toml"
    path.write_text(design)
    return spec_dir, path


def test_fpga_run_command_times_functional_tokens_with_the_streaming_model(tmp_path) -> None:
    import json

    from click.testing import CliRunner

    from fpga.streaming.engine import StreamingEngine
    from hwmodel.cli import main
    from hwmodel.specs import set_extra_spec_dirs

    spec_dir, design = _tiny_design(tmp_path)
    out = tmp_path / "run.jsonl"
    r = CliRunner().invoke(
        main,
        [
            "--spec-dir",
            str(spec_dir),
            "fpga",
            "run",
            "--design",
            str(design),
            "--prompt-tokens",
            "6",
            "--steps",
            "5",
            "--seed",
            "2",
            "--out",
            str(out),
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["token"] for x in lines[:-1]] == res["tokens"] and "summary" in lines[-1]
    # the tokens are the functional model's (synthetic seed 2), the times the streaming engine's
    import numpy as np

    set_extra_spec_dirs((spec_dir,))
    try:
        prompt = [int(t) for t in np.random.default_rng([2, 0x9E37]).integers(0, 300, 6)]
        assert res["prompt"] == prompt
        m = DraftModel(LLM, PARAMS, capacity=64, min_window=64)
        m.prefill(prompt)
        assert res["tokens"] == [m.decode() for _ in range(5)]
        engine = StreamingEngine(str(design))
        for rec in res["records"]:
            assert rec["cycles"] == engine.token(rec["ctx"]).cycles > 0
            assert rec["decode_s"] == pytest.approx(engine.decode_s(rec["ctx"]))
        assert res["prefill_s"] == pytest.approx(engine.prefill_s(6, 0))
    finally:
        set_extra_spec_dirs(())


def test_fpga_run_unknown_design_is_a_one_line_error() -> None:
    from click.testing import CliRunner

    from hwmodel.cli import main

    r = CliRunner().invoke(main, ["fpga", "run", "--design", "no-such-design", "--steps", "1"])
    assert r.exit_code == 2 and "Error:" in r.output and "draft-u280" in r.output and "Traceback" not in r.output
