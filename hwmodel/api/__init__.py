"""The Python API: everything the ``hwmodel`` command does, as functions returning typed results.

    import hwmodel as hw
    eng = hw.streaming_engine("draft-u280")            # or hw.gpu_engine / hw.instruction_engine / hw.make_engine(...)
    hw.decode(eng, ctx=512).seconds                   # one token, cycle-level
    hw.physical_bounds("qwen2.5-0.5b", "u280", ctx=0).decode_floor_peak_s
    trace = hw.generate_trace("gsm8k", limit=20)
    hw.replay(trace, "heteroreason").summary.speedup_over(...)
    hw.serve("a100+7xu280", n=200).metrics.throughput_tok_per_s
    hw.sweep("examples/sweeps/draft_u280.toml", "out/sweep").fronts
    hw.freq_study("draft-u280", measured_mhz=200, target_mhz=300)
    hw.validation_table().rows

Every result has ``to_dict()`` (JSON-ready) and, where it is a table, ``records()`` (a list of flat dicts, what
``pandas.DataFrame(records)`` takes). Specs come from the built-in library plus the directories given to
:func:`use_spec_dirs` (the CLI's ``--spec-dir``). Errors a user can act on raise :class:`hwmodel.HwmodelError`
with a one-line message. The CLI is a thin layer over these functions and the modules they call
(docs/api.md).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hwmodel import _API as _API_NAMES
from hwmodel.api.progress import ProgressBar
from hwmodel.api.reasoning import Replay, generate_trace, read_trace, replay  # noqa: F401  (hw.*: __all__)
from hwmodel.api.serving import Load, Saturation, Serving, load, requests, saturation, serve  # noqa: F401  (hw.*)
from hwmodel.errors import HwmodelError


# ================================================================================================ specs
def use_spec_dirs(dirs: Iterable[str | Path]) -> None:
    """Add user spec directories (TOML files: LLMs, boards, GPUs, links) in front of the built-in ones."""
    from hwmodel.specs import set_extra_spec_dirs

    paths = tuple(Path(d) for d in dirs)
    for p in paths:
        if not p.is_dir():
            raise HwmodelError(f"spec directory '{p}' does not exist or is not a directory")
    set_extra_spec_dirs(paths)


def spec_library() -> Any:
    """The spec library (built-in specs and the user directories): ``.names(kind)``, ``.llm(name)``, ..."""
    from hwmodel.specs import library

    return library()


def llm(name: str) -> Any:
    """An LLM spec by name (``hwmodel specs list``)."""
    return spec_library().llm(name)


def board(name: str) -> Any:
    """An FPGA board spec by name."""
    return spec_library().board(name)


def gpu(name: str) -> Any:
    """A GPU spec by name."""
    return spec_library().gpu(name)


def import_hf_config(config: str | Path, name: str, out_dir: str | Path | None = None) -> Path:
    """Write a sourced LLM TOML from a Hugging Face ``config.json`` (as ``hwmodel specs import-hf``)."""
    from hwmodel.hf_import import import_hf

    return Path(import_hf(Path(config), name, Path(out_dir) if out_dir else Path(".")))


_TABLES: dict[int, tuple[Any, dict[str, Any]]] = {}  # id(spec) -> (spec, the table it was built from)


def with_fields(spec: Any, changes: Mapping[str, Any] | None = None, /, **fields: Any) -> Any:
    """A copy of a loaded spec (system, cluster, board, GPU, link, LLM) with some fields changed,
    validated exactly like a file (:func:`hwmodel.spec_extends.override`): ``changes`` is a nested dict or dotted
    keys (``{"devices.fpga.clock_hz": 250e6}``), ``fields`` top-level fields or tables
    (``devices={"fpga": {"clock_hz": 250e6}}``). A bare value for a sourced field is sourced as an override from
    Python; every other field keeps its file's source (``spec.sources``)."""
    from hwmodel.schema import build, read_toml
    from hwmodel.spec_extends import override

    held = _TABLES.get(id(spec))
    if held is not None and held[0] is spec:
        table = held[1]
    else:
        origin = getattr(spec, "origin", "")
        if not origin or not Path(origin).is_file():
            raise HwmodelError(
                f"with_fields needs a spec loaded from a TOML file (this {type(spec).__name__} has no origin file)"
            )
        table = read_toml(Path(origin))
    merged = override(table, {**(changes or {}), **fields}, type(spec))
    where = f"{getattr(spec, 'origin', '') or getattr(spec, 'name', 'spec')} (with overrides from Python)"
    out = build(type(spec), merged, path=where)
    _TABLES[id(out)] = (out, merged)
    return out


def system(spec_name: str | Path = "config1", changes: Mapping[str, Any] | None = None, /, **fields: Any) -> Any:
    """A system-A configuration (built-in name or TOML), optionally with fields changed (:func:`with_fields`):
    ``hw.system("config1", devices={"fpga-v80": {"clock_hz": 250e6}})``; pass it to :func:`replay`."""
    from hwmodel.reasoning.system import load_system

    spec = load_system(str(spec_name))
    return with_fields(spec, changes, **fields) if (changes or fields) else spec


def cluster_spec(
    spec_name: str | Path = "a100+7xu280", changes: Mapping[str, Any] | None = None, /, **fields: Any
) -> Any:
    """A serving cluster (built-in name or TOML), optionally with fields changed (:func:`with_fields`); pass it
    to :func:`serve` or :func:`saturation`."""
    from hwmodel.serving.cluster import load_cluster

    spec = load_cluster(spec_name)
    return with_fields(spec, changes, **fields) if (changes or fields) else spec


# ================================================================================================ engines
def streaming_engine(design: str | Path, clock_mhz: float | None = None) -> Any:
    """The cycle-level streaming FPGA decoder for a built-in design name or a design TOML (``fpga decode``)."""
    from fpga.streaming.engine import StreamingEngine

    return StreamingEngine(design, clock_hz=None if clock_mhz is None else clock_mhz * 1e6)


def instruction_engine(
    design: str | Path = "glitches-u280", prefetch_ratio: int | None = None, clock_mhz: float | None = None
) -> Any:
    """The instruction-driven FPGA accelerator (GLITCHES-style) for a design name or TOML."""
    from fpga.instruction.engine import InstructionEngine

    return InstructionEngine(
        design, prefetch_ratio=prefetch_ratio, clock_hz=None if clock_mhz is None else clock_mhz * 1e6
    )


def gpu_engine(gpu_name: str, llm_name: str, framework: str, weight_bits: int | None = None) -> Any:
    """The calibrated GPU model of ``llm_name`` on ``gpu_name`` under ``framework`` (``hwmodel gpu frameworks``):
    required, because the papers' settings differ (GLITCHES' A100 runs Hugging Face ``"hf"``, RSD's GPUs ``"vllm"``,
    and the two differ by about 1.6x on an A100)."""
    from gpu.latency import GpuEngine

    return GpuEngine(gpu_name, llm_name, framework=framework, weight_bits=weight_bits)


def make_engine(backend: str, llm_name: str, **settings: Any) -> Any:
    """Any back-end by name, as a system spec's ``[devices.NAME]`` entry would build it, e.g.
    ``make_engine("streaming", "qwen2.5-0.5b", design="draft-v80")`` or
    ``make_engine("gpu", "qwen2.5-0.5b", gpu="h200", framework="vllm")``."""
    from hwmodel.backends import DeviceEntry, build_device
    from hwmodel.schema import build

    src = "hwmodel.api.make_engine argument"
    fields = {"attach": "host-driven", **settings, "backend": backend}
    table = {k: (v if k == "label" else {"value": v, "source": src}) for k, v in fields.items() if v is not None}
    entry = build(DeviceEntry, table, path="hwmodel.api.make_engine")
    return build_device(entry, llm_name, where="hwmodel.api.engine").engine


def capabilities(eng: Any) -> list[str]:
    """The capabilities an engine declares (``hwmodel.engine.Capability`` values)."""
    from hwmodel.engine import capabilities as caps

    return sorted(c.value for c in caps(eng))


@dataclasses.dataclass(frozen=True)
class OpTiming:
    """One operation on one engine at one point (figures from :mod:`hwmodel.quantities`, as the CLI prints them)."""

    engine: str
    operation: str
    n_tokens: int
    ctx: int
    seconds: float
    power_w: float

    @property
    def tokens_per_s(self) -> float:
        return self.n_tokens / self.seconds if self.seconds > 0 else math.inf

    @property
    def energy_j(self) -> float:
        return self.seconds * self.power_w

    @property
    def tokens_per_s_per_w(self) -> float:
        return self.n_tokens / self.energy_j if self.energy_j > 0 else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            **dataclasses.asdict(self),
            "tokens_per_s": self.tokens_per_s,
            "energy_j": self.energy_j,
            "tokens_per_s_per_w": self.tokens_per_s_per_w,
        }


def decode(eng: Any, ctx: int = 0) -> OpTiming:
    """Decode one token at context ``ctx`` on any engine (power at ``ctx``: :func:`hwmodel.quantities.decode_power_w`)."""
    from hwmodel.quantities import decode_point

    p = decode_point(eng, ctx)
    return OpTiming(p.engine, "decode", 1, ctx, p.seconds_per_token, p.power_w)


def prefill(eng: Any, n_tokens: int, ctx: int = 0) -> OpTiming:
    """Prefill ``n_tokens`` new tokens after ``ctx`` cached ones on any engine."""
    from hwmodel.quantities import prefill_figures

    f = prefill_figures(eng, n_tokens, ctx)
    return OpTiming(str(eng.name), "prefill", n_tokens, ctx, f["seconds"], f["power_w"])


def decode_window(eng: Any, input_tokens: int = 1536, output_tokens: int = 512, stride: int = 32) -> Any:
    """Mean decode figures of ``output_tokens`` steps after an ``input_tokens`` prompt, as published single-device
    figures are quoted (``DecodeFigures``: seconds_per_token, power_w, tokens_per_s, energy_per_token_j,
    tokens_per_s_per_w); the validation rows and ``--output-tokens`` in the CLI call the same function."""
    from hwmodel.quantities import decode_window as _window

    return _window(eng, input_tokens, output_tokens, stride)


def decode_curve(
    eng: Any, ctxs: Sequence[int], *, exact: bool = False, progress: bool | None = None
) -> list[dict[str, Any]]:
    """Decode time at each context, as records (``ctx``, ``seconds``, ``tokens_per_s``, and the power and energy of
    :func:`decode` wherever a context is evaluated by itself).

    On a streaming FPGA, contexts denser than the serving simulator's 32-token grid come from its decode table
    (:class:`hwmodel.serving.devices.DecodeTable`, grid points simulated, linear in between, as a serving run reads
    them: one cycle-level token per 32 contexts). Everywhere else each context asked for is evaluated once -- the
    fewest runs: the GPU model is vectorized per block of contexts, and the instruction-driven FPGA's step time
    changes every few tokens, so the serving simulator's step table would simulate nearly every context in
    between -- and the records carry the power and energy of :func:`decode` too. ``exact=True`` always evaluates
    every context; ``progress`` shows a progress bar (default: in a notebook only)."""
    from hwmodel.quantities import engine_kind
    from hwmodel.serving.devices import STEP_GRID_TOKENS, DecodeTable

    cs = [int(c) for c in ctxs]
    if any(c < 0 for c in cs):
        raise HwmodelError(f"ctx must be >= 0, got {min(cs)}")
    dense = len(cs) > 1 and (max(cs) - min(cs)) / (len(cs) - 1) < STEP_GRID_TOKENS
    bar = ProgressBar(progress, len(cs), f"decode curve on {eng.name}")
    out = []
    try:
        if exact or not dense or engine_kind(eng) != "streaming":
            for c in cs:
                out.append(decode(eng, c).to_dict())
                bar.advance()
            return out
        limit = getattr(eng, "max_ctx", None)  # the longest context held; the table takes the largest accepted
        table = DecodeTable(eng.decode_s, "grid", limit - 1 if limit else None)
        for c in cs:
            s = table.step_s(c)
            out.append({"engine": str(eng.name), "ctx": c, "seconds": s, "tokens_per_s": 1.0 / s})
            bar.advance()
        return out
    finally:
        bar.close()


def physical_bounds(
    llm_name: str,
    device: str,
    weight_bits: int | None = None,
    kv_bits: int | None = None,
    ctx: int = 0,
    prefill_tokens: int = 1024,
) -> Any:
    """Physical floors of one point (``hwmodel bounds``); ``.as_dict()`` for JSON."""
    from hwmodel.bounds import bounds as _bounds
    from hwmodel.bounds import default_bits

    dev = spec_library().device(device)
    wb, kb = default_bits(dev)
    return _bounds(llm(llm_name), dev, weight_bits or wb, kv_bits or kb, ctx, prefill_tokens)


# ================================================================================================ studies
def sweep(
    spec: str | Path,
    out_dir: str | Path,
    workers: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
) -> Any:
    """Run (or resume) a design-space sweep and write its report, fronts and Pareto explorer; returns the
    :class:`hwmodel.dse.SweepReport` (``.fronts``, ``.feasible``, ``.column(metric)``)."""
    from hwmodel.dse import load_plan, read_report, run_sweep, write_report

    plan = load_plan(Path(spec))
    run_sweep(plan, Path(out_dir), workers=workers, scheduler=scheduler, progress=progress)
    rep = read_report(plan, Path(out_dir))
    write_report(rep, Path(out_dir))
    return rep


def freq_study(design: str, measured_mhz: float = 200.0, target_mhz: float = 300.0, ctx: int = 512) -> Any:
    """What a streaming design measured at one clock does at another (``hwmodel study freq``); ``.as_dict()``."""
    from hwmodel.dse.freq import run_freq_study

    return run_freq_study(design, measured_mhz * 1e6, target_mhz * 1e6, ctx)


def validation_table(cv: bool = True, system_a_limit: int | None = 40, system_b_requests: int = 200) -> Any:
    """Every published or measured figure beside the model (``hwmodel validate``): ``.rows`` and ``.as_dict()``."""
    from hwmodel.validate.table import build

    return build(cv=cv, system_a_limit=system_a_limit, system_b_requests=system_b_requests)


def reproduce(study: str | None = None, out_dir: str | Path = "out") -> int:
    """Run one study of ``hwmodel reproduce`` (all of them when ``study`` is None); returns the exit code."""
    from click.testing import CliRunner

    from hwmodel.cli import main

    args = ["reproduce", "--out", str(out_dir)] + ([study] if study else [])
    res = CliRunner().invoke(main, args, catch_exceptions=False)
    if res.exit_code:
        raise HwmodelError(res.output.strip().splitlines()[-1] if res.output.strip() else f"exit {res.exit_code}")
    return res.exit_code


# the public names, listed once in hwmodel/__init__.py (its lazy loader serves exactly these)
__all__ = list(_API_NAMES)


def _attach_field_docs() -> None:
    """``help()`` of every result type lists its fields with units (hwmodel.result_fields, also docs/api.md)."""
    from hwmodel.result_fields import attach_docs

    attach_docs()


_attach_field_docs()
