"""Write the example notebooks (unexecuted) from the cell sources below: `python examples/notebooks/build_notebooks.py`.

The test suite executes every notebook here (tests/test_notebooks.py), so they never rot."""
from __future__ import annotations

from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {
    "01_frequency_scaling.ipynb": [
        ("md", "# Frequency scaling: what a draft design measured at 200 MHz does at 300 MHz\n\n"
               "The HBM runs in its own 450 MHz clock domain and does not scale with the kernel clock, so a linear "
               "projection of the measured time is optimistic. This notebook reproduces the README's frequency-study "
               "figure with the Python API only."),
        ("code", "import hwmodel as hw\n\nstudy = hw.freq_study(\"draft-u280\", measured_mhz=200, target_mhz=300, ctx=512)\n"
                 "linear_ms, model_ms = study.token.linear_s * 1e3, study.token.model_s * 1e3\n"
                 "floor_ms = study.bandwidth_floor_s * 1e3\n"
                 "print(f\"linear projection {linear_ms:.2f} ms/token, cycle model {model_ms:.2f} ms/token, \"\n"
                 "      f\"HBM floor {floor_ms:.2f} ms\")"),
        ("code", "for op in study.operators:\n"
                 "    print(f\"{op.op:12s} {op.verdict:24s} clock efficiency {op.efficiency:.2f}\")"),
        ("code", "import matplotlib\nmatplotlib.use(\"Agg\")\nimport matplotlib.pyplot as plt\n\n"
                 "mhz = [f / 1e6 for f in study.curve_hz]\n"
                 "plt.plot(mhz, [s * 1e3 for s in study.curve_model_s], marker=\"o\", label=\"cycle model\")\n"
                 "plt.axhline(floor_ms, ls=\"--\", color=\"gray\", label=\"HBM floor\")\n"
                 "plt.xlabel(\"kernel clock (MHz)\"); plt.ylabel(\"ms/token\"); plt.legend();"),
    ],
    "02_draft_design_pareto.ipynb": [
        ("md", "# Explore a draft design and its Pareto front\n\n"
               "Decode time of the built-in draft accelerator against context, then a small design-space sweep "
               "(MAC lanes x HBM ports x clock) and its latency / energy / DSP front. `hw.sweep` also writes the "
               "interactive `explorer.html` next to the results."),
        ("code", "import tempfile, pathlib\nimport hwmodel as hw\n\n"
                 "eng = hw.streaming_engine(\"draft-u280\")\n"
                 "for row in hw.decode_curve(eng, [0, 512, 2048]):\n"
                 "    print(f\"ctx {row['ctx']:5d}: {row['seconds'] * 1e3:.3f} ms/token, {row['power_w']:.1f} W\")"),
        ("code", "work = pathlib.Path(tempfile.mkdtemp())\n"
                 "spec = work / \"sweep.toml\"\n"
                 "spec.write_text('''[sweep]\nname = \"notebook\"\nevaluator = \"streaming-decode\"\n[parameters]\n"
                 "design = \"draft-u280\"\nctx = 512\nclock_mhz = [200, 300]\n[parameters.linear]\n"
                 "lanes = [1024, 2048, 4096]\nports = [16, 24]\n[objectives]\nlatency_s = \"min\"\n"
                 "energy_per_token_j = \"min\"\ndsp_util = \"min\"\n''')\n"
                 "report = hw.sweep(spec, work / \"out\", workers=1)\n"
                 "print(len(report.feasible), \"feasible points;\", {k: len(v) for k, v in report.fronts.items()})\n"
                 "print(\"explorer:\", (work / \"out\" / \"explorer.html\").exists())"),
        ("code", "objs, front = next(iter(report.fronts.items()))\n"
                 "for i in front:\n"
                 "    r = report.rows[i].row\n"
                 "    print({k: r.params[k] for k in sorted(r.params)}, {m: round(r.metrics[m], 6) for m in objs})"),
    ],
    "03_draft_on_other_devices.ipynb": [
        ("md", "# What if the draft ran on another device?\n\n"
               "System A (step-wise speculative reasoning) replays the same GSM8K trace with the draft on the "
               "streaming U280 design, the instruction-driven U280, a V80 and an H200. Every engine is chosen by "
               "the capabilities its role needs, never by device kind."),
        ("code", "import hwmodel as hw\n\ntrace = hw.generate_trace(\"gsm8k\", limit=8)\n"
                 "base = hw.replay(trace, \"baseline\").summary\n"
                 "print(f\"baseline (3 GPUs): {base.latency_total_s:.2f} s\")"),
        ("code", "for draft in (\"fpga\", \"fpga-instruction\", \"fpga-v80\"):\n"
                 "    s = hw.replay(trace, \"heteroreason\", draft=draft).summary\n"
                 "    print(f\"T1+T2, draft on {draft:16s}: {base.latency_total_s / s.latency_total_s:.3f}x, \"\n"
                 "          f\"{s.energy_per_token_j:.2f} J/token\")\n"
                 "s = hw.replay(trace, \"step-ahead\", draft=\"h200\").summary\n"
                 "print(f\"T2, draft on h200: {base.latency_total_s / s.latency_total_s:.3f}x\")"),
    ],
    "04_serving_whatif.ipynb": [
        ("md", "# A serving what-if: GPU prefill, FPGA decode\n\n"
               "The same request stream (LLaMA2-7B, 1,536-token prompts, 512 output tokens, at saturation) on an "
               "8 x A100 node and on an A100 + 7 x U280 node, and on one with V80 decoders."),
        ("code", "import hwmodel as hw\n\nreqs = hw.requests(120, prompt=\"1536\", output=\"512\", seed=0)\n"
                 "runs = {c: hw.serve(c, reqs) for c in (\"8xa100\", \"a100+7xu280\", \"a100+7xv80\")}\n"
                 "ref = runs[\"8xa100\"].metrics.throughput_tok_per_s\n"
                 "for c, r in runs.items():\n"
                 "    m = r.metrics\n"
                 "    print(f\"{c:12s} {m.throughput_tok_per_s:7.1f} tok/s ({m.throughput_tok_per_s / ref:.2f}x), \"\n"
                 "          f\"TTFT p90 {m.ttft_s.p90:.2f} s\")"),
        ("code", "rows = runs[\"a100+7xu280\"].records()\nprint(rows[0])"),
    ],
}


def build() -> list[Path]:
    out = []
    for name, cells in NOTEBOOKS.items():
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nb.cells = [nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
                    for kind, src in cells]
        path = HERE / name
        nbformat.write(nb, path)
        out.append(path)
    return out


if __name__ == "__main__":
    for p in build():
        print(p)
