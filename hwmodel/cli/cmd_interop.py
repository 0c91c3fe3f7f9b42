"""`hwmodel export vidur`: an engine's per-operator timing as a Vidur profiling bundle (mlp.csv, attention.csv)."""

from __future__ import annotations

from pathlib import Path

import click

from hwmodel.cli.base import SpecName, group

export = group("export", "Export hwmodel timings in other tools' formats (serving simulators).")


@export.command("vidur")
@click.option("--design", default=None, help="Streaming FPGA design name or TOML (the engine to export).")
@click.option("--gpu", "gpu", type=SpecName("gpu"), default=None, help="Or a GPU spec name (with --llm).")
@click.option("--llm", "llm", type=SpecName("llm"), default=None, help="LLM spec name (with --gpu).")
@click.option("--framework", default="vllm", show_default=True, help="Serving framework of the GPU engine.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for mlp.csv and attention.csv (Vidur's data/profiling/compute/<device>/<model>/).",
)
def vidur_cmd(design: str | None, gpu: object, llm: object, framework: str, out_dir: Path) -> None:
    """Write Vidur's compute profile (mlp.csv: per-layer operator times vs tokens; attention.csv: attention vs
    batch, KV-cache size and prefill chunk), from the cycle-level FPGA model or the calibrated GPU model
    (docs/api.md, "Interop")."""
    from hwmodel.errors import HwmodelError
    from hwmodel.interop.vidur import export as write

    if (design is None) == (gpu is None):
        raise HwmodelError("export vidur: give either --design (a streaming FPGA design) or --gpu and --llm")
    if design is not None:
        from fpga.streaming.engine import StreamingEngine

        engine = StreamingEngine(design)
    else:
        if llm is None:
            raise HwmodelError("export vidur: --gpu needs --llm")
        from gpu.latency import GpuEngine

        engine = GpuEngine(gpu, llm, framework=framework)  # type: ignore[arg-type]
    click.echo(f"simulating {engine.name} ...", err=True)
    paths = write(engine, out_dir)
    click.echo("wrote " + ", ".join(str(p) for p in paths))
