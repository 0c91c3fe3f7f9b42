"""The ``streaming-decode`` evaluator: one point of the streaming decode accelerator's design space.

A point starts from a design (``fpga/designs/*.toml`` or a TOML path), changes the fields its parameters name
(``dataclasses.replace``), and is evaluated with the cycle-level fast engine (:mod:`fpga.streaming.engine`), the
resource estimate (:mod:`fpga.streaming.resources`), the power model (:mod:`fpga.streaming.power`) and the timing-closure heuristic
(:mod:`hwmodel.dse.timing`).

Parameters (all optional; the design's own values otherwise):

* ``design`` (default ``draft-u280``), ``board``, ``llm``: what to start from and what it runs on;
* ``ctx`` (default 512): tokens in the KV cache when the token is decoded;
* ``clock_mhz``: the kernel clock asked for; ``clock_policy``: ``constrain`` (default: a point whose reachable
  clock is below the one asked for breaks the ``timing_slack >= 0`` constraint) or ``clamp`` (the point runs at
  the lower of the two, as a tool flow that relaxes the clock target would);
* design fields: ``weight_bits``, ``act_bits``, ``kv_bits``, ``act_quant``, ``softmax``, ``vector_chunk``,
  ``fifo_depth``, ``fifo_latency_cycles``, ``max_ctx``, ``execution``, ``phase_barrier_cycles``,
  ``phase_prefetch_blocks``;
* HBM-port fields for every engine that has ports: ``port_width_bits``, ``burst_bytes``, ``buffer_depth``
  (the prefetch depth: read requests buffered per port), ``max_outstanding``;
* one engine's field: ``<engine>.<field>`` with field among ``lanes``, ``ports``, ``port_width_bits``,
  ``burst_bytes``, ``buffer_depth``, ``max_outstanding``, ``pipeline_latency_cycles``, ``order``
  (e.g. ``linear.lanes``, ``attn.ports``; a spec may write them as a ``[parameters.linear]`` table). An engine
  field overrides the all-ports field of the same name;
* ``timing_full_fraction``, ``timing_slr_derate``: the constants of the timing heuristic.

Metrics: latency and throughput of one decoded token at ``ctx``, energy per token and board power, resource use
(count and fraction of the board), HBM ports and capacity used, achieved HBM bandwidth, the clock the point runs
at, the reachable clock and the timing slack. Always-on constraints: every resource and the HBM ports within the
board, the weights and KV cache within the HBM the design's ports reach, and the timing slack non-negative.

Speed: everything a point needs but the fast engine's run does not depend on the kernel clock (the design, its
resources and reachable clock, the token program, which costs several fast-engine runs to compile), so a worker
memoizes it per design (:mod:`hwmodel.dse.streaming_shared`) and a point costs one kernel run and a few sums; the
worker also pauses the cyclic garbage collector during a chunk (:func:`hwmodel.dse.worker.collector_paused`). A grid
varies ``clock_mhz`` fastest (``innermost``) and the runner keeps a design's clocks in one chunk, and the designs
that differ only in their attention engine's fields (:func:`affinity`) too: their programs share the LM-head tail
(fpga/streaming/part_memo.py).
:data:`REFERENCE_EVALUATOR` is the path before (every point from scratch but the program); tests/test_dse_shared.py
checks both write the same rows, byte for byte.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Mapping
from typing import Any

from fpga.streaming.design import (
    EXECUTION_STYLES,
    VALID_BITS,
    StreamingDesign,
    check_structure,
    design_names,
    load_design,
)
from hwmodel.dse.evaluators import Evaluator, Metric, Param, Screen, decode_floor_screen, register
from hwmodel.dse.space import Params, Scalar
from hwmodel.dse.streaming_shared import (
    CLOCK_PARAM,
    DesignFacts,
    channel_layout,
    design_key,
    kernel_output,
    memoized_facts,
    status_ok,
    token_metrics,
)
from hwmodel.dse.timing import TimingModel, reachable_clock_hz, slrs_spanned
from hwmodel.dse.worker import collector_running
from hwmodel.errors import HwmodelError
from hwmodel.specs import BoardSpec, LlmSpec, library

VERSION = "1"
RESOURCE_KEYS = (("lut", "lut"), ("ff", "ff"), ("dsp", "dsp"), ("bram18k", "bram"), ("uram", "uram"))
DESIGN_FIELDS = (
    "weight_bits",
    "act_bits",
    "kv_bits",
    "act_quant",
    "softmax",
    "vector_chunk",
    "fifo_depth",
    "fifo_latency_cycles",
    "max_ctx",
    "execution",
    "phase_barrier_cycles",
    "phase_prefetch_blocks",
)
PORT_FIELDS = ("port_width_bits", "burst_bytes", "buffer_depth", "max_outstanding")
ENGINE_FIELDS = ("lanes", "ports", *PORT_FIELDS, "pipeline_latency_cycles", "order")
WIDTHS = (32, 64, 128, 256, 512, 1024)

_FIELD_PARAMS: dict[str, Param] = {
    "lanes": Param("lanes", int, low=1, doc="MACs (or elements) per cycle"),
    "ports": Param("ports", int, low=0, doc="HBM ports, one pseudo-channel each"),
    "port_width_bits": Param("port_width_bits", int, unit="bit", choices=WIDTHS, doc="AXI data width"),
    "burst_bytes": Param("burst_bytes", int, unit="B", low=32, high=4096, doc="bytes per read request"),
    "buffer_depth": Param("buffer_depth", int, low=1, doc="read requests buffered per port (prefetch depth)"),
    "max_outstanding": Param("max_outstanding", int, low=1, doc="read requests in flight per port"),
    "pipeline_latency_cycles": Param("pipeline_latency_cycles", int, unit="cycles", low=0),
    "order": Param("order", str, choices=("output", "input"), doc="matrix-vector loop order"),
}


def _opt(name: str, kind: type, **kw: Any) -> Param:
    return Param(name, kind, required=False, **kw)


PARAMS: tuple[Param, ...] = (
    Param("design", str, default="draft-u280", doc="built-in design name or design TOML path"),
    Param("ctx", int, low=0, default=512, unit="tokens", doc="tokens in the KV cache"),
    _opt("clock_mhz", float, low=1.0, unit="MHz", doc="kernel clock asked for (default: the design's)"),
    Param(
        "clock_policy",
        str,
        choices=("constrain", "clamp"),
        default="constrain",
        doc="constrain: a clock above the reachable one is infeasible; clamp: run at the reachable clock",
    ),
    _opt("board", str, doc="FPGA board spec name (default: the design's)"),
    _opt("llm", str, doc="LLM spec name (default: the design's)"),
    _opt("weight_bits", int, choices=VALID_BITS),
    _opt("act_bits", int, choices=VALID_BITS),
    _opt("kv_bits", int, choices=VALID_BITS),
    _opt("act_quant", str, choices=("dynamic", "static")),
    _opt("softmax", str, choices=("two-pass", "online")),
    _opt("vector_chunk", int, low=1),
    _opt("fifo_depth", int, low=1),
    _opt("fifo_latency_cycles", int, low=1),
    _opt("max_ctx", int, low=0, unit="tokens"),
    _opt("execution", str, choices=EXECUTION_STYLES, doc="dataflow or temporal phases (fpga/streaming/temporal.py)"),
    _opt("phase_barrier_cycles", int, low=0, unit="cycles", doc="temporal: cycles between two phases"),
    _opt("phase_prefetch_blocks", int, low=0, doc="temporal: blocks of a phase whose loads overlap the previous phase"),
    *(
        dataclasses.replace(_FIELD_PARAMS[f], required=False, doc=_FIELD_PARAMS[f].doc + " (every engine with ports)")
        for f in PORT_FIELDS
    ),
    Param(
        "timing_full_fraction",
        float,
        low=0.05,
        high=1.0,
        default=TimingModel().full_fraction,
        doc="reachable fraction of the clock ceiling at 100 % use of a resource",
    ),
    Param(
        "timing_slr_derate",
        float,
        low=0.0,
        high=0.5,
        default=TimingModel().slr_derate,
        doc="clock lost per extra SLR spanned",
    ),
)

METRICS: tuple[Metric, ...] = (
    Metric("latency_s", "s", "one decoded token at ctx", low=0.0),
    Metric("tokens_per_s", "1/s", "decoded tokens per second at ctx", low=0.0),
    Metric("cycles", "cycles", "kernel cycles of the token", low=0.0),
    Metric("energy_per_token_j", "J", "board energy per decoded token (static included)", low=0.0),
    Metric("power_w", "W", "board power while decoding", low=0.0),
    Metric("run_clock_mhz", "MHz", "kernel clock the point runs at", low=0.0),
    Metric("reachable_clock_mhz", "MHz", "clock the timing heuristic expects to close", low=0.0),
    Metric("timing_slack", "", "reachable / asked clock - 1", low=-1.0),
    *(Metric(f"{name}_util", "", f"{key.upper()} use / board", low=0.0) for key, name in RESOURCE_KEYS),
    Metric("dsp", "", "DSP slices used", low=0.0),
    Metric("slrs_spanned", "", "SLRs the design spans at its utilisation", low=1.0),
    Metric("hbm_ports_util", "", "HBM ports used / board ports", low=0.0),
    Metric("hbm_capacity_util", "", "weights + KV cache for max_ctx / board HBM", low=0.0),
    Metric(
        "fits_hbm", "", "1 when weights + KV cache fit the pseudo-channels the ports reach, else 0", low=0.0, high=1.0
    ),
    Metric("hbm_bw_util", "", "achieved HBM bandwidth / board peak", low=0.0),
    Metric("ports_bw_util", "", "achieved HBM bandwidth / peak of the channels used", low=0.0),
)

CONSTRAINTS = {
    **{f"{name}_util": (None, 1.0) for _k, name in RESOURCE_KEYS},
    "hbm_ports_util": (None, 1.0),
    "fits_hbm": (1.0, None),
    "timing_slack": (0.0, None),
}


# ---------------------------------------------------------------------------------------------------- designs
@functools.lru_cache(maxsize=64)
def _base(name: str) -> StreamingDesign:
    return load_design(name)


def _engine_param(name: str) -> Param | None:
    engine, dot, field = name.partition(".")
    if not dot or not engine or field not in _FIELD_PARAMS:
        return None
    return dataclasses.replace(_FIELD_PARAMS[field], name=name)


def _check_space(values: Mapping[str, tuple[Scalar, ...]]) -> Iterable[tuple[str, str]]:
    lib = library()
    designs = []
    for d in values.get("design", ("draft-u280",)):
        try:
            designs.append(_base(str(d)))
        except HwmodelError as exc:
            yield "design", f"a built-in design ({', '.join(design_names())}) or a design TOML file ({exc})"
            return
    for key, kind in (("board", "fpga-board"), ("llm", "llm")):
        for v in values.get(key, ()):
            if v not in lib.names(kind):
                yield key, f"a {kind} spec name ({', '.join(lib.names(kind))}), not {v!r}"
    for name in values:
        engine, dot, _field = name.partition(".")
        if dot:
            for d in designs:
                names = [e.name for e in d.engines]
                if engine not in names:
                    yield name, f"an engine of design '{d.name}' ({', '.join(names)})"


def build_design(p: Params) -> StreamingDesign:
    """The design of point ``p`` at the clock asked for (see the module docstring for the parameters)."""
    d = _base(str(p["design"]))
    top: dict[str, Any] = {k: p[k] for k in DESIGN_FIELDS if k in p}
    for k in ("board", "llm"):
        if k in p:
            top[k] = p[k]
    if "clock_mhz" in p:
        top["clock_hz"] = float(p["clock_mhz"]) * 1e6
    if top:
        d = dataclasses.replace(d, **top)
    port_changes = {k: p[k] for k in PORT_FIELDS if k in p}
    per_engine: dict[str, dict[str, Any]] = {}
    for k, v in p.items():
        engine, dot, field = k.partition(".")
        if dot:
            per_engine.setdefault(engine, {})[field] = v
    if port_changes or per_engine:
        engines = []
        for e in d.engines:
            ch = dict(port_changes) if e.ports else {}
            ch.update(per_engine.get(e.name, {}))
            engines.append(dataclasses.replace(e, **ch) if ch else e)
        missing = set(per_engine) - {e.name for e in d.engines}
        if missing:
            raise HwmodelError(f"design '{d.name}' has no engine {', '.join(sorted(missing))}")
        d = dataclasses.replace(d, engines=tuple(engines))
    check_structure(d)
    return d


@dataclasses.dataclass(frozen=True)
class _Static:
    """What a point's metrics need besides the simulation: resources, clocks, capacity (cheap, analytic)."""

    design: StreamingDesign
    board: BoardSpec
    llm: LlmSpec
    exact: dict[str, float]
    asked_hz: float
    run_hz: float


@dataclasses.dataclass(frozen=True)
class _Clockless:
    """The part of :class:`_Static` that does not depend on the kernel clock (``design`` at the clock asked for,
    or at its own clock when the parameters name none)."""

    design: StreamingDesign
    board: BoardSpec
    llm: LlmSpec
    use: Any  # fpga.streaming.resources.ResourceUse
    exact: dict[str, float]
    reach_hz: float


def _clockless(p: Params) -> _Clockless:
    """Resources, the reachable clock, ports and the coarse HBM capacity of point ``p`` (no simulation)."""
    from fpga.streaming.resources import estimate
    from hwmodel.bounds import resident_bytes

    d = build_design(p)
    lib = library()
    board, llm = lib.board(d.board), lib.llm(d.llm)
    use = estimate(d, board, llm)
    util = use.utilization(board)
    timing_util = {name: util[key] for key, name in RESOURCE_KEYS}
    model = TimingModel(full_fraction=float(p["timing_full_fraction"]), slr_derate=float(p["timing_slr_derate"]))
    reach = reachable_clock_hz(board.max_kernel_clock_hz, timing_util, board.slrs, model)
    exact = {f"{name}_util": util[key] for key, name in RESOURCE_KEYS}
    exact.update(
        dsp=float(use.dsp),
        slrs_spanned=float(slrs_spanned(timing_util, board.slrs)),
        hbm_ports_util=d.total_ports / board.hbm.axi_ports,
        hbm_capacity_util=resident_bytes(llm, d.weight_bits, d.kv_bits, d.max_ctx) / board.hbm.capacity_bytes,
        reachable_clock_mhz=reach / 1e6,
    )
    return _Clockless(d, board, llm, use, exact, reach)


def _asked_hz(cl: _Clockless, p: Params) -> float:
    return float(p["clock_mhz"]) * 1e6 if "clock_mhz" in p else cl.design.clock_hz


def _clock_entries(cl: _Clockless, p: Params) -> tuple[float, float, dict[str, float]]:
    """(asked clock, run clock, the clock-dependent exact metrics) of point ``p``."""
    asked = _asked_hz(cl, p)
    reach = cl.reach_hz
    clamp = p["clock_policy"] == "clamp"
    run = min(asked, reach) if clamp else asked
    slack = reach / run - 1.0 if clamp else reach / asked - 1.0
    return asked, run, {"run_clock_mhz": run / 1e6, "timing_slack": slack}


def _static(p: Params) -> _Static:
    """Resources, clocks, ports and the coarse HBM capacity of point ``p`` (no simulation, well under 1 ms)."""
    return _at_clock(_clockless(p), p)


def _at_clock(cl: _Clockless, p: Params) -> _Static:
    asked, run, entries = _clock_entries(cl, p)
    d = cl.design if cl.design.clock_hz == asked else dataclasses.replace(cl.design, clock_hz=asked)
    return _Static(d, cl.board, cl.llm, {**cl.exact, **entries}, asked, run)


#: the clock-independent part of a point, memoized by every parameter but the clock (planning screens every
#: point; a grid's clocks of one design share it)
_clockless_shared = memoized_facts(lambda p: _clockless(p), maxsize=256)


# ---------------------------------------------------------------------------------------------------- evaluation
@functools.lru_cache(maxsize=16)
def _program(design_at_unit_clock: StreamingDesign, ctx: int) -> Any:
    """The token program of a design (clock-independent), cached per worker across clocks."""
    from fpga.streaming.engine import compile_token

    d = design_at_unit_clock
    lib = library()
    return compile_token(d, lib.board(d.board), lib.llm(d.llm), ctx, True)


@functools.lru_cache(maxsize=16)
def _fits_hbm(design_at_unit_clock: StreamingDesign) -> float:
    """1.0 when the weights and the KV cache for max_ctx fit the pseudo-channels the design's ports reach, else 0.0
    (``fpga.streaming.engine.check_hbm_capacity``; clock-independent, so cached per worker like the programs)."""
    from fpga.streaming.engine import check_hbm_capacity

    d = design_at_unit_clock
    lib = library()
    try:
        check_hbm_capacity(d, lib.board(d.board), lib.llm(d.llm))
    except HwmodelError:
        return 0.0
    return 1.0


def simulate(design: StreamingDesign, ctx: int) -> Any:
    """``fpga.streaming.engine.simulate_token(design, ctx)``, reusing the program of the same design at another clock."""
    from fpga.streaming.engine import run_program

    prog = _program(dataclasses.replace(design, clock_hz=1.0), int(ctx))
    lib = library()
    return run_program(design, lib.board(design.board), lib.llm(design.llm), prog, int(ctx), True)


def evaluate_reference(p: Params) -> dict[str, float]:
    """All metrics of point ``p``, built from scratch but for the token program reused across clocks (the path
    before :mod:`hwmodel.dse.streaming_shared`; the reference its results are compared with)."""
    from fpga.streaming.power import token_power_w

    st = _static(p)
    d = dataclasses.replace(st.design, clock_hz=st.run_hz)
    tok = simulate(d, int(p["ctx"]))
    power = token_power_w(d, tok)
    fits = _fits_hbm(dataclasses.replace(st.design, clock_hz=1.0))
    return {
        **st.exact,
        "fits_hbm": fits,
        "latency_s": tok.seconds,
        "tokens_per_s": tok.tokens_per_s,
        "cycles": float(tok.cycles),
        "energy_per_token_j": power * tok.seconds,
        "power_w": power,
        "hbm_bw_util": tok.hbm_utilization,
        "ports_bw_util": tok.ports_utilization,
    }


def _evaluate_reference_gc(p: Params) -> dict[str, float]:
    with collector_running():
        return evaluate_reference(p)


def _facts(p: Params, cl: _Clockless) -> DesignFacts:
    """The clock-independent facts of a design's token (see :mod:`hwmodel.dse.streaming_shared`); ``p`` without
    the clock, its policy and the timing heuristic's constants; ``cl``: the point's :class:`_Clockless` (its design
    and resource estimate are those of every point of the design, whatever their clock)."""
    from fpga.hbm.channel import channel_peak_bytes_per_s, token_refresh_phase
    from fpga.streaming.engine import compile_token
    from fpga.streaming.ports import channel_count

    board, llm = cl.board, cl.llm
    d1 = dataclasses.replace(cl.design, clock_hz=1.0)
    ctx = int(p["ctx"])
    prog = compile_token(d1, board, llm, ctx, True)
    lone, shared_bytes = channel_layout(prog)
    return DesignFacts(
        design=d1,
        board=board,
        use=cl.use,
        fits_hbm=_fits_hbm.__wrapped__(d1),
        program=prog,
        refresh_phase_cycles=token_refresh_phase(board, ctx),
        engine_names=tuple(e.name for e in d1.engines),
        class_of_lone_port=lone,
        shared_port_bytes=shared_bytes,
        peak_bw_bytes_per_s=board.hbm.peak_bw_bytes_per_s,
        ports_peak_bw_bytes_per_s=channel_count(d1) * channel_peak_bytes_per_s(board),
    )


#: the program and what the results read from it do not depend on the clock policy or the timing heuristic either
_facts_shared = memoized_facts(
    _facts, maxsize=32, ignore=frozenset({"clock_mhz", "clock_policy", "timing_full_fraction", "timing_slr_derate"})
)


def evaluate(p: Params) -> dict[str, float]:
    """All metrics of point ``p`` (a HwmodelError marks the point invalid, e.g. a design that deadlocks): the
    design's clock-independent facts memoized per worker, one fast-engine run per point."""
    cl = _clockless_shared(p)  # first, as in the reference: a design that cannot be built fails here
    f = _facts_shared(p, cl)
    _asked, run, entries = _clock_entries(cl, p)
    out = kernel_output(f, run)
    if not status_ok(out):  # the design deadlocks: the reference names the blocked engines
        return evaluate_reference(p)
    return {**cl.exact, **entries, "fits_hbm": f.fits_hbm, **token_metrics(f, run, out)}


def clear_caches() -> None:
    """Forget every memoized design, program and fact, the streaming compiler's templates and the HBM parameter
    vectors included (an A/B measurement starts both paths from a cold worker)."""
    from fpga.hbm.channel import _static_params
    from fpga.streaming import templates

    for fn in (_base, _program, _fits_hbm, _clockless_shared, _facts_shared, _static_params):
        fn.cache_clear()  # type: ignore[attr-defined]
    templates.clear_caches()  # its memoized parts, the tails shared by designs (fpga/streaming/part_memo.py) too


def affinity(p: Params) -> tuple[tuple[str, Any], ...]:
    """Designs that differ only in their clock or their attention engine's fields compile to programs with the same
    tail, most of a compile (fpga/streaming/part_memo.py shares it in a worker): the runner keeps such points in one
    chunk."""
    try:
        attn = _base(str(p["design"])).engine_of("attention").name
    except (HwmodelError, KeyError):
        return design_key(p)
    return design_key(p, frozenset({CLOCK_PARAM, *(k for k in p if k.startswith(attn + "."))}))


def screen(p: Params) -> Screen:
    """Exact resources, clocks and coarse HBM capacity; latency bounded below by the decoder weights and KV cache at the
    board's peak HBM bandwidth (the model streams at least those bytes and no channel beats its peak)."""
    cl = _clockless_shared(p)
    exact = {**cl.exact, **_clock_entries(cl, p)[2]}
    d = cl.design
    return decode_floor_screen(exact, cl.llm, d.weight_bits, d.kv_bits, int(p["ctx"]), cl.board.hbm.peak_bw_bytes_per_s)


EVALUATOR = register(
    Evaluator(
        name="streaming-decode",
        version=VERSION,
        doc="cycle-level streaming decode accelerator (fpga.streaming.engine) with resources, power and a timing heuristic",
        params=PARAMS,
        metrics=METRICS,
        evaluate=evaluate,
        screen=screen,
        constraints=CONSTRAINTS,
        innermost=("clock_mhz",),
        affinity=affinity,
        extra_param=_engine_param,
        check_space=_check_space,
        preload=("fpga.streaming.engine", "fpga.streaming.power", "fpga.streaming.resources", "hwmodel.bounds"),
    )
)

#: the same evaluator on the path before :mod:`hwmodel.dse.streaming_shared` (every point from scratch but the
#: program reused across clocks, the garbage collector running), unregistered: a spec or a test names it as
#: ``hwmodel.dse.streaming_eval:REFERENCE_EVALUATOR`` to measure the speed-up or check the numbers are the same (its
#: points have the same ids)
REFERENCE_EVALUATOR = dataclasses.replace(EVALUATOR, evaluate=_evaluate_reference_gc)
