"""Vidur profile export: the files carry every column Vidur's predictor reads, its own filters select our rows,
and Vidur's composition of a layer (attention + MLP + add) gives back the engine's own per-layer time."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from fpga.streaming.engine import StreamingEngine
from gpu.latency import GpuEngine
from hwmodel.cli import main
from hwmodel.errors import HwmodelError
from hwmodel.interop.vidur import CANONICAL, export, operator_times, vidur_block_ms

# the columns vidur/execution_time_predictor/sklearn_execution_time_predictor.py reads (microsoft/vidur)
COMPUTE_MODELS = (
    "attn_pre_proj",
    "attn_post_proj",
    "mlp_up_proj",
    "mlp_down_proj",
    "mlp_act",
    "input_layernorm",
    "post_attention_layernorm",
    "attn_rope",
    "add",
)
COMPUTE_KEYS = (
    "n_head",
    "n_kv_head",
    "n_embd",
    "n_expanded_embd",
    "use_gated_mlp",
    "vocab_size",
    "num_tensor_parallel_workers",
    "num_tokens",
)
ATTN_KEYS = (
    "n_embd",
    "n_q_head",
    "n_kv_head",
    "block_size",
    "num_tensor_parallel_workers",
    "batch_size",
    "kv_cache_size",
    "prefill_chunk_size",
)


def _read(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize(
    "make",
    [lambda: StreamingEngine("draft-u280"), lambda: GpuEngine("a100-80gb", "llama2-7b", "hf")],
    ids=["streaming", "gpu-hf"],
)
def test_vidur_bundle_round_trip(tmp_path: Path, make) -> None:  # noqa: ANN001
    eng = make()
    mlp_path, att_path = export(eng, tmp_path, num_tokens=(1, 8), kv_cache_sizes=(0, 256), prefill_chunks=(1, 16))
    mlp, att = _read(mlp_path), _read(att_path)
    for col in COMPUTE_KEYS + tuple(f"time_stats.{m}.median" for m in COMPUTE_MODELS):
        assert col in mlp[0], col
    for col in ATTN_KEYS + tuple(
        f"time_stats.{m}.median" for m in ("attn_prefill", "attn_decode", "attn_kv_cache_save")
    ):
        assert col in att[0], col
    llm = eng.llm
    # Vidur's own filters select every row
    assert all(
        int(r["n_head"]) == llm.heads and int(r["n_embd"]) == llm.hidden and r["use_gated_mlp"] == "True" for r in mlp
    )
    decode = [r for r in att if int(r["prefill_chunk_size"]) == 0]
    assert {int(r["kv_cache_size"]) for r in decode} == {0, 256}
    # Vidur's block time x layers = the engine's per-layer operators x layers (the embedding is not in Vidur's model)
    for r in decode:
        kv = int(r["kv_cache_size"])
        one = next(m for m in mlp if int(m["num_tokens"]) == 1)
        t = operator_times(eng, 1, kv)
        want_ms = 1e3 * sum(v for k, v in t.items() if k != "embed")
        assert vidur_block_ms(one, r) == pytest.approx(want_ms, rel=1e-12)


def test_streaming_operator_times_add_up_to_the_token_and_scale_with_tokens() -> None:
    eng = StreamingEngine("draft-u280")
    shares = eng.layer_operator_shares_s(300)
    layers = eng.llm.layers
    once = {"embed", "final_norm", "lm_head", "argmax"}
    total = sum(v if k in once else v * layers for k, v in shares.items())
    assert total == pytest.approx(eng.ingest_s(1, 300), rel=1e-12)
    t1, t4 = operator_times(eng, 1, 300), operator_times(eng, 4, 300)
    # one token at any context: its operators add up to the token exactly
    assert t1["embed"] + layers * sum(v for k, v in t1.items() if k != "embed") + sum(
        v for k, v in eng.layer_operator_shares_s(0).items() if k in once - {"embed"}
    ) == pytest.approx(eng.ingest_s(1, 300), rel=1e-12)
    assert t4["up_proj"] == pytest.approx(4 * t1["up_proj"], rel=1e-12)
    # attention is integrated over the 4 contexts by the trapezoid rule; the exact sum within 1 %
    exact = sum(operator_times(eng, 1, 300 + i)["attention"] for i in range(4))
    assert t4["attention"] == pytest.approx(exact, rel=0.01)
    assert set(CANONICAL) <= set(t1)


def test_gpu_kernels_all_map_to_an_operator_and_conserve_the_gpu_time() -> None:
    from gpu import launch
    from gpu.kernels import Pass, build_program

    for fw in ("hf", "vllm", "vllm-eager", "edge-w8a8"):
        eng = GpuEngine("a100-80gb", "llama2-7b", fw)
        t = eng.operator_times_s(1, 512)
        prog = build_program(
            eng.llm, eng.framework.program, Pass.single(1, 512, 1), eng.weight_bits, eng.kv_bits, "auto"
        )
        layer_s = float(launch.PassTimes.of(prog, eng.roofline).layer[:, 0].sum())
        assert sum(v for k, v in t.items() if k != "embed") == pytest.approx(layer_s, rel=1e-12), fw


def test_cli_export_and_errors(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main,
        ["export", "vidur", "--gpu", "a100-80gb", "--llm", "llama2-7b", "--framework", "hf", "--out", str(tmp_path)],
    )
    assert r.exit_code == 0, r.output
    assert (tmp_path / "mlp.csv").exists() and (tmp_path / "attention.csv").exists()
    r = CliRunner().invoke(main, ["export", "vidur", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "either --design" in r.output
    with pytest.raises(HwmodelError, match="operator-times"):
        from fpga.instruction.engine import InstructionEngine

        export(InstructionEngine("glitches-u280"), tmp_path)
