"""Turn a Hugging Face ``config.json`` into a sourced LLM spec TOML (``hwmodel specs import-hf``).

Supported architectures (the ``architectures`` entry of the config): LlamaForCausalLM, MistralForCausalLM,
Qwen2ForCausalLM, Qwen3ForCausalLM, MixtralForCausalLM, Qwen2MoeForCausalLM, Qwen3MoeForCausalLM,
OPTForCausalLM, GPT2LMHeadModel, GPTJForCausalLM, GPTNeoXForCausalLM, Phi3ForCausalLM, Gemma2ForCausalLM,
Gemma3ForCausalLM and DeepseekV2ForCausalLM. Each field of the config is either *mapped* to an
:class:`~hwmodel.specs.LlmSpec` field (its source names the config field), *checked* (it must hold the value the
model in this project assumes, e.g. ``decoder_sparse_step = 1``), or *ignored* because it cannot change a shape,
a byte or a MAC (token ids, dtypes, initialisation, dropout, training-only losses, score scaling constants; listed
in :data:`NO_EFFECT` and :data:`FAMILY_NO_EFFECT`). Any other field is refused with its name: nothing is dropped
silently. Fields a family does not have (``rope_theta`` of a model with learned positions, ``rms_norm_eps`` of a
config that names its epsilon otherwise) are absent from the spec, not invented. The semantics follow the
transformers modelling code of each family (transformers 4.51: modeling_llama, _mistral, _qwen2, _qwen3,
_mixtral, _qwen2_moe, _qwen3_moe, _opt, _gpt2, _gptj, _gpt_neox, _phi3, _gemma2, _gemma3, _deepseek_v2).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hwmodel.errors import HwmodelError

ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "MixtralForCausalLM": "mixtral",
    "Qwen2MoeForCausalLM": "qwen2_moe",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "OPTForCausalLM": "opt",
    "GPT2LMHeadModel": "gpt2",
    "GPTJForCausalLM": "gptj",
    "GPTNeoXForCausalLM": "gpt_neox",
    "Phi3ForCausalLM": "phi3",
    "Gemma2ForCausalLM": "gemma2",
    "Gemma3ForCausalLM": "gemma3_text",
    "DeepseekV2ForCausalLM": "deepseek_v2",
}
MOE = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2")
QWEN = ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe")
LEARNED = ("opt", "gpt2")  # learned absolute positions, LayerNorm, plain MLP, biases everywhere
GEMMA = ("gemma2", "gemma3_text")
OLD = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe")  # RMSNorm + RoPE, before issue 26
#: family -> {canonical (Llama) config key: the key this family names it with}
KEY_NAMES: dict[str, dict[str, str]] = {
    "opt": {"intermediate_size": "ffn_dim", "hidden_act": "activation_function"},
    "gpt2": {
        "num_hidden_layers": "n_layer",
        "hidden_size": "n_embd",
        "num_attention_heads": "n_head",
        "intermediate_size": "n_inner",
        "max_position_embeddings": "n_positions",
        "hidden_act": "activation_function",
        "rms_norm_eps": "layer_norm_epsilon",
    },
    "gpt_neox": {"rms_norm_eps": "layer_norm_eps", "rope_theta": "rotary_emb_base"},
    "gemma2": {"hidden_act": "hidden_activation"},
    "gemma3_text": {"hidden_act": "hidden_activation"},
}
KEY_NAMES["gptj"] = {**KEY_NAMES["gpt2"], "rms_norm_eps": "layer_norm_epsilon"}
#: activation names of the configs -> the spec's (gelu_new is the tanh approximation)
ACTIVATIONS = {
    "silu": "silu",
    "gelu": "gelu",
    "gelu_pytorch_tanh": "gelu_pytorch_tanh",
    "gelu_new": "gelu_pytorch_tanh",
    "relu": "relu",
}

#: fields that cannot change a shape, a byte or a MAC of inference
NO_EFFECT = frozenset(
    {
        "_name_or_path",
        "architectures",
        "model_type",
        "transformers_version",
        "torch_dtype",
        "dtype",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "initializer_range",
        "use_cache",
        "attention_dropout",
        "output_router_logits",
        "router_aux_loss_coef",
        "router_jitter_noise",
        "norm_topk_prob",
        "use_mrope",
        "return_dict",
        "output_hidden_states",
        "output_attentions",
        "torchscript",
        "pruned_heads",
        "auto_map",
        "tokenizer_class",
        "task_specific_params",
        "gradient_checkpointing",
    }
)
#: per family: fields that change no shape, byte or MAC (dropout, initialisation, numerics, scaling constants,
#: the sequence-summary head of the double-heads GPT-2 model, a cache layout hint)
FAMILY_NO_EFFECT: dict[str, frozenset[str]] = {
    "opt": frozenset({"dropout", "activation_dropout", "layerdrop", "init_std", "prefix"}),
    "gpt2": frozenset(
        {
            "resid_pdrop",
            "embd_pdrop",
            "attn_pdrop",
            "summary_type",
            "summary_use_proj",
            "summary_activation",
            "summary_proj_to_labels",
            "summary_first_dropout",
            "scale_attn_weights",
            "scale_attn_by_inverse_layer_idx",
            "reorder_and_upcast_attn",
            "n_ctx",
        }
    ),
    "gpt_neox": frozenset(
        {"hidden_dropout", "classifier_dropout", "attention_probs_dropout_prob", "hidden_dropout_prob"}
    ),
    "phi3": frozenset({"resid_pdrop", "embd_pdrop", "original_max_position_embeddings"}),
    "gemma2": frozenset({"query_pre_attn_scalar", "cache_implementation", "hidden_act"}),
    "gemma3_text": frozenset({"query_pre_attn_scalar", "cache_implementation", "hidden_act", "rope_local_base_freq"}),
    "deepseek_v2": frozenset(
        {"aux_loss_alpha", "seq_aux", "routed_scaling_factor", "scoring_func", "ep_size", "n_group", "topk_group"}
    ),
}
FAMILY_NO_EFFECT["gptj"] = FAMILY_NO_EFFECT["gpt2"]
#: fields whose value must be the one the graph models (field -> (expected value, why))
CHECKED = {
    "pretraining_tp": (1, "tensor-parallel pretraining slices only change numerics when > 1"),
    "decoder_sparse_step": (1, "every decoder layer sparse (the graph has no dense/sparse layer mix)"),
    "mlp_only_layers": ([], "every decoder layer sparse (the graph has no dense/sparse layer mix)"),
    "do_layer_norm_before": (True, "pre-norm layers (OPT-350m's post-norm order is not modelled)"),
    "_remove_final_layer_norm": (False, "a final LayerNorm before the head"),
    "layer_norm_elementwise_affine": (True, "LayerNorm with gain and bias"),
    "moe_layer_freq": (1, "every layer after first_k_dense_replace is MoE"),
    "rotary": (True, "GPT-J rotary position embedding"),
    "topk_method": ("greedy", "plain top-k routing (group-limited routing only changes which experts)"),
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
        raise ImportHfError(f"{path}: field 'architectures': expected one of {', '.join(ARCHITECTURES)}, got {archs!r}")
    fam = ARCHITECTURES[archs[0]]
    if cfg.get("model_type", fam) != fam:
        raise ImportHfError(f"{path}: field 'model_type': expected '{fam}' for {archs[0]}, got {cfg['model_type']!r}")
    if not re.match(r"^[a-z0-9][a-z0-9._-]*$", name):
        raise ImportHfError(f"--name {name!r}: expected a lower-case name of letters, digits, '.', '_' or '-'")
    repo = hf_id or cfg.get("_name_or_path") or f"(config {path.name})"
    names = KEY_NAMES.get(fam, {})
    src = lambda key: f"{repo} config.json: {names.get(key, key)}"  # noqa: E731
    used: set[str] = set()
    out: dict[str, tuple[Any, str]] = {}

    def take(key: str, kind: type | tuple[type, ...], default: Any = ...) -> Any:
        key = names.get(key, key)
        used.add(key)
        return _field(path, cfg, key, kind, default)

    def put(field: str, value: Any, source: str) -> None:
        out[field] = (value, source)

    put("hf_id", repo, "Hugging Face repository (config.json _name_or_path)" if hf_id is None else "--hf-id")
    put("architecture", fam, src("architectures") + f" = {archs[0]}")
    for field, key in (
        ("layers", "num_hidden_layers"),
        ("hidden", "hidden_size"),
        ("heads", "num_attention_heads"),
        ("intermediate", "intermediate_size"),
        ("vocab", "vocab_size"),
        ("max_position", "max_position_embeddings"),
    ):
        if key == "intermediate_size" and fam in ("gpt2", "gptj") and cfg.get("n_inner") is None:
            used.add("n_inner")
            put(field, 4 * out["hidden"][0], src(key) + " null: 4 x n_embd (GPT2MLP / GPTJMLP)")
            continue
        v = take(key, int)
        if v < 1:
            raise ImportHfError(f"{path}: field '{names.get(key, key)}': expected a positive integer, got {v}")
        put(field, v, src(key))
    heads = out["heads"][0]
    kv = take("num_key_value_heads", int, heads)
    put(
        "kv_heads",
        kv,
        src("num_key_value_heads")
        if "num_key_value_heads" in cfg
        else src("num_attention_heads") + " (no num_key_value_heads: multi-head attention)",
    )
    if fam == "deepseek_v2":
        nope, rope = take("qk_nope_head_dim", int), take("qk_rope_head_dim", int)
        put("head_dim", nope + rope, src("qk_nope_head_dim") + " + qk_rope_head_dim (MLA query/key head)")
        hd = nope + rope
    else:
        hd = take("head_dim", int, None)
    if hd is None:
        if out["hidden"][0] % heads:
            raise ImportHfError(
                f"{path}: field 'head_dim' is missing and hidden_size {out['hidden'][0]} is not a "
                f"multiple of num_attention_heads {heads}"
            )
        put("head_dim", out["hidden"][0] // heads, src("hidden_size") + " / num_attention_heads")
    elif fam != "deepseek_v2":
        put("head_dim", hd, src("head_dim"))
    tied_default = fam in LEARNED + GEMMA
    put(
        "tied_embeddings",
        bool(take("tie_word_embeddings", bool, tied_default)),
        src("tie_word_embeddings")
        if "tie_word_embeddings" in cfg
        else f"{archs[0]} default ({'true' if tied_default else 'false'})",
    )
    if fam in OLD:
        put("rms_norm_eps", float(take("rms_norm_eps", (int, float), 1e-6)), src("rms_norm_eps"))
        put("rope_theta", float(take("rope_theta", (int, float), 10000.0)), src("rope_theta"))
    else:
        _positions_and_norms(fam, cfg, take, put, src, out, used, path)
    act = take("hidden_act", str, "silu")
    if act not in ACTIVATIONS:
        raise ImportHfError(
            f"{path}: field '{names.get('hidden_act', 'hidden_act')}': expected one of "
            f"{', '.join(ACTIVATIONS)}, got {act!r}"
        )
    put(
        "hidden_act",
        ACTIVATIONS[act],
        src("hidden_act") + ("" if ACTIVATIONS[act] == act else f" = {act} (the tanh approximation)"),
    )
    put("output_head", "lm", f"{archs[0]}: causal LM head over the vocabulary")
    _biases(fam, take, put, src)
    put(
        "qk_norm",
        fam in ("qwen3", "qwen3_moe", "gemma3_text"),
        f"{fam} architecture: "
        + ("per-head RMSNorm on q and k" if fam in ("qwen3", "qwen3_moe", "gemma3_text") else "no q/k norm"),
    )
    _window(fam, cfg, take, put, src, out, used, path)
    if fam in GEMMA:
        put(
            "post_norms",
            True,
            f"{fam} architecture: post_attention_layernorm and post_feedforward_layernorm on each branch output",
        )
        put("embed_scale", True, f"{fam} architecture: embeddings scaled by sqrt(hidden_size)")
        for field, key in (("attn_softcap", "attn_logit_softcapping"), ("final_softcap", "final_logit_softcapping")):
            used.add(key)
            v = take(key, (int, float), None)
            put(field, float(v or 0.0), src(key) + ("" if v else " (null: no soft-capping)"))
    if fam == "deepseek_v2":
        _mla(take, put, src)
    # ---- mixture of experts
    if fam in MOE:
        if fam == "mixtral":
            e = take("num_local_experts", int)
            put("experts", e, src("num_local_experts"))
            put("moe_intermediate", out["intermediate"][0], src("intermediate_size") + " (Mixtral: each expert)")
        elif fam == "deepseek_v2":
            put("experts", take("n_routed_experts", int), src("n_routed_experts"))
            put("moe_intermediate", take("moe_intermediate_size", int), src("moe_intermediate_size"))
        else:
            put("experts", take("num_experts", int), src("num_experts"))
            put("moe_intermediate", take("moe_intermediate_size", int), src("moe_intermediate_size"))
        put("experts_per_token", take("num_experts_per_tok", int), src("num_experts_per_tok"))
        if fam == "qwen2_moe":
            sh = take("shared_expert_intermediate_size", int, 0)
            put("shared_expert_intermediate", sh, src("shared_expert_intermediate_size"))
            put(
                "shared_expert_gate",
                sh > 0,
                "qwen2_moe architecture: sigmoid gate Linear(hidden, 1) on the shared expert",
            )
        if fam == "deepseek_v2":
            n_sh = take("n_shared_experts", int, 0)
            put(
                "shared_expert_intermediate",
                n_sh * out["moe_intermediate"][0],
                src("n_shared_experts") + " x moe_intermediate_size (DeepseekV2MoE: one MLP for the shared experts)",
            )
            put("dense_layers", take("first_k_dense_replace", int, 0), src("first_k_dense_replace"))
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
    quiet = NO_EFFECT | FAMILY_NO_EFFECT.get(fam, frozenset())
    unknown = sorted(k for k in cfg if k not in used and k not in quiet)
    if unknown:
        raise ImportHfError(
            f"{path}: field '{unknown[0]}' is not mapped by import-hf for {archs[0]} (it may change "
            f"the model; refused rather than dropped)"
            + (f"; also unmapped: {', '.join(unknown[1:])}" if len(unknown) > 1 else "")
        )
    out["__notes__"] = (notes, "")
    return out


Take = Any  # the closures of map_config: take(key, kind, default), put(field, value, source), src(key)


def _positions_and_norms(
    fam: str,
    cfg: dict[str, Any],
    take: Take,
    put: Take,
    src: Take,
    out: dict[str, tuple[Any, str]],
    used: set[str],
    path: Path,
) -> None:
    """Positions (learned table, full or partial RoPE), norm kind and epsilon, MLP kind and block layout of the
    families added in issue 26; a field a family does not have stays absent."""
    if "rms_norm_eps" in cfg or KEY_NAMES.get(fam, {}).get("rms_norm_eps") in cfg:
        put("rms_norm_eps", float(take("rms_norm_eps", (int, float))), src("rms_norm_eps"))
    if fam in LEARNED:
        put("positions", "learned", f"{fam} architecture: a learned absolute position table added to the embeddings")
        if fam == "opt":
            put("position_offset", 2, "OPTLearnedPositionalEmbedding: offset 2 (modeling_opt)")
            wpd = take("word_embed_proj_dim", int, out["hidden"][0])
            if wpd != out["hidden"][0]:
                raise ImportHfError(
                    f"{path}: field 'word_embed_proj_dim': expected hidden_size "
                    f"({out['hidden'][0]}) (project_in/project_out are not modelled), got {wpd}"
                )
    elif fam == "gptj":
        put("rope_theta", 10000.0, "GPT-J modelling code: fixed RoPE base 10000 (create_sinusoidal_positions)")
        put("rotary_dim", take("rotary_dim", int), src("rotary_dim"))
    elif fam == "gpt_neox":
        theta = (
            take("rope_theta", (int, float), None)
            if "rope_theta" in cfg
            else take("rotary_emb_base", (int, float), 10000.0)
        )
        put("rope_theta", float(theta), src("rope_theta"))
        used.add("rotary_pct")
        pct = _field(path, cfg, "rotary_pct", (int, float), 0.25)
        put("rotary_dim", int(out["head_dim"][0] * pct), src("rotary_pct") + " x head_dim")
    else:
        put("rope_theta", float(take("rope_theta", (int, float), 10000.0)), src("rope_theta"))
        used.add("partial_rotary_factor")
        f = _field(path, cfg, "partial_rotary_factor", (int, float), 1.0)
        if f != 1.0:
            put("rotary_dim", int(out["head_dim"][0] * f), src("partial_rotary_factor") + " x head_dim")
    if fam in LEARNED + ("gptj", "gpt_neox"):
        put("norm", "layer", f"{fam} architecture: LayerNorm with gain and bias")
        put("mlp", "plain", f"{fam} architecture: fc_in / activation / fc_out, no gate")
    if fam == "gptj":
        put("block", "parallel-one-norm", "GPTJBlock: attention and MLP read one ln_1 output, summed with the residual")
    elif fam == "gpt_neox":
        par = bool(take("use_parallel_residual", bool, True))
        put(
            "block",
            "parallel" if par else "sequential",
            src("use_parallel_residual")
            + (": attention and MLP each with its own norm, summed with the residual" if par else ""),
        )


def _biases(fam: str, take: Take, put: Take, src: Take) -> None:
    """q/k/v, o, MLP and LM-head biases per family (the Linear modules of each modelling file)."""
    if fam in ("qwen2", "qwen2_moe"):
        put("qkv_bias", True, f"{fam} architecture: q/k/v projections carry a bias, o does not")
        put("o_bias", False, f"{fam} architecture: q/k/v projections carry a bias, o does not")
    elif fam in ("llama", "qwen3", "qwen3_moe", "gemma2", "gemma3_text", "deepseek_v2", "gpt_neox", "phi3"):
        default = fam == "gpt_neox"  # GPTNeoXConfig.attention_bias defaults to true
        ab = bool(take("attention_bias", bool, default))
        put("qkv_bias", ab, src("attention_bias"))
        put("o_bias", ab, src("attention_bias"))
    elif fam == "opt":
        eb = bool(take("enable_bias", bool, True))
        for f in ("qkv_bias", "o_bias", "mlp_bias"):
            put(f, eb, src("enable_bias"))
    elif fam == "gpt2":
        for f in ("qkv_bias", "o_bias", "mlp_bias"):
            put(f, True, "gpt2 architecture: every Conv1D (c_attn, c_proj, c_fc) carries a bias")
    else:
        put("qkv_bias", False, f"{fam} architecture: no attention biases")
        put("o_bias", False, f"{fam} architecture: no attention biases")
    if fam == "llama":
        put("mlp_bias", bool(take("mlp_bias", bool, False)), src("mlp_bias"))
    if fam in ("gptj", "gpt_neox"):
        put("mlp_bias", True, f"{fam} architecture: the MLP's fc_in and fc_out carry biases")
    if fam == "gptj":
        put("lm_head_bias", True, "GPTJForCausalLM: lm_head = Linear(n_embd, vocab_size) with a bias")


def _window(
    fam: str,
    cfg: dict[str, Any],
    take: Take,
    put: Take,
    src: Take,
    out: dict[str, tuple[Any, str]],
    used: set[str],
    path: Path,
) -> None:
    """Sliding-window attention: one window for all layers (Mistral), the first N layers full (Qwen
    max_window_layers, layer_types), or full layers interleaved every P layers (Gemma 2: P = 2, Gemma 3:
    sliding_window_pattern, layer_types)."""
    window = take("sliding_window", int, None)
    full_layers, every, every_src = 0, 0, ""
    if fam in QWEN:
        use = bool(take("use_sliding_window", bool, False))
        mwl = take("max_window_layers", int, out["layers"][0])
        if not use:
            window = None
        else:
            full_layers = min(mwl, out["layers"][0])
    if fam == "gemma2":
        every, every_src = 2, "gemma2 modelling code: even layers slide, odd layers attend fully"
    if fam == "gemma3_text":
        used.add("sliding_window_pattern")
        every = _field(path, cfg, "sliding_window_pattern", int, 6)
        every_src = src("sliding_window_pattern") + ": layer i is full when (i + 1) % pattern == 0"
    n = out["layers"][0]
    if "layer_types" in cfg:
        used.add("layer_types")
        types = cfg["layer_types"]
        if not (
            isinstance(types, list)
            and len(types) == n
            and all(t in ("full_attention", "sliding_attention") for t in types)
        ):
            raise ImportHfError(
                f"{path}: field 'layer_types': expected {n} entries of "
                f"'full_attention' / 'sliding_attention', got {types!r}"
            )
        n_full = next((i for i, t in enumerate(types) if t == "sliding_attention"), len(types))
        period = next(
            (
                p
                for p in range(2, n + 1)
                if all((t == "full_attention") == ((i + 1) % p == 0) for i, t in enumerate(types))
            ),
            0,
        )
        if period and n_full == 0:
            every, every_src = period, src("layer_types") + f": every {period}th layer full"
        elif any(t == "full_attention" for t in types[n_full:]):
            raise ImportHfError(
                f"{path}: field 'layer_types': expected the first N layers full and the rest "
                f"sliding, or full layers every P layers; got {types!r}"
            )
        else:
            if n_full == len(types):
                window = None
            full_layers = n_full
    put(
        "sliding_window",
        int(window or 0),
        src("sliding_window") if window else src("sliding_window") + " (null or disabled: full attention)",
    )
    put(
        "full_attention_layers",
        int(full_layers) if window else 0,
        src("max_window_layers") if (window and fam in QWEN) else "all layers use the same attention",
    )
    if window and every:
        put("full_attention_every", every, every_src)


def _mla(take: Take, put: Take, src: Take) -> None:
    """DeepSeek-V2 multi-head latent attention widths."""
    put("kv_lora_rank", take("kv_lora_rank", int), src("kv_lora_rank"))
    q = take("q_lora_rank", int, None)
    put("q_lora_rank", int(q or 0), src("q_lora_rank") + ("" if q else " (null: a direct q_proj)"))
    put("qk_rope_head_dim", take("qk_rope_head_dim", int), src("qk_rope_head_dim"))
    put("v_head_dim", take("v_head_dim", int), src("v_head_dim"))


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
    lines = [
        'kind = "llm"',
        f"name = {json.dumps(name)}",
        f"display_name = {json.dumps(display_name or fields['hf_id'][0].split('/')[-1])}",
        f"notes = {json.dumps(notes)}",
    ]
    for k, (v, s) in fields.items():
        if k == "__notes__":
            continue
        lines.append(f"{k} = {{ value = {_toml_value(v)}, source = {json.dumps(s)} }}")
    return "\n".join(lines) + "\n"


def import_hf(
    config: Path | str, name: str, out_dir: Path | str = ".", hf_id: str | None = None, display_name: str | None = None
) -> Path:
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
