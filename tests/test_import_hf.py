"""`hwmodel specs import-hf`: the seven architectures map to sourced specs whose parameter counts match the
published totals; any field it cannot map is refused with its name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwmodel.cli import main
from hwmodel.graph import decode, params_of, per_channel
from hwmodel.hf_import import import_hf
from hwmodel.specs import SpecLibrary, load_spec_file

FIX = Path(__file__).parent / "fixtures" / "hf"
# name -> (architecture, published total parameters in billions (model cards / papers, 3 significant digits),
#          published active parameters per token in billions, embedding included, or None for dense)
PUBLISHED = {
    "llama-3.1-8b": ("llama", 8.03, None),
    "qwen2.5-7b-instruct": ("qwen2", 7.62, None),
    "qwen3-8b": ("qwen3", 8.19, None),
    "mistral-7b-v0.1": ("mistral", 7.24, None),
    "mixtral-8x7b-v0.1": ("mixtral", 46.7, 12.9),
    "qwen1.5-moe-a2.7b": ("qwen2_moe", 14.3, 2.7),
    "qwen3-30b-a3b": ("qwen3_moe", 30.5, 3.3),
}


@pytest.fixture(scope="module")
def imported(tmp_path_factory: pytest.TempPathFactory) -> SpecLibrary:
    out = tmp_path_factory.mktemp("hf")
    for name in PUBLISHED:
        import_hf(FIX / f"{name}.json", name, out)
    return SpecLibrary((out,))


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_fixture_maps_to_the_published_parameter_counts(imported: SpecLibrary, name: str) -> None:
    arch, total_b, active_b = PUBLISHED[name]
    m = imported.llm(name)
    assert m.architecture == arch
    assert params_of(m).total / 1e9 == pytest.approx(total_b, rel=0.002)  # the cards' rounding
    if active_b is not None:  # decode reads only the routed experts; + the embedding table, as the cards count
        g = decode(m, per_channel(16, 16), 0)
        active = g.bytes.weights // 2 - m.hidden + m.vocab * m.hidden
        assert active / 1e9 == pytest.approx(active_b, rel=0.02)  # cards quote 2 significant digits
    for field in ("layers", "hidden", "heads", "kv_heads", "vocab"):
        assert "config.json" in m.source_of(field)


def test_family_features_come_through(imported: SpecLibrary) -> None:
    assert imported.llm("mistral-7b-v0.1").sliding_window == 4096
    assert imported.llm("qwen2.5-7b-instruct").sliding_window == 0  # use_sliding_window false
    assert imported.llm("qwen2.5-7b-instruct").qkv_bias
    assert imported.llm("qwen3-8b").qk_norm and not imported.llm("qwen3-8b").qkv_bias
    q2 = imported.llm("qwen1.5-moe-a2.7b")
    assert (q2.experts, q2.experts_per_token, q2.moe_intermediate, q2.shared_expert_intermediate) == (60, 4, 1408, 5632)
    assert q2.shared_expert_gate
    mx = imported.llm("mixtral-8x7b-v0.1")
    assert (mx.experts, mx.experts_per_token, mx.moe_intermediate) == (8, 2, 14336)
    assert imported.llm("llama-3.1-8b").rope_theta == 500000.0
    assert "llama3" in imported.llm("llama-3.1-8b").notes


def _variant(tmp_path: Path, base: str, **changes: object) -> Path:
    cfg = json.loads((FIX / f"{base}.json").read_text())
    for k, v in changes.items():
        if v is None:
            cfg.pop(k, None)
        else:
            cfg[k] = v
    p = tmp_path / "config.json"
    p.write_text(json.dumps(cfg))
    return p


@pytest.mark.parametrize(
    "base,changes,field",
    [
        ("llama-3.1-8b", {"some_new_knob": 3}, "some_new_knob"),
        ("qwen3-30b-a3b", {"mlp_only_layers": [0, 1]}, "mlp_only_layers"),
        ("qwen3-30b-a3b", {"decoder_sparse_step": 2}, "decoder_sparse_step"),
        ("llama-3.1-8b", {"architectures": ["BertModel"]}, "architectures"),
        ("llama-3.1-8b", {"architectures": ["GPT2LMHeadModel"]}, "model_type"),
        ("opt-125m", {"word_embed_proj_dim": 512}, "word_embed_proj_dim"),
        ("opt-125m", {"do_layer_norm_before": False}, "do_layer_norm_before"),
        ("gemma-2-2b", {"layer_types": ["sliding_attention"] * 13 + ["full_attention"] * 13}, "layer_types"),
        ("llama-3.1-8b", {"hidden_size": None}, "hidden_size"),
        ("llama-3.1-8b", {"hidden_act": "swish2"}, "hidden_act"),
        ("mistral-7b-v0.1", {"quantization_config": {"quant_method": "awq"}}, "quantization_config"),
        ("qwen3-8b", {"num_key_value_heads": 5}, "kv_heads"),
    ],
)
def test_unmappable_fields_are_refused_with_their_name(tmp_path: Path, base: str, changes: dict, field: str) -> None:
    from hwmodel.errors import HwmodelError

    p = _variant(tmp_path, base, **changes)
    with pytest.raises(HwmodelError) as info:
        import_hf(p, "x", tmp_path / "out")
    msg = str(info.value)
    assert f"'{field}'" in msg and "\n" not in msg
    assert not (tmp_path / "out" / "x.toml").exists()


def test_cli_writes_a_spec_usable_with_spec_dir(tmp_path: Path) -> None:
    r = CliRunner().invoke(
        main, ["specs", "import-hf", str(FIX / "qwen3-8b.json"), "--name", "my-qwen3", "--out", str(tmp_path)]
    )
    assert r.exit_code == 0, r.output
    spec = load_spec_file(tmp_path / "my-qwen3.toml", "llm")
    assert spec.name == "my-qwen3" and spec.layers == 36
    r = CliRunner().invoke(main, ["--spec-dir", str(tmp_path), "specs", "show", "my-qwen3", "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["fields"]["qk_norm"]["value"] is True
    bad = tmp_path / "bad.json"
    bad.write_text('{"architectures": ["BertModel"]}')
    r = CliRunner().invoke(main, ["specs", "import-hf", str(bad), "--name", "b", "--out", str(tmp_path)])
    assert r.exit_code != 0 and "architectures" in r.output and "Traceback" not in r.output
