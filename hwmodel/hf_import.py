"""Turn a Hugging Face ``config.json`` into a sourced LLM spec TOML (``hwmodel specs import-hf``).

Supported architectures (the ``architectures`` entry of the config): LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM. Each field of
the config is either *mapped* to an :class:`~hwmodel.specs.LlmSpec` field (its source names the config field),
*checked* (it must hold the value the model in this project assumes, e.g. ``decoder_sparse_step = 1``), or
*ignored* because it cannot change a shape, a byte or a MAC (token ids, dtypes, initialisation, training-only
losses; listed in :data:`NO_EFFECT`). Any other field is refused with its name: nothing is dropped silently.
The semantics follow the transformers modelling code of each family (LlamaConfig, MistralConfig, Qwen2Config,
Qwen3Config, MixtralConfig, Qwen2MoeConfig, Qwen3MoeConfig, transformers 4.51).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hwmodel.errors import HwmodelError

ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3", "MixtralForCausalLM": "mixtral", "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3MoeForCausalLM": "qwen3_moe",
}
MOE = ("mixtral", "qwen2_moe", "qwen3_moe")
QWEN = ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe")

#: fields that cannot change a shape, a byte or a MAC of inference
NO_EFFECT = frozenset({
    "_name_or_path", "architectures", "model_type", "transformers_version", "torch_dtype", "dtype",
    "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range", "use_cache", "attention_dropout",
    "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob", "use_mrope",
    "return_dict", "output_hidden_states", "output_attentions", "torchscript", "pruned_heads",
})
#: fields whose value must be the one the graph models (field -> (expected value, why))
CHECKED = {
    "pretraining_tp": (1, "tensor-parallel pretraining slices only change numerics when > 1"),
    "decoder_sparse_step": (1, "every decoder layer sparse (the graph has no dense/sparse layer mix)"),
    "mlp_only_layers": ([], "every decoder layer sparse (the graph has no dense/sparse layer mix)"),
}


class ImportHfError(HwmodelError):
    """A config that cannot be mapped; the message names the file and the field."""


def _field(path: Path, cfg: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
    if key not in cfg or cfg[key] is None:
        if default is ...:
            raise ImportHfError(f"{path}: field '{key}' is missing (needed for {cfg.get('architectures')})")
        return default
    v = cfg[key]
    if isinstance(v, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise ImportHfError(f"{path}: field '{key}': expected {kind}, got {v!r}")
    if not isinstance(v, kind):
        raise ImportHfError(f"{path}: field '{key}': expected {getattr(kind, '__name__', kind)}, got {v!r}")
    return v


def map_config(path: Path | str, name: str, hf_id: str | None = None) -> dict[str, tuple[Any, str]]:
    """The LLM spec fields (value, source) a config maps to; raises :class:`ImportHfError` naming the field."""
    path = Path(path)
    try:
        cfg = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise ImportHfError(f"{path}: cannot read the config ({e.__class__.__name__}: {e})") from None
    except json.JSONDecodeError as e:
        raise ImportHfError(f"{path}: line {e.lineno}: not valid JSON ({e.msg})") from None
    if not isinstance(cfg, dict):
        raise ImportHfError(f"{path}: expected a JSON object (a Hugging Face config.json)")
    archs = cfg.get("architectures")
    if not (isinstance(archs, list) and len(archs) == 1 and archs[0] in ARCHITECTURES):
        raise ImportHfError(f"{path}: field 'architectures': expected one of {', '.join(ARCHITECTURES)}, got "
                            f"{archs!r}")
    fam = ARCHITECTURES[archs[0]]
    if cfg.get("model_type", fam) != fam:
        raise ImportHfError(f"{path}: field 'model_type': expected '{fam}' for {archs[0]}, got {cfg['model_type']!r}")
    if not re.match(r"^[a-z0-9][a-z0-9._-]*$", name):
        raise ImportHfError(f"--name {name!r}: expected a lower-case name of letters, digits, '.', '_' or '-'")
    repo = hf_id or cfg.get("_name_or_path") or f"(config {path.name})"
    src = lambda key: f"{repo} config.json: {key}"  # noqa: E731
    used: set[str] = set()
    out: dict[str, tuple[Any, str]] = {}

    def take(key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        used.add(key)
        return _field(path, cfg, key, kind, default)

    def put(field: str, value: Any, source: str) -> None:
        out[field] = (value, source)

    put("hf_id", repo, "Hugging Face repository (config.json _name_or_path)" if hf_id is None else "--hf-id")
    put("architecture", fam, src("architectures") + f" = {archs[0]}")
    for field, key in (("layers", "num_hidden_layers"), ("hidden", "hidden_size"),
                       ("heads", "num_attention_heads"), ("intermediate", "intermediate_size"),
                       ("vocab", "vocab_size"), ("max_position", "max_position_embeddings")):
        v = take(key, int)
        if v < 1:
            raise ImportHfError(f"{path}: field '{key}': expected a positive integer, got {v}")
        put(field, v, src(key))
    heads = out["heads"][0]
    kv = take("num_key_value_heads", int, heads)
    put("kv_heads", kv, src("num_key_value_heads") if "num_key_value_heads" in cfg else
        src("num_attention_heads") + " (no num_key_value_heads: multi-head attention)")
    hd = take("head_dim", int, None)
    if hd is None:
        if out["hidden"][0] % heads:
            raise ImportHfError(f"{path}: field 'head_dim' is missing and hidden_size {out['hidden'][0]} is not a "
                                f"multiple of num_attention_heads {heads}")
        put("head_dim", out["hidden"][0] // heads, src("hidden_size") + " / num_attention_heads")
    else:
        put("head_dim", hd, src("head_dim"))
    put("tied_embeddings", bool(take("tie_word_embeddings", bool, False)),
        src("tie_word_embeddings") if "tie_word_embeddings" in cfg else f"{archs[0]} default (false)")
    put("rms_norm_eps", float(take("rms_norm_eps", (int, float), 1e-6)), src("rms_norm_eps"))
    put("rope_theta", float(take("rope_theta", (int, float), 10000.0)), src("rope_theta"))
    act = take("hidden_act", str, "silu")
    if act not in ("silu", "gelu", "gelu_pytorch_tanh", "relu"):
        raise ImportHfError(f"{path}: field 'hidden_act': expected silu, gelu, gelu_pytorch_tanh or relu, got {act!r}")
    put("hidden_act", act, src("hidden_act"))
    put("output_head", "lm", f"{archs[0]}: causal LM head over the vocabulary")
    # ---- biases
    if fam in ("qwen2", "qwen2_moe"):
        put("qkv_bias", True, f"{fam} architecture: q/k/v projections carry a bias, o does not")
        put("o_bias", False, f"{fam} architecture: q/k/v projections carry a bias, o does not")
    elif fam in ("llama", "qwen3", "qwen3_moe"):
        ab = bool(take("attention_bias", bool, False))
        put("qkv_bias", ab, src("attention_bias"))
        put("o_bias", ab, src("attention_bias"))
    else:
        put("qkv_bias", False, f"{fam} architecture: no attention biases")
        put("o_bias", False, f"{fam} architecture: no attention biases")
    if fam == "llama":
        put("mlp_bias", bool(take("mlp_bias", bool, False)), src("mlp_bias"))
    put("qk_norm", fam in ("qwen3", "qwen3_moe"),
        f"{fam} architecture: " + ("per-head RMSNorm on q and k" if fam in ("qwen3", "qwen3_moe") else "no q/k norm"))
    # ---- sliding window
    window = take("sliding_window", int, None)
    full_layers = 0
    if fam in QWEN:
        use = bool(take("use_sliding_window", bool, False))
        mwl = take("max_window_layers", int, out["layers"][0])
        if not use:
            window = None
        else:
            full_layers = min(mwl, out["layers"][0])
    if "layer_types" in cfg:
        used.add("layer_types")
        types = cfg["layer_types"]
        if not (isinstance(types, list) and len(types) == out["layers"][0]
                and all(t in ("full_attention", "sliding_attention") for t in types)):
            raise ImportHfError(f"{path}: field 'layer_types': expected {out['layers'][0]} entries of "
                                f"'full_attention' / 'sliding_attention', got {types!r}")
        n_full = next((i for i, t in enumerate(types) if t == "sliding_attention"), len(types))
        if any(t == "full_attention" for t in types[n_full:]):
            raise ImportHfError(f"{path}: field 'layer_types': full-attention layers after sliding ones are not "
                                f"modelled (the graph takes the first N layers full, the rest windowed)")
        if n_full == len(types):
            window = None
        full_layers = n_full
    put("sliding_window", int(window or 0),
        src("sliding_window") if window else src("sliding_window") + " (null or disabled: full attention)")
    put("full_attention_layers", int(full_layers) if window else 0,
        src("max_window_layers") if (window and fam in QWEN) else "all layers use the same attention")
    # ---- mixture of experts
    if fam in MOE:
        if fam == "mixtral":
            e = take("num_local_experts", int)
            put("experts", e, src("num_local_experts"))
            put("moe_intermediate", out["intermediate"][0], src("intermediate_size") + " (Mixtral: each expert)")
        else:
            put("experts", take("num_experts", int), src("num_experts"))
            put("moe_intermediate", take("moe_intermediate_size", int), src("moe_intermediate_size"))
        put("experts_per_token", take("num_experts_per_tok", int), src("num_experts_per_tok"))
        if fam == "qwen2_moe":
            sh = take("shared_expert_intermediate_size", int, 0)
            put("shared_expert_intermediate", sh, src("shared_expert_intermediate_size"))
            put("shared_expert_gate", sh > 0, "qwen2_moe architecture: sigmoid gate Linear(hidden, 1) on the shared "
                                              "expert")
    rope_scaling = cfg.get("rope_scaling")
    used.add("rope_scaling")
    notes = f"Imported by hwmodel specs import-hf from {path.name} ({archs[0]})."
    if rope_scaling is not None:
        if not isinstance(rope_scaling, dict):
            raise ImportHfError(f"{path}: field 'rope_scaling': expected an object or null, got {rope_scaling!r}")
        notes += " rope_scaling " + json.dumps(rope_scaling, sort_keys=True) + " changes positions, not shapes."
    for key, (want, why) in CHECKED.items():
        if key in cfg:
            used.add(key)
            if cfg[key] != want:
                raise ImportHfError(f"{path}: field '{key}': expected {want!r} ({why}), got {cfg[key]!r}")
    unknown = sorted(k for k in cfg if k not in used and k not in NO_EFFECT)
    if unknown:
        raise ImportHfError(f"{path}: field '{unknown[0]}' is not mapped by import-hf for {archs[0]} (it may change "
                            f"the model; refused rather than dropped)" +
                            (f"; also unmapped: {', '.join(unknown[1:])}" if len(unknown) > 1 else ""))
    out["__notes__"] = (notes, "")
    return out


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v)
    return json.dumps(str(v))


def to_toml(fields: dict[str, tuple[Any, str]], name: str, display_name: str | None = None) -> str:
    """The spec file text: every value with its source."""
    notes = fields.get("__notes__", ("", ""))[0]
    lines = ['kind = "llm"', f"name = {json.dumps(name)}",
             f"display_name = {json.dumps(display_name or fields['hf_id'][0].split('/')[-1])}",
             f"notes = {json.dumps(notes)}"]
    for k, (v, s) in fields.items():
        if k == "__notes__":
            continue
        lines.append(f"{k} = {{ value = {_toml_value(v)}, source = {json.dumps(s)} }}")
    return "\n".join(lines) + "\n"


def import_hf(config: Path | str, name: str, out_dir: Path | str = ".", hf_id: str | None = None,
              display_name: str | None = None) -> Path:
    """Write ``out_dir/NAME.toml`` from a config.json and validate it by loading it; return its path."""
    from hwmodel.specs import load_spec_file

    text = to_toml(map_config(config, name, hf_id), name, display_name)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}.toml"
    tmp = path.with_suffix(".toml.tmp")
    tmp.write_text(text)
    try:
        load_spec_file(tmp, "llm")
    except HwmodelError as e:  # the mapped values break a spec rule: name the config, not the scratch file
        tmp.unlink()
        raise ImportHfError(str(e).replace(str(tmp), f"{config} -> {name}.toml")) from None
    tmp.replace(path)
    return path
