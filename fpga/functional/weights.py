"""Float weights of a Qwen2 draft model: a seeded synthetic generator and a Hugging Face safetensors loader.

Both are :data:`~fpga.functional.quantize.TensorSource` callables (name -> float array, one tensor at a time), so
the quantizer never holds a whole float model in memory.

Synthetic weights (:class:`SyntheticWeights`) are meant to make quantization matter the way it does in trained
LLMs, not to produce sensible text. The statistics are those of a checkpoint after SmoothQuant-style smoothing
(Xiao et al. 2023; the project's W8A8 convention, research/hardware.md section 6.2), where activation outliers
have been partly migrated into the weights:

* linear weights are Gaussian with std ``0.8 gain / sqrt(fan_in)`` plus heavy-tailed outliers (0.1 % of entries
  x6) and outlier input channels (1 in 256, x4), so each row's max sets a coarse int8 step for the rest of the
  row; ``gain`` is 1.5 for q/k (sharper attention) and o/down (layer updates comparable to the residual);
* RMSNorm gains are ``|N(1, 0.25)|`` with 1 % of channels x4: after each norm a few activation channels are several
  times larger than the rest and set every per-token int8 scale;
* two "massive activation" residual dims: down_proj writes them x30 in every layer (they dominate the residual's
  RMS, as in trained LLMs, Sun et al. 2024), and every norm gain damps them (x0.05);
* q and k biases are ``N(0, 0.1)`` with 1 in 64 entries of +-2..6 (Qwen2's k_proj biases are large), which set the
  per-head int8 scales of Q and of the KV cache;
* embeddings are ``N(0, 0.04)``; the final norm gain is ``|N(3, 0.3)|`` so logits spread over a few units.

The class attributes hold these factors, so a study can make the model harder or easier to quantize.

Every tensor is drawn from its own generator seeded by ``(seed, crc32(name))``: a tensor does not depend on the
order tensors are asked for, and the same seed gives the same weights on every platform (numpy PCG64).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from fpga.functional.quantize import CheckpointError, expected_shapes, layer_names
from hwmodel.specs import LlmSpec

_FLOAT_DTYPES = ("F64", "F32", "F16", "BF16")


class SyntheticWeights:
    """Deterministic float32 weights with realistic outliers for ``llm`` (see the module docstring)."""

    residual_gain = 1.5  # o_proj and down_proj: layer updates comparable to the residual stream
    qk_gain = 1.5  # q_proj and k_proj: attention sharper than uniform
    gamma_outlier_scale = 4.0  # activation-outlier channels after each RMSNorm
    bias_outlier_range = (2.0, 6.0)  # large q/k bias entries
    weight_outlier_scale = 6.0  # 0.1 % heavy-tail entries
    column_outlier_scale = 4.0  # outlier input channels per matrix

    def __init__(self, llm: LlmSpec, seed: int = 0) -> None:
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise CheckpointError(f"synthetic weight seed must be a non-negative integer, got {seed!r}")
        self.llm = llm
        self.seed = int(seed)
        self.shapes = expected_shapes(llm)
        # Per-model channel choices shared by all layers (trained models have persistent outlier channels).
        rng = self._rng("channels")
        h = llm.hidden
        self.massive_dims = np.sort(rng.choice(h, size=min(2, h), replace=False))
        n_gamma_out = max(1, h // 100)
        self.gamma_outlier_dims = np.sort(rng.choice(h, size=n_gamma_out, replace=False))

    def _rng(self, name: str) -> np.random.Generator:
        return np.random.default_rng([self.seed, zlib.crc32(name.encode())])

    def __call__(self, name: str) -> np.ndarray:
        if name not in self.shapes:
            raise CheckpointError(f"synthetic weights have no tensor '{name}'")
        shape = self.shapes[name]
        rng = self._rng(name)
        if name == "model.embed_tokens.weight" or name == "lm_head.weight":
            w = rng.standard_normal(shape, dtype=np.float32)
            w *= np.float32(0.04)
            return w
        if name.endswith("layernorm.weight"):
            g = np.abs(1.0 + 0.25 * rng.standard_normal(shape)).astype(np.float32)
            g[self.gamma_outlier_dims] *= np.float32(self.gamma_outlier_scale)
            g[self.massive_dims] *= np.float32(0.05)
            return g
        if name == "model.norm.weight":
            g = np.abs(3.0 + 0.3 * rng.standard_normal(shape)).astype(np.float32)
            g[self.massive_dims] *= np.float32(0.05)
            return g
        if name.endswith(".bias"):
            b = (0.1 * rng.standard_normal(shape)).astype(np.float32)
            if ".q_proj." in name or ".k_proj." in name:
                k = max(1, shape[0] // 64)
                idx = rng.choice(shape[0], size=k, replace=False)
                b[idx] = (rng.choice([-1.0, 1.0], size=k) * rng.uniform(*self.bias_outlier_range, size=k)).astype(
                    np.float32
                )
            return b
        # linear weight (out, in)
        fan_in = shape[1]
        w = rng.standard_normal(shape, dtype=np.float32)
        w *= np.float32(0.8 / np.sqrt(fan_in))
        flat = w.reshape(-1)
        n_out = max(1, flat.size // 1000)
        idx = rng.integers(0, flat.size, size=n_out)
        flat[idx] *= np.float32(self.weight_outlier_scale)
        cols = rng.choice(fan_in, size=max(1, fan_in // 256), replace=False)
        w[:, cols] *= np.float32(self.column_outlier_scale)
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            w *= np.float32(self.residual_gain)
        elif name.endswith(("q_proj.weight", "k_proj.weight")):
            w *= np.float32(self.qk_gain)
        if name.endswith("down_proj.weight"):
            w[self.massive_dims] *= np.float32(30.0)
        return w


def checkpoint_files(path: Path | str) -> list[Path]:
    """The safetensors files of a checkpoint: ``path`` itself, or every ``*.safetensors`` in a directory."""
    path = Path(path)
    if path.is_dir():
        files = sorted(path.glob("*.safetensors"))
        if not files:
            raise CheckpointError(f"{path}: no *.safetensors file in this directory")
        return files
    if not path.is_file():
        raise CheckpointError(f"{path}: no such checkpoint file or directory")
    return [path]


class SafetensorsWeights:
    """A Hugging Face Qwen2 checkpoint in safetensors format (one file or a sharded directory), checked against
    ``llm`` when opened: every expected tensor must be present with its exact shape and a float dtype; the first
    violation raises :class:`CheckpointError` naming the tensor. Tensors are read one at a time on demand."""

    def __init__(self, path: Path | str, llm: LlmSpec) -> None:
        from safetensors import safe_open

        self.llm = llm
        self.files = checkpoint_files(path)
        self._where: dict[str, Path] = {}
        info: dict[str, tuple[tuple[int, ...], str]] = {}
        for f in self.files:
            try:
                with safe_open(str(f), framework="numpy") as st:
                    for key in st.keys():
                        sl = st.get_slice(key)
                        info[key] = (tuple(int(d) for d in sl.get_shape()), str(sl.get_dtype()))
                        self._where[key] = f
            except CheckpointError:
                raise
            except Exception as exc:  # safetensors raises its own error types for a corrupt header
                raise CheckpointError(f"{f}: not a readable safetensors file ({exc})") from None
        for name, shape in expected_shapes(llm).items():
            if name not in info:
                raise CheckpointError(f"{path}: tensor '{name}' is missing (LLM '{llm.name}' expects shape {shape})")
            got_shape, dtype = info[name]
            if got_shape != shape:
                raise CheckpointError(
                    f"{path}: tensor '{name}' has shape {got_shape}, expected {shape} (LLM '{llm.name}')"
                )
            if dtype not in _FLOAT_DTYPES:
                raise CheckpointError(
                    f"{path}: tensor '{name}' has dtype {dtype}, expected one of {', '.join(_FLOAT_DTYPES)}"
                )

    def __call__(self, name: str) -> np.ndarray:
        from safetensors import safe_open

        if name not in self._where:
            raise CheckpointError(f"checkpoint has no tensor '{name}'")
        with safe_open(str(self._where[name]), framework="numpy") as st:
            return st.get_tensor(name)


def write_safetensors(
    path: Path | str,
    llm: LlmSpec,
    source: object,
    dtype: str = "float32",
    drop: tuple[str, ...] = (),
    reshape: Mapping[str, tuple[int, ...]] | None = None,
) -> Path:
    """Write a Hugging Face Qwen2-named checkpoint of ``llm`` from a tensor source (e.g. :class:`SyntheticWeights`)
    with the ``safetensors`` library, plus a ``config.json`` next to it. ``dtype`` is float32, float16 or bfloat16.
    ``drop`` and ``reshape`` corrupt it on purpose (for tests of the loader's checks)."""
    from safetensors.numpy import save_file

    if dtype == "bfloat16":
        import ml_dtypes

        np_dtype: object = ml_dtypes.bfloat16
    elif dtype in ("float32", "float16"):
        np_dtype = np.dtype(dtype)
    else:
        raise CheckpointError(f"checkpoint dtype must be float32, float16 or bfloat16, got {dtype!r}")
    path = Path(path)
    tensors = {}
    for name in expected_shapes(llm):
        if name in drop:
            continue
        t = np.asarray(source(name)).astype(np_dtype)  # type: ignore[operator]
        if reshape and name in reshape:
            t = np.resize(t, reshape[name])
        tensors[name] = np.ascontiguousarray(t)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={"format": "pt"})
    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": llm.hidden,
        "intermediate_size": llm.intermediate,
        "num_hidden_layers": llm.layers,
        "num_attention_heads": llm.heads,
        "num_key_value_heads": llm.kv_heads,
        "vocab_size": llm.vocab,
        "rms_norm_eps": llm.rms_norm_eps,
        "rope_theta": llm.rope_theta,
        "max_position_embeddings": llm.max_position,
        "tie_word_embeddings": llm.tied_embeddings,
        "torch_dtype": dtype,
    }
    (path.parent / "config.json").write_text(json.dumps(config, indent=2))
    return path


__all__ = ["SafetensorsWeights", "SyntheticWeights", "checkpoint_files", "layer_names", "write_safetensors"]
