"""The Hugging Face safetensors loader (written with the ``safetensors`` library in Qwen2 naming, as a real
checkpoint is), its checks, quantization at load, and the `hwmodel fpga accuracy` command on a tiny model."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from fpga.functional import CheckpointError, DraftModel, SafetensorsWeights, SyntheticWeights, quantize_model
from fpga.functional.quantize import expected_shapes
from fpga.functional.weights import write_safetensors
from hwmodel.cli import main
from hwmodel.specs import library

LLM = dataclasses.replace(
    library().llm("qwen2.5-0.5b"),
    name="loader-test",
    layers=2,
    hidden=32,
    heads=2,
    kv_heads=1,
    head_dim=16,
    intermediate=64,
    vocab=300,
)
SRC = SyntheticWeights(LLM, 5)


def test_float32_checkpoint_round_trips_to_the_same_integers(tmp_path: Path) -> None:
    path = write_safetensors(tmp_path / "model.safetensors", LLM, SRC)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "qwen2"
    loaded = SafetensorsWeights(path, LLM)
    assert quantize_model(LLM, loaded).digest() == quantize_model(LLM, SRC).digest()
    a = DraftModel.from_safetensors(path, LLM, capacity=32, min_window=32)
    b = DraftModel.from_synthetic(LLM, seed=5, capacity=32, min_window=32)
    for m in (a, b):
        m.prefill([1, 2, 3])
    assert [a.decode() for _ in range(6)] == [b.decode() for _ in range(6)]


def test_bfloat16_checkpoint_is_quantized_from_its_own_values(tmp_path: Path) -> None:
    import ml_dtypes

    path = write_safetensors(tmp_path / "model.safetensors", LLM, SRC, dtype="bfloat16")
    with __import__("safetensors").safe_open(str(path), framework="numpy") as st:
        assert st.get_slice("model.norm.weight").get_dtype() == "BF16"

    def bf16_source(name: str) -> np.ndarray:
        return SRC(name).astype(ml_dtypes.bfloat16).astype(np.float32)

    assert quantize_model(LLM, SafetensorsWeights(path, LLM)).digest() == quantize_model(LLM, bf16_source).digest()


def test_sharded_directory_and_extra_tensors(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    names = list(expected_shapes(LLM))
    half = len(names) // 2
    save_file({n: SRC(n) for n in names[:half]}, str(tmp_path / "model-00001-of-00002.safetensors"))
    save_file(
        {n: SRC(n) for n in names[half:]} | {"lm_head.weight": SRC("model.embed_tokens.weight")},
        str(tmp_path / "model-00002-of-00002.safetensors"),
    )
    loaded = SafetensorsWeights(tmp_path, LLM)
    assert len(loaded.files) == 2
    assert quantize_model(LLM, loaded).digest() == quantize_model(LLM, SRC).digest()


@pytest.mark.parametrize(
    "name",
    [
        "model.layers.1.mlp.up_proj.weight",
        "model.layers.0.self_attn.k_proj.bias",
        "model.norm.weight",
        "model.embed_tokens.weight",
    ],
)
def test_missing_tensor_is_named(tmp_path: Path, name: str) -> None:
    path = write_safetensors(tmp_path / "m.safetensors", LLM, SRC, drop=(name,))
    with pytest.raises(CheckpointError) as err:
        SafetensorsWeights(path, LLM)
    msg = str(err.value)
    assert f"tensor '{name}' is missing" in msg and "\n" not in msg
    assert str(expected_shapes(LLM)[name]) in msg


@pytest.mark.parametrize(
    "name, shape",
    [
        ("model.layers.0.self_attn.o_proj.weight", (32, 16)),
        ("model.layers.1.input_layernorm.weight", (33,)),
        ("model.embed_tokens.weight", (301, 32)),
    ],
)
def test_misshaped_tensor_is_named(tmp_path: Path, name: str, shape: tuple[int, ...]) -> None:
    path = write_safetensors(tmp_path / "m.safetensors", LLM, SRC, reshape={name: shape})
    with pytest.raises(CheckpointError) as err:
        SafetensorsWeights(path, LLM)
    msg = str(err.value)
    assert f"tensor '{name}' has shape {shape}, expected {expected_shapes(LLM)[name]}" in msg


def test_bad_dtype_nan_missing_file_and_corrupt_file(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    tensors = {n: SRC(n) for n in expected_shapes(LLM)}
    bad = dict(tensors, **{"model.norm.weight": np.ones(32, np.int32)})
    save_file(bad, str(tmp_path / "int.safetensors"))
    with pytest.raises(CheckpointError, match="'model.norm.weight' has dtype I32"):
        SafetensorsWeights(tmp_path / "int.safetensors", LLM)
    nan = dict(tensors)
    nan["model.layers.0.mlp.down_proj.weight"] = tensors["model.layers.0.mlp.down_proj.weight"].copy()
    nan["model.layers.0.mlp.down_proj.weight"][3, 3] = np.nan
    save_file(nan, str(tmp_path / "nan.safetensors"))
    with pytest.raises(CheckpointError, match="'model.layers.0.mlp.down_proj.weight' holds non-finite"):
        quantize_model(LLM, SafetensorsWeights(tmp_path / "nan.safetensors", LLM))
    with pytest.raises(CheckpointError, match="no such checkpoint"):
        SafetensorsWeights(tmp_path / "absent.safetensors", LLM)
    (tmp_path / "junk.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json")
    with pytest.raises(CheckpointError, match="not a readable safetensors file"):
        SafetensorsWeights(tmp_path / "junk.safetensors", LLM)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CheckpointError, match="no \\*.safetensors file"):
        SafetensorsWeights(empty, LLM)


def test_synthetic_weights_are_deterministic_and_have_outliers() -> None:
    a, b = SyntheticWeights(LLM, 5), SyntheticWeights(LLM, 5)
    name = "model.layers.1.mlp.gate_proj.weight"
    assert np.array_equal(a(name), b(name))
    assert not np.array_equal(a(name), SyntheticWeights(LLM, 6)(name))
    w = a(name).astype(np.float64)
    assert np.abs(w).max() > 6 * w.std()  # heavy tail: the row max sets a coarse int8 step
    g = a("model.layers.0.input_layernorm.weight")
    assert g.max() > 3 * np.median(g)  # activation-outlier channels after the norm
    with pytest.raises(CheckpointError, match="seed"):
        SyntheticWeights(LLM, -1)


def _tiny_spec_dir(tmp_path: Path) -> Path:
    d = tmp_path / "specs"
    d.mkdir()
    src = (Path(__file__).resolve().parent.parent / "hwmodel" / "llms" / "qwen2.5-0.5b.toml").read_text()
    repl = {
        "name": '"loader-test"',
        "layers": 2,
        "hidden": 32,
        "heads": 2,
        "kv_heads": 1,
        "head_dim": 16,
        "intermediate": 64,
        "vocab": 300,
    }
    lines = []
    for line in src.splitlines():
        key = line.split("=")[0].strip()
        if key in repl:
            value = repl[key]
            line = f"{key} = {value}" if key == "name" else f'{key} = {{ value = {value}, source = "test" }}'
        lines.append(line)
    (d / "loader-test.toml").write_text("\n".join(lines) + "\n")
    return d


def test_accuracy_command_on_a_checkpoint(tmp_path: Path) -> None:
    spec_dir = _tiny_spec_dir(tmp_path)
    path = write_safetensors(tmp_path / "ckpt" / "model.safetensors", LLM, SRC)
    r = CliRunner().invoke(
        main,
        [
            "--spec-dir",
            str(spec_dir),
            "fpga",
            "accuracy",
            "--llm",
            "loader-test",
            "--checkpoint",
            str(path),
            "--prompts",
            "2",
            "--prompt-tokens",
            "12",
            "--json",
        ],
    )
    assert r.exit_code == 0, r.output
    rep = json.loads(r.stdout)
    assert rep["positions"] == 24 and 0.5 <= rep["top1_agreement"] <= 1.0
    assert 0 < rep["logit_relative_rms_error"] < 0.5
    bad = write_safetensors(tmp_path / "bad" / "model.safetensors", LLM, SRC, drop=("model.norm.weight",))
    r = CliRunner().invoke(
        main, ["--spec-dir", str(spec_dir), "fpga", "accuracy", "--llm", "loader-test", "--checkpoint", str(bad)]
    )
    assert r.exit_code == 2
    assert "Error:" in r.output and "tensor 'model.norm.weight' is missing" in r.output
    assert "Traceback" not in r.output


def test_the_float_reference_is_computed_once_for_both_comparisons(monkeypatch: pytest.MonkeyPatch) -> None:
    from fpga.functional import accuracy
    from fpga.functional import float_reference as fref

    prompts = accuracy.prompt_set(LLM.vocab, 2, 6, 0)
    full = [accuracy.measure(LLM, SRC, prompts, "s"), accuracy.measure_weight_only(LLM, SRC, prompts, "s")]
    calls = []
    real = fref.final_hidden
    monkeypatch.setattr(fref, "final_hidden", lambda *a: calls.append(a[1]) or real(*a))
    accuracy._LAST_REFERENCE.clear()
    again = [accuracy.measure(LLM, SRC, prompts, "s"), accuracy.measure_weight_only(LLM, SRC, prompts, "s")]
    assert again == full  # the same reports
    assert calls.count(SRC) == 1  # the reference of SRC once; the int8-weight forward is another source
    other = SyntheticWeights(LLM, 5)  # equal weights, another object: computed afresh, same report
    assert accuracy.measure(LLM, other, prompts, "s") == full[0] and calls.count(other) == 1
