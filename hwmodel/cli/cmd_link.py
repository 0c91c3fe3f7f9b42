"""`hwmodel link transfer` and `hwmodel migrate`: link timing and KV-cache migration overlapped with prefill."""

from __future__ import annotations

import re
from typing import Any

import click

from hwmodel.cli.base import SpecName, console, echo_json, group, json_option, main
from hwmodel.units import fmt_bytes, fmt_s

link_group = group("link")

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMGT]i?B|B)?\s*$")
_UNITS = {
    None: 1,
    "B": 1,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "KiB": 2**10,
    "MiB": 2**20,
    "GiB": 2**30,
    "TiB": 2**40,
}


class ByteSize(click.ParamType):
    """A size in bytes: a number, optionally with a unit (KB, MB, GB decimal; KiB, MiB, GiB binary), that comes to
    a whole, positive number of bytes of at most :data:`hwmodel.domains.MAX_BYTES` (``0.5`` or ``1.0001KB`` are
    refused, not rounded)."""

    name = "bytes"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from hwmodel.domains import DomainError, byte_count

        if isinstance(value, (int, float)):
            n = float(value)
        else:
            m = _SIZE_RE.match(str(value))
            if not m:
                self.fail(f"expected a size like 4096, 16MB or 1.5GiB, got {value!r}", param, ctx)
            n = float(m.group(1)) * _UNITS[m.group(2)]
        try:
            return byte_count(n, "size")
        except DomainError as exc:
            self.fail(
                f"expected {exc.expected}, got {value!r}" + (f" (= {n:g} B)" if str(value) != f"{n:g}" else ""),
                param,
                ctx,
            )


@link_group.command("transfer")
@click.option("--bytes", "n_bytes", type=ByteSize(), required=True, help="Bytes to move (e.g. 400MB, 1GiB).")
@click.option(
    "--path",
    "path",
    type=click.Choice(["direct", "host", "p2p"]),
    default="direct",
    show_default=True,
    help="direct: one DMA over --link; host: GPU -> host -> FPGA; p2p: GPU -> FPGA through a switch.",
)
@click.option("--link", "link", type=SpecName("link"), default=None, help="The link of a direct path.")
@click.option("--gpu", "gpu", type=SpecName("gpu"), default=None, help="Source GPU (its host link) for host/p2p.")
@click.option(
    "--fpga",
    "fpga",
    type=SpecName("fpga-board"),
    default=None,
    help="Destination FPGA board (its host link) for host/p2p.",
)
@click.option(
    "--chunk-bytes",
    type=ByteSize(),
    default="4MiB",
    show_default=True,
    help="Staging-buffer chunk of a host-staged path.",
)
@json_option
def transfer_cmd(n_bytes: float, path: str, link: Any, gpu: Any, fpga: Any, chunk_bytes: float, as_json: bool) -> None:
    """Time to move BYTES over a link or a GPU -> FPGA path (latency + bytes / effective bandwidth per DMA)."""
    from hwmodel.errors import HwmodelError
    from hwmodel.specs import library
    from interconnect.pcie import path_between

    lib = library()
    if path == "direct":
        if link is None:
            raise HwmodelError("a direct transfer needs --link (e.g. --link pcie-gen3-x16)")
        route = path_between("direct", link)
    else:
        if gpu is None or fpga is None:
            raise HwmodelError(f"a {path} transfer needs --gpu and --fpga (their host links are the two ends)")
        route = path_between(path, lib.link(gpu.host_link), lib.link(fpga.host_link))
    t = route.time_s(n_bytes, chunk_bytes)
    rate = n_bytes / t if t > 0 else 0.0
    if as_json:
        echo_json(
            {"path": path, "route": route.description, "bytes": n_bytes, "time_s": t, "effective_bw_bytes_per_s": rate}
        )
        return
    click.echo(f"{fmt_bytes(n_bytes)} via {route.description}: {fmt_s(t)} ({rate / 1e9:.2f} GB/s effective)")


@main.command("migrate")
@click.option("--llm", "llm", type=SpecName("llm"), required=True, help="LLM whose KV cache moves.")
@click.option("--prompt", "prompt_tokens", type=click.IntRange(min=1), required=True, help="Prompt tokens prefilled.")
@click.option("--gpu", "gpu", type=SpecName("gpu"), required=True, help="GPU that prefills.")
@click.option("--fpga", "fpga", type=SpecName("fpga-board"), required=True, help="FPGA board that will decode.")
@click.option(
    "--path",
    "path",
    type=click.Choice(["host", "p2p"]),
    default="host",
    show_default=True,
    help="host: GPU -> host memory -> FPGA (GLITCHES); p2p: GPU -> FPGA through a PCIe switch.",
)
@click.option(
    "--framework",
    type=click.Choice(["hf", "vllm", "vllm-eager"]),
    default="hf",
    show_default=True,
    help="Framework of the GPU prefill (the serving system's GPUs run HF).",
)
@click.option(
    "--kv-bits",
    type=click.Choice(["4", "8", "16"]),
    default="8",
    show_default=True,
    help="KV precision on the FPGA (quantized on the GPU before it leaves).",
)
@click.option(
    "--host-thread",
    type=click.Choice(["shared", "dedicated"]),
    default="shared",
    show_default=True,
    help="shared: the thread that issues the prefill also drives the staging; dedicated: its own thread.",
)
@click.option(
    "--chunk-bytes",
    type=ByteSize(),
    default="4MiB",
    show_default=True,
    help="Staging-buffer chunk of the host-staged path.",
)
@json_option
def migrate_cmd(
    llm: Any,
    prompt_tokens: int,
    gpu: Any,
    fpga: Any,
    path: str,
    framework: str,
    kv_bits: str,
    host_thread: str,
    chunk_bytes: float,
    as_json: bool,
) -> None:
    """KV-cache migration GPU -> FPGA overlapped with the prefill, layer by layer: prefill time, transfer time and
    the exposed part (what the FPGA waits for after the prefill)."""
    from gpu.latency import GpuEngine
    from interconnect.pcie import kv_migration

    eng = GpuEngine(gpu, llm, framework=framework)
    m = kv_migration(
        eng, fpga, prompt_tokens, path=path, kv_bits=int(kv_bits), chunk_bytes=chunk_bytes, host_thread=host_thread
    )
    if as_json:
        echo_json(m.as_dict())
        return
    from rich.table import Table

    verdict = (
        "mostly hidden" if m.hidden_fraction >= 0.9 else ("partly hidden" if m.hidden_fraction >= 0.5 else "exposed")
    )
    t = Table(
        "quantity",
        "value",
        title=f"KV migration: {m.llm}, {m.prompt_tokens}-token prompt, {m.gpu} ({framework}) -> {m.fpga}, {path} path",
    )
    for k, v in [
        ("KV bytes (all layers)", f"{fmt_bytes(m.kv_bytes)} at {m.kv_bits} bit"),
        ("prefill (with KV quantization)", fmt_s(m.prefill_s)),
        ("host done issuing the prefill", fmt_s(m.host_done_s)),
        ("transfer alone", fmt_s(m.transfer_s)),
        ("exposed after the prefill", fmt_s(m.exposed_s)),
        ("prefill + migration", fmt_s(m.total_s)),
        ("hidden behind the prefill", f"{100 * m.hidden_fraction:.0f} % ({verdict})"),
    ]:
        t.add_row(k, v)
    console().print(t)
