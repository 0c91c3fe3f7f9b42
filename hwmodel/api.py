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
from hwmodel.errors import HwmodelError
from hwmodel.io import jsonable


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
    bar = _Bar(progress, len(cs), f"decode curve on {eng.name}")
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


def _in_notebook() -> bool:
    """Running in a Jupyter kernel (where ``progress=None`` means a progress line)."""
    import sys

    shell = sys.modules.get("IPython")
    ip = shell.get_ipython() if shell is not None else None  # type: ignore[attr-defined]
    return type(ip).__name__ == "ZMQInteractiveShell"


class _Bar:
    """Progress of a long call: a rich bar in a terminal, one updated output line in a notebook (its last state
    stays in the notebook: ``what: k/total``), nothing when ``enabled`` is False. ``enabled=None``: on in a
    notebook, off elsewhere."""

    def __init__(self, enabled: bool | None, total: int, what: str) -> None:
        self._p = self._line = None
        self._done, self._total, self._what = 0, total, what
        notebook = _in_notebook()
        if enabled is None:
            enabled = notebook
        if enabled and notebook:
            from IPython.display import Pretty, display

            self._line = display(Pretty(f"{what}: 0/{total}"), display_id=True)
        elif enabled:
            from rich.progress import Progress

            self._p = Progress(transient=True)
            self._p.start()
            self._task = self._p.add_task(what, total=total)

    def advance(self, n: int = 1) -> None:
        self._done += n
        if self._p is not None:
            self._p.advance(self._task, n)
        elif self._line is not None:
            from IPython.display import Pretty

            self._line.update(Pretty(f"{self._what}: {self._done}/{self._total}"))

    def close(self) -> None:
        if self._p is not None:
            self._p.stop()


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


# ================================================================================================ system A
def generate_trace(
    dataset: str,
    target: str = "qwen2.5-math-7b",
    backtracking: bool = True,
    *,
    limit: int | None = None,
    seed: int | None = None,
) -> Any:
    """A reasoning trace of ``dataset`` (math500, gsm8k, gaokao2023en, olympiadbench) (``workload generate``)."""
    from hwmodel.workload.generator import DEFAULT_SEED, generate

    return generate(dataset, target, backtracking, seed=DEFAULT_SEED if seed is None else seed, limit=limit)


def read_trace(path: str | Path) -> Any:
    """A trace file (JSONL, optionally gzipped), validated line by line."""
    from hwmodel.workload.traceio import read_trace as _read

    return _read(Path(path))


@dataclasses.dataclass(frozen=True)
class Replay:
    """A trace replayed under one policy on one system: per-problem metrics and their summary."""

    policy: str
    system: str
    rows: tuple[Any, ...]
    summary: Any

    def records(self) -> list[dict[str, Any]]:
        return [jsonable(r) for r in self.rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "system": self.system,
            "summary": jsonable(self.summary),
            "problems": len(self.rows),
        }


def replay(
    trace: Any,
    policy: str = "heteroreason",
    system: Any = "config1",
    draft: str | None = None,
    *,
    seeds: int | None = None,
    first_seed: int | None = None,
    limit: int | None = None,
    backtracking: bool = True,
    progress: bool | None = None,
) -> Any:
    """Replay ``trace`` (a Trace or a path) with a system-A policy (``hwmodel reason policies``) on a built-in
    system, a system TOML or a spec from :func:`system`; ``draft`` names another device of the system for the draft
    role.

    With ``seeds=N``, ``trace`` is a dataset name (math500, gsm8k, gaokao2023en, olympiadbench): ``N`` traces of
    ``limit`` problems are generated (seeds ``first_seed ..``) and replayed, and the result is a
    :class:`hwmodel.replicas.Replicas` (``summary[metric]``: mean and 95 % interval; ``markdown``, ``plot``).
    ``progress`` shows a bar (per problem, or per seed; default: in a notebook only)."""
    from hwmodel.reasoning.metrics import summarize
    from hwmodel.reasoning.runner import run_trace
    from hwmodel.reasoning.system import build_platform, load_system

    if seeds is not None:
        from hwmodel.reasoning.replicas import run_seeds

        if not isinstance(trace, str):
            raise HwmodelError("replay(..., seeds=N) takes a dataset name as trace (each seed generates its trace)")
        bar = _Bar(progress, seeds, f"replaying {seeds} traces of {trace}")
        try:
            return run_seeds(
                trace,
                policy,
                system,
                seeds,
                first_seed=first_seed,
                limit=limit,
                draft=draft,
                backtracking=backtracking,
                on_seed=lambda _s: bar.advance(),
            )
        finally:
            bar.close()
    if isinstance(trace, (str, Path)):
        trace = read_trace(trace)
    spec = load_system(system) if isinstance(system, (str, Path)) else system
    platform = build_platform(spec, policy, draft=draft)
    bar = _Bar(progress, len(trace.problems), f"replaying {len(trace.problems)} problems")
    try:
        rows = tuple(run_trace(trace, policy, platform, spec.name, progress=bar.advance))
    finally:
        bar.close()
    return Replay(policy, spec.name, rows, summarize(rows))


# ================================================================================================ system B
@dataclasses.dataclass(frozen=True)
class Serving:
    """A cluster run: the metrics (throughput, TTFT/TPOT percentiles, energy, per-device use) and each request."""

    cluster: str
    scheduler: str
    metrics: Any
    result: Any

    def records(self) -> list[dict[str, Any]]:
        from hwmodel.serving.metrics import request_arrays

        arrays = request_arrays(self.result)
        keys = list(arrays)
        n = len(arrays[keys[0]]) if keys else 0
        return [{k: jsonable(arrays[k][i]) for k in keys} for i in range(n)]

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "scheduler": self.scheduler, "metrics": jsonable(self.metrics)}


def requests(
    n: int, rate_per_s: float = math.inf, prompt: str = "1536", output: str = "512", seed: int = 0
) -> tuple[Any, ...]:
    """A Poisson request stream; lengths as the CLI writes them (``1536``, ``uniform:A:B``, ``lognormal:M:S:MAX``)."""
    from hwmodel.workload.requests import parse_length, poisson_stream

    return poisson_stream(n, rate_per_s, parse_length(prompt, "prompt"), parse_length(output, "output"), seed)


@dataclasses.dataclass(frozen=True)
class Load:
    """A request rate given as a fraction of the cluster's saturation rate (:func:`load`)."""

    fraction: float


def load(fraction: float) -> Load:
    """``rate_per_s=hw.load(0.8)``: 80 % of the saturation request rate of the cluster and request lengths the
    call serves (:func:`saturation`, computed once per setting)."""
    if not (0 < fraction and math.isfinite(fraction)):
        raise HwmodelError(f"load fraction must be a positive finite number, got {fraction}")
    return Load(float(fraction))


@dataclasses.dataclass(frozen=True)
class Saturation:
    """The most a cluster sustains with every request queued at t = 0 (``request_rate_per_s`` is the rate
    :func:`load` scales). Under an offered load below saturation the measured
    throughput is below ``fraction x throughput_tok_per_s`` too: the window includes the ramp-up and the drain of a
    finite stream (at 80 % load of ``a100+7xu280`` about 0.73x)."""

    cluster: str
    scheduler: str
    requests: int
    prompt: str
    output: str
    request_rate_per_s: float
    throughput_tok_per_s: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def saturation(
    cluster: Any = "a100+7xu280",
    *,
    n: int = 200,
    prompt: str = "1536",
    output: str = "512",
    scheduler: str = "fcfs",
    seed: int = 0,
) -> Saturation:
    """The saturation rate of ``cluster`` for these request lengths: ``n`` requests all queued at t = 0."""
    spec = _cluster_spec(cluster)
    key = (repr(spec), n, prompt, output, scheduler, seed)
    if key not in _SATURATION:
        s = serve(spec, n=n, rate_per_s=math.inf, prompt=prompt, output=output, scheduler=scheduler, seed=seed)
        m = s.metrics
        _SATURATION[key] = Saturation(
            spec.name, scheduler, m.requests, prompt, output, m.request_rate_per_s, m.throughput_tok_per_s
        )
    return _SATURATION[key]


_SATURATION: dict[tuple[Any, ...], Saturation] = {}


def _cluster_spec(cluster: Any) -> Any:
    from hwmodel.serving.cluster import load_cluster

    return load_cluster(cluster) if isinstance(cluster, (str, Path)) else cluster


def serve(
    cluster: Any = "a100+7xu280",
    reqs: Sequence[Any] | None = None,
    *,
    n: int = 200,
    rate_per_s: float | Load = math.inf,
    prompt: str = "1536",
    output: str = "512",
    seed: int = 0,
    scheduler: str = "fcfs",
    seeds: int | None = None,
    progress: bool | None = None,
) -> Any:
    """Run a request stream on a built-in cluster, a cluster TOML or a spec from :func:`cluster_spec`
    (``hwmodel serve run``). ``rate_per_s`` is requests/s or ``hw.load(f)`` (a fraction of :func:`saturation`).

    With ``seeds=N`` the stream is generated under seeds ``seed .. seed + N - 1`` and the result is a
    :class:`hwmodel.replicas.Replicas` (``summary["ttft_s.p90"]``: mean and 95 % interval; ``markdown``, ``plot``);
    otherwise a :class:`Serving`. ``progress`` shows a bar per seed (default: in a notebook only)."""
    from hwmodel.serving.cluster import resolve_cluster
    from hwmodel.serving.metrics import compute_metrics
    from hwmodel.serving.simulator import simulate

    spec = _cluster_spec(cluster)
    if isinstance(rate_per_s, Load):
        sat = saturation(spec, n=n, prompt=prompt, output=output, scheduler=scheduler)
        rate_per_s = rate_per_s.fraction * sat.request_rate_per_s
    if seeds is not None:
        from hwmodel.serving.replicas import run_seeds

        if reqs is not None:
            raise HwmodelError("serve(..., seeds=N) generates its streams: pass n/rate_per_s/prompt/output, not reqs")
        rate = float(rate_per_s)
        bar = _Bar(progress, seeds, f"serving {seeds} seeds on {spec.name}")
        try:
            return run_seeds(
                resolve_cluster(spec),
                lambda s: requests(n, rate, prompt, output, s),
                seeds,
                seed,
                scheduler,
                on_seed=lambda _s: bar.advance(),
            )
        finally:
            bar.close()
    reqs = tuple(reqs) if reqs is not None else requests(n, rate_per_s, prompt, output, seed)
    res = simulate(resolve_cluster(spec), reqs, scheduler)
    return Serving(spec.name, scheduler, compute_metrics(res), res)


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
