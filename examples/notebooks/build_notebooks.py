"""Write the example notebooks from the cell sources below and execute them, storing their outputs:
`python examples/notebooks/build_notebooks.py` (`--no-execute` writes them without outputs).

The test suite executes every notebook again (tests/test_notebooks.py) and compares every number it prints with the
stored outputs, so a reader sees what the model gives and the notebooks never rot."""

from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {
    "01_frequency_scaling.ipynb": [
        (
            "md",
            "# Frequency scaling: what a draft design measured at 200 MHz does at 300 MHz\n\n"
            "The HBM runs in its own 450 MHz clock domain and does not scale with the kernel clock, so a linear "
            "projection of the measured time is optimistic. This notebook reproduces the README's frequency-study "
            "figure with the Python API only.",
        ),
        (
            "code",
            'import hwmodel as hw\n\nstudy = hw.freq_study("draft-u280", measured_mhz=200, target_mhz=300, ctx=512)\n'
            "linear_ms, model_ms = study.token.linear_s * 1e3, study.token.model_s * 1e3\n"
            "floor_ms = study.bandwidth_floor_s * 1e3\n"
            'print(f"linear projection {linear_ms:.2f} ms/token, cycle model {model_ms:.2f} ms/token, "\n'
            '      f"HBM floor {floor_ms:.2f} ms")',
        ),
        (
            "code",
            "for op in study.operators:\n"
            '    print(f"{op.op:12s} {op.verdict:24s} clock efficiency {op.efficiency:.2f}")',
        ),
        (
            "code",
            'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\n\n'
            "mhz = [f / 1e6 for f in study.curve_hz]\n"
            'plt.plot(mhz, [s * 1e3 for s in study.curve_model_s], marker="o", label="cycle model")\n'
            'plt.axhline(floor_ms, ls="--", color="gray", label="HBM floor")\n'
            'plt.xlabel("kernel clock (MHz)"); plt.ylabel("ms/token"); plt.legend();',
        ),
    ],
    "02_draft_design_pareto.ipynb": [
        (
            "md",
            "# Explore a draft design and its Pareto front\n\n"
            "Decode time of the built-in draft accelerator against context, then a small design-space sweep "
            "(MAC lanes x HBM ports x clock) and its latency / energy / DSP front. `hw.sweep` also writes the "
            "interactive `explorer.html` next to the results.",
        ),
        (
            "code",
            "import tempfile, pathlib\nimport hwmodel as hw\n\n"
            'eng = hw.streaming_engine("draft-u280")\n'
            "for row in hw.decode_curve(eng, [0, 512, 2048]):\n"
            "    print(f\"ctx {row['ctx']:5d}: {row['seconds'] * 1e3:.3f} ms/token, {row['power_w']:.1f} W\")",
        ),
        (
            "code",
            "work = pathlib.Path(tempfile.mkdtemp())\n"
            'spec = work / "sweep.toml"\n'
            'spec.write_text(\'\'\'[sweep]\nname = "notebook"\nevaluator = "streaming-decode"\n[parameters]\n'
            'design = "draft-u280"\nctx = 512\nclock_mhz = [200, 300]\n[parameters.linear]\n'
            'lanes = [1024, 2048, 4096]\nports = [16, 24]\n[objectives]\nlatency_s = "min"\n'
            'energy_per_token_j = "min"\ndsp_util = "min"\n\'\'\')\n'
            'report = hw.sweep(spec, work / "out", workers=1)\n'
            'print(len(report.feasible), "feasible points;", {k: len(v) for k, v in report.fronts.items()})\n'
            'print("explorer:", (work / "out" / "explorer.html").exists())',
        ),
        (
            "code",
            "objs, front = next(iter(report.fronts.items()))\n"
            "for i in front:\n"
            "    r = report.rows[i].row\n"
            "    print({k: r.params[k] for k in sorted(r.params)}, {m: round(r.metrics[m], 6) for m in objs})",
        ),
    ],
    "03_draft_on_other_devices.ipynb": [
        (
            "md",
            "# What if the draft ran on another device?\n\n"
            "System A (step-wise speculative reasoning) replays the same GSM8K trace with the draft on the "
            "streaming U280 design, the instruction-driven U280, a V80 and an H200. Every engine is chosen by "
            "the capabilities its role needs, never by device kind.",
        ),
        (
            "code",
            'import hwmodel as hw\n\ntrace = hw.generate_trace("gsm8k", limit=8)\n'
            'base = hw.replay(trace, "baseline").summary\n'
            'print(f"baseline (3 GPUs): {base.latency_total_s:.2f} s")',
        ),
        (
            "code",
            'for draft in ("fpga", "fpga-instruction", "fpga-v80"):\n'
            '    s = hw.replay(trace, "heteroreason", draft=draft).summary\n'
            '    print(f"T1+T2, draft on {draft:16s}: {base.latency_total_s / s.latency_total_s:.3f}x, "\n'
            '          f"{s.energy_per_token_j:.2f} J/token")\n'
            's = hw.replay(trace, "step-ahead", draft="h200").summary\n'
            'print(f"T2, draft on h200: {base.latency_total_s / s.latency_total_s:.3f}x")',
        ),
    ],
    "04_serving_whatif.ipynb": [
        (
            "md",
            "# A serving what-if: GPU prefill, FPGA decode\n\n"
            "The same request stream (LLaMA2-7B, 1,536-token prompts, 512 output tokens, at saturation) on an "
            "8 x A100 node and on an A100 + 7 x U280 node, and on one with V80 decoders.",
        ),
        (
            "code",
            'import hwmodel as hw\n\nreqs = hw.requests(120, prompt="1536", output="512", seed=0)\n'
            'runs = {c: hw.serve(c, reqs) for c in ("8xa100", "a100+7xu280", "a100+7xv80")}\n'
            'ref = runs["8xa100"].metrics.throughput_tok_per_s\n'
            "for c, r in runs.items():\n"
            "    m = r.metrics\n"
            '    print(f"{c:12s} {m.throughput_tok_per_s:7.1f} tok/s ({m.throughput_tok_per_s / ref:.2f}x), "\n'
            '          f"TTFT p90 {m.ttft_s.p90:.2f} s")',
        ),
        ("code", 'rows = runs["a100+7xu280"].records()\nprint(rows[0])'),
    ],
    "05_researcher_questions.ipynb": [
        (
            "md",
            "# Three questions a researcher asks\n\n"
            "1. How do devices compare for LLaMA2-7B decode (1,536-token prompt, 512 new tokens, batch 1)? The "
            "GPU's framework is named: GLITCHES measured its A100 under Hugging Face (`hf`), RSD serves with vLLM.\n"
            "2. Does a 2-GPU + 6-FPGA node beat the built-in 1 + 7 at 80 % of saturation? Stochastic: several "
            "seeds, means with 95 % intervals.\n"
            "3. What does the system-A draft on a V80 at 250 MHz change? One override, no copied file.",
        ),
        (
            "code",
            "import hwmodel as hw\n\n"
            'engines = {"A100 40GB, HF": hw.gpu_engine("a100-40gb", "llama2-7b", framework="hf"),\n'
            '           "A100 40GB, vLLM": hw.gpu_engine("a100-40gb", "llama2-7b", framework="vllm"),\n'
            '           "U280 instruction (GLITCHES)": hw.instruction_engine("glitches-u280", prefetch_ratio=1),\n'
            '           "U280 streaming": hw.streaming_engine("glitches-u280-streaming"),\n'
            '           "V80 streaming": hw.streaming_engine("glitches-v80-streaming")}\n'
            "for label, eng in engines.items():\n"
            "    w = hw.decode_window(eng, input_tokens=1536, output_tokens=512)\n"
            '    print(f"{label:28s} {w.seconds_per_token * 1e3:6.2f} ms/token {w.power_w:6.1f} W "\n'
            '          f"{w.tokens_per_s_per_w:.3f} tokens/s/W")',
        ),
        (
            "code",
            'one_seven = hw.cluster_spec("a100+7xu280")\n'
            'two_six = hw.cluster_spec("a100+7xu280", {"nodes.0.prefill.0.count": 2, "nodes.0.decode.0.count": 6},\n'
            '                          name="2xa100+6xu280")\n'
            "runs = {}\n"
            "for spec in (one_seven, two_six):\n"
            "    sat = hw.saturation(spec, n=60)\n"
            "    runs[spec.name] = hw.serve(spec, n=60, rate_per_s=hw.load(0.8), seeds=4)\n"
            '    iv = runs[spec.name]["ttft_s.p90"]\n'
            '    print(f"{spec.name:14s} saturation {sat.request_rate_per_s:.3f} req/s; at 80 %: TTFT p90 "\n'
            '          f"{iv.mean:.2f} s [{iv.low:.2f}, {iv.high:.2f}] over {iv.n} seeds")',
        ),
        (
            "code",
            "import matplotlib.pyplot as plt\n\n"
            'names = list(runs)\nivs = [runs[n]["ttft_s.p90"] for n in names]\n'
            "plt.bar(names, [i.mean for i in ivs], yerr=[[i.mean - i.low for i in ivs], [i.high - i.mean for i in ivs]],\n"
            '        capsize=6)\nplt.ylabel("TTFT p90 (s), mean and 95 % CI over seeds")\nplt.show()',
        ),
        (
            "code",
            'trace = hw.generate_trace("gsm8k", limit=6)\n'
            "for mhz in (300, 250):\n"
            '    system = hw.system("config1", devices={"fpga-v80": {"clock_hz": mhz * 1e6}})\n'
            '    s = hw.replay(trace, "heteroreason", system, draft="fpga-v80").summary\n'
            '    print(f"V80 draft at {mhz} MHz: {s.latency_mean_s:.4f} s per problem, stall {s.stall_ratio:.3f}")\n'
            'print(system.sources["devices.fpga-v80.clock_hz"])',
        ),
    ],
}


def execute(path: Path) -> None:
    """Run ``path`` top to bottom in a Jupyter kernel from the repository root and store its outputs (no timing
    metadata, so a rebuild changes only what the model changed)."""
    import nbclient

    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(HERE.parent.parent)}},
    ).execute()
    nbformat.write(nb, path)


def build(run: bool = True) -> list[Path]:
    out = []
    for name, cells in NOTEBOOKS.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [
            nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
            for kind, src in cells
        ]
        path = HERE / name
        nbformat.write(nb, path)
        if run:
            execute(path)
        out.append(path)
    return out


if __name__ == "__main__":
    import sys

    for p in build(run="--no-execute" not in sys.argv):
        print(p)
