#!/usr/bin/env python3
"""Measure prefill and decode on a real GPU with synthetic weights, and write calibration points.

Builds a model with the shapes of a spec in the project's LLM library (random weights: no download, no licence),
times it, and writes rows in the schema of ``calibration/measurements/gpu.csv`` (role ``predicted``, so the model's
error on your GPU shows in ``hwmodel calibrate --report`` without changing the fit; switch a row to ``fitted`` and
run ``hwmodel calibrate --fit`` to calibrate on it).

Frameworks:

* ``hf`` -- transformers eager (``Qwen2ForCausalLM`` / ``LlamaForCausalLM`` from a config built from the spec):
  ``prefill_s`` of each prompt length (one forward, median of repeats) and ``decode_s_per_token`` (mean of
  single-token forwards with the KV cache after each prompt);
* ``vllm`` / ``vllm-eager`` -- vLLM with ``load_format="dummy"`` (random weights) from the same config:
  ``generate_tokens_per_s`` of prompt + 128 generated tokens (min_tokens = max_tokens, ignore_eos).

Usage (on the machine with the GPU; needs torch, and transformers and/or vllm)::

    python calibration/scripts/measure_gpu.py --gpu-spec h200 --llm qwen2.5-0.5b --framework hf \\
        --prompts 128 512 1536 --out my_points.csv
    hwmodel calibrate --measurements my_points.csv      # model vs your measurement

Run it from the repository root (it reads the spec library). Timings are wall clock with
``torch.cuda.synchronize()``; close other GPU jobs first.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from calibration.measurements import Measurement, write_measurements  # noqa: E402
from hwmodel.specs import LlmSpec, library  # noqa: E402

CONDITIONS = ("llm", "framework", "weight_bits", "kv_bits", "input_tokens", "output_tokens")


def hf_config(llm: LlmSpec) -> dict[str, Any]:
    """A transformers config.json for the spec's architecture (what both HF and vLLM build the model from)."""
    arch = {"qwen2": ("Qwen2ForCausalLM", "qwen2"), "llama": ("LlamaForCausalLM", "llama")}[llm.architecture]
    if llm.output_head != "lm":
        raise SystemExit(
            f"{llm.name}: only causal LMs can be measured by this script (value head: time the "
            "backbone with the matching LM spec instead)"
        )
    return {
        "architectures": [arch[0]],
        "model_type": arch[1],
        "hidden_size": llm.hidden,
        "num_hidden_layers": llm.layers,
        "num_attention_heads": llm.heads,
        "num_key_value_heads": llm.kv_heads,
        "head_dim": llm.head_dim,
        "intermediate_size": llm.intermediate,
        "vocab_size": llm.vocab,
        "tie_word_embeddings": llm.tied_embeddings,
        "rms_norm_eps": llm.rms_norm_eps,
        "rope_theta": llm.rope_theta,
        "max_position_embeddings": llm.max_position,
        "hidden_act": "silu",
        "torch_dtype": "bfloat16",
        "attention_bias": llm.qkv_bias,
        "use_cache": True,
        "bos_token_id": 0,
        "eos_token_id": 1,
    }


def _sync() -> None:
    import torch

    torch.cuda.synchronize()


def measure_hf(llm: LlmSpec, prompts: list[int], decode_steps: int, repeats: int) -> list[tuple[str, int, int, float]]:
    """(quantity, input tokens, output tokens, seconds) for each prompt length, transformers eager."""
    import torch
    import transformers

    cfg_cls = transformers.AutoConfig.for_model(hf_config(llm)["model_type"])
    cfg = cfg_cls.from_dict(hf_config(llm))
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.bfloat16).eval()
    out: list[tuple[str, int, int, float]] = []
    gen = torch.Generator(device="cuda").manual_seed(0)
    with torch.inference_mode():
        for n in prompts:
            ids = torch.randint(2, llm.vocab, (1, n), device="cuda", generator=gen)
            times = []
            for _ in range(repeats + 1):  # the first run warms up
                _sync()
                t0 = time.perf_counter()
                res = model(input_ids=ids, use_cache=True)
                _sync()
                times.append(time.perf_counter() - t0)
            out.append(("prefill_s", n, 0, statistics.median(times[1:])))
            past = res.past_key_values
            token = res.logits[:, -1:].argmax(-1)
            _sync()
            t0 = time.perf_counter()
            for _ in range(decode_steps):
                step = model(input_ids=token, past_key_values=past, use_cache=True)
                past = step.past_key_values
                token = step.logits[:, -1:].argmax(-1)
                token.item()  # generate() syncs once per token (stopping criteria)
            _sync()
            out.append(("decode_s_per_token", n, decode_steps, (time.perf_counter() - t0) / decode_steps))
    return out


def measure_vllm(llm: LlmSpec, prompts: list[int], decode_steps: int, eager: bool) -> list[tuple[str, int, int, float]]:
    """(quantity, input tokens, output tokens, value) with vLLM on dummy weights: generate_tokens_per_s."""
    import vllm

    out: list[tuple[str, int, int, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(hf_config(llm)))
        engine = vllm.LLM(
            model=tmp,
            load_format="dummy",
            skip_tokenizer_init=True,
            enforce_eager=eager,
            dtype="bfloat16",
            seed=0,
            max_model_len=max(prompts) + decode_steps + 8,
        )
        params = vllm.SamplingParams(
            max_tokens=decode_steps, min_tokens=decode_steps, ignore_eos=True, temperature=0.0, detokenize=False
        )
        for n in prompts:
            prompt = {"prompt_token_ids": [2 + (k * 7919) % (llm.vocab - 2) for k in range(n)]}
            engine.generate([prompt], params, use_tqdm=False)  # warm-up
            t0 = time.perf_counter()
            engine.generate([prompt], params, use_tqdm=False)
            out.append(("generate_tokens_per_s", n, decode_steps, decode_steps / (time.perf_counter() - t0)))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu-spec", required=True, help="GPU spec name of the machine (e.g. h200, a100-80gb)")
    ap.add_argument("--llm", default="qwen2.5-0.5b", help="LLM spec whose shapes the synthetic model takes")
    ap.add_argument("--framework", choices=("hf", "vllm", "vllm-eager"), default="hf")
    ap.add_argument("--prompts", type=int, nargs="+", default=[128, 512, 1536], help="prompt lengths (tokens)")
    ap.add_argument("--decode-steps", type=int, default=128, help="decode steps timed after each prompt")
    ap.add_argument("--repeats", type=int, default=5, help="prefill repeats (median)")
    ap.add_argument("--out", type=Path, required=True, help="CSV to write (measurement schema)")
    ap.add_argument("--dry-run", action="store_true", help="print the model config and exit (no GPU needed)")
    args = ap.parse_args(argv)

    lib = library()
    lib.gpu(args.gpu_spec)  # fail early on an unknown GPU name
    llm = lib.llm(args.llm)
    if args.dry_run:
        print(json.dumps(hf_config(llm), indent=2))
        return 0
    import torch

    device = torch.cuda.get_device_name(0)
    if args.framework == "hf":
        import transformers

        results = measure_hf(llm, args.prompts, args.decode_steps, args.repeats)
        software = f"torch {torch.__version__}, transformers {transformers.__version__}"
    else:
        import vllm

        results = measure_vllm(llm, args.prompts, args.decode_steps, eager=args.framework == "vllm-eager")
        software = f"torch {torch.__version__}, vllm {vllm.__version__}"
    today = datetime.date.today().isoformat()
    source = (
        f"calibration/scripts/measure_gpu.py on {device} ({platform.node()}), {software}, "
        f"synthetic {llm.name}-shaped BF16 weights, batch 1, {today}"
    )
    units = {"prefill_s": "s", "decode_s_per_token": "s", "generate_tokens_per_s": "tokens/s"}
    points = [
        Measurement(
            id=f"{args.gpu_spec}-{args.framework}-{llm.name}-{qty}-in{n_in}",
            subject=args.gpu_spec,
            quantity=qty,
            value=value,
            unit=units[qty],
            role="predicted",
            source=source,
            notes="",
            conditions={
                "llm": llm.name,
                "framework": args.framework,
                "weight_bits": "16",
                "kv_bits": "16",
                "input_tokens": str(n_in),
                "output_tokens": str(n_out) if n_out else "",
            },
        )
        for qty, n_in, n_out, value in results
    ]
    write_measurements(args.out, points, CONDITIONS)
    for p in points:
        print(f"{p.id}: {p.value:.6g} {p.unit}")
    print(f"wrote {args.out}; compare with: hwmodel calibrate --measurements {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
