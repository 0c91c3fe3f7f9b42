"""The Python API (`import hwmodel as hw`): each entry point returns typed results with to_dict()/records() that
match what the underlying models (and so the CLI) compute; API names never shadow a hwmodel submodule."""

from __future__ import annotations

import json
import pkgutil

import pytest

import hwmodel as hw
from hwmodel.errors import HwmodelError


def test_api_names_are_exported_and_never_shadowed_by_a_submodule() -> None:
    subs = {m.name for m in pkgutil.iter_modules(hw.__path__)}
    for name in hw._API:
        assert name not in subs, f"hw.{name} would be shadowed by the submodule hwmodel.{name}"
        assert callable(getattr(hw, name)) or isinstance(getattr(hw, name), type)
    assert set(hw._API) <= set(dir(hw))


def test_decode_and_prefill_match_the_engines_and_serialize() -> None:
    from fpga.streaming.engine import StreamingEngine
    from gpu.latency import GpuEngine

    eng = hw.streaming_engine("draft-u280")
    t = hw.decode(eng, 512)
    assert t.seconds == StreamingEngine("draft-u280").decode_s(512)
    assert t.tokens_per_s == pytest.approx(1 / t.seconds) and t.energy_j == pytest.approx(t.seconds * t.power_w)
    assert json.loads(json.dumps(t.to_dict()))["operation"] == "decode"
    g = hw.gpu_engine("a100-40gb", "llama2-7b", "hf")
    assert hw.prefill(g, 1536).seconds == GpuEngine("a100-40gb", "llama2-7b", "hf").prefill_s(1536, 0)
    assert [r["ctx"] for r in hw.decode_curve(g, [0, 100])] == [0, 100]
    assert "decoder" in hw.capabilities(eng)
    with pytest.raises(HwmodelError, match="ctx must be >= 0"):
        hw.decode(eng, -1)


def test_make_engine_builds_any_backend_as_a_system_spec_would() -> None:
    a = hw.make_engine("streaming", "qwen2.5-0.5b", design="draft-v80")
    assert hw.decode(a, 64).seconds == hw.decode(hw.streaming_engine("draft-v80"), 64).seconds
    assert hw.decode(a, 64).power_w == hw.decode(hw.streaming_engine("draft-v80"), 64).power_w  # through the wrapper
    b = hw.make_engine("gpu", "qwen2.5-0.5b", gpu="h200", framework="vllm")
    assert hw.decode(b, 64).seconds > 0
    with pytest.raises(HwmodelError):
        hw.make_engine("nope", "qwen2.5-0.5b")


def test_specs_bounds_and_user_spec_dirs(tmp_path) -> None:  # noqa: ANN001
    assert "qwen2.5-0.5b" in hw.spec_library().names("llm") and hw.llm("qwen2.5-0.5b").layers == 24
    b = hw.physical_bounds("qwen2.5-0.5b", "u280", ctx=0)
    assert b.decode_floor_peak_s == pytest.approx(b.bytes.total_bytes / 460e9, rel=1e-3)
    with pytest.raises(HwmodelError, match="not a directory"):
        hw.use_spec_dirs([tmp_path / "missing"])


def test_replay_and_serve_return_records() -> None:
    tr = hw.generate_trace("gsm8k", limit=3)
    r = hw.replay(tr, "step-ahead")
    assert len(r.records()) == 3 and r.to_dict()["summary"]["problems"] == 3
    s = hw.serve("a100+7xu280", n=12)
    recs = s.records()
    assert len(recs) == 12 and all(type(x["path"]) is str for x in recs)
    assert json.loads(json.dumps(s.to_dict()))["metrics"]["requests"] == 12


def test_load_is_a_fraction_of_saturation_and_the_docs_ratio_holds() -> None:
    sat = hw.saturation("a100+7xu280")
    assert sat.request_rate_per_s == pytest.approx(sat.requests / hw.serve("a100+7xu280").metrics.window_s)
    reps = hw.serve("a100+7xu280", n=200, rate_per_s=hw.load(0.8), seeds=5)
    ratio = reps["throughput_tok_per_s"].mean / sat.throughput_tok_per_s
    assert f"({ratio:.2f}x on `a100+7xu280`" in " ".join(open("docs/api.md").read().split())  # noqa: SIM115
    with pytest.raises(HwmodelError, match="load fraction"):
        hw.load(0)


def test_decode_curve_uses_the_serving_tables_and_matches_exact_runs() -> None:
    g = hw.gpu_engine("a100-40gb", "llama2-7b", framework="hf")
    ctxs = [0, 31, 700, 1536]
    fast = hw.decode_curve(g, ctxs)
    assert [r["seconds"] for r in fast] == [r["seconds"] for r in hw.decode_curve(g, ctxs, exact=True)]
    s = hw.streaming_engine("draft-u280")
    grid = hw.decode_curve(s, [0, 32, 48, 64])
    assert grid[1]["seconds"] == s.decode_s(32) and grid[3]["seconds"] == s.decode_s(64)
    assert grid[2]["seconds"] == pytest.approx(s.decode_s(48), rel=2e-3)  # linear between 32-token grid points
    with pytest.raises(TypeError):
        hw.gpu_engine("a100-40gb", "llama2-7b")  # type: ignore[call-arg]  # framework= is required


def test_every_result_field_is_documented_with_its_unit_in_help_and_docs() -> None:
    import pydoc

    from hwmodel.result_fields import markdown, undocumented

    assert undocumented() == []
    assert "tokens_per_s_per_w [tokens/s/W]" in pydoc.render_doc(hw.OpTiming, renderer=pydoc.plaintext)
    from hwmodel.serving.metrics import Metrics

    assert "window_s [s]: first arrival to last completion" in pydoc.render_doc(Metrics, renderer=pydoc.plaintext)
    assert markdown() in open("docs/api.md").read(), "docs/api.md is stale: python -m hwmodel.result_fields"  # noqa: SIM115
