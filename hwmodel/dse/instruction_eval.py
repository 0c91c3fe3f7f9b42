"""The ``instruction-decode`` evaluator: one point of the instruction-driven accelerator's design space.

A point starts from an instruction design (``fpga/designs/instruction/*.toml`` or a TOML path), replaces the
fields its parameters name, and runs one decode step at ``ctx`` through the cycle-level model
(:class:`fpga.instruction.engine.InstructionEngine`: compiler, scheduler, datamover, HBM, compute units), with resources
and power from :mod:`fpga.instruction.power` and the clock from the timing heuristic (:mod:`hwmodel.dse.timing`).

Parameters (all optional; the design's own values otherwise):

* ``design`` (default ``glitches-u280``), ``ctx`` (default 512), ``prefetch_ratio`` (the coalescing ratio k:
  weight and metadata loads of k matrix-vector tiles fetched in one go), ``clock_mhz``, ``clock_policy``
  (``constrain`` or ``clamp``, as for ``streaming-decode``), ``weight_bits``, ``act_bits``, ``kv_bits``;
* any numeric field of a section, dotted: ``mpe.row_lanes``, ``mpe.col_lanes``, ``mpe.token_lanes``,
  ``sfu.lanes``, ``datamover.channels``, ``datamover.port_width_bits``, ``datamover.outstanding``,
  ``datamover.request_queue_depth``, ``scheduler.issue_cycles``, ``buffers.weight_bytes``,
  ``tiling.mv_tile_rows``, ... (a spec may write them as ``[parameters.datamover]`` tables);
* ``timing_full_fraction``, ``timing_slr_derate``.

Metrics are those of ``streaming-decode`` (latency, throughput, energy, power, clocks, resources, HBM ports,
capacity and bandwidth) plus ``prefetch_fits`` (1 when a group of k tiles fits the weight, scale and zero-point
buffers -- the compiler refuses a larger k) and ``mpe_busy``. Always-on constraints: resources and HBM ports within
the board, ``fits_hbm`` (weights, quantization metadata and the KV cache of ``ctx`` tokens within the HBM),
``prefetch_fits`` and a non-negative timing slack.

Speed: the compiler depends only on the design's structure and k (``fpga.instruction.engine.structure_of``), and the
engine memoizes it, so points that differ only in clock or timing values cost one simulation each (~10 ms); a new
structure or k costs a compilation (~0.3 s).
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from fpga.instruction.design import InstructionDesign, design_names, load_design
from hwmodel.dse.evaluators import Evaluator, Metric, Param, Screen, decode_floor_screen, register
from hwmodel.dse.space import Params, Scalar
from hwmodel.dse.timing import TimingModel, reachable_clock_hz, slrs_spanned
from hwmodel.errors import HwmodelError

VERSION = "1"
RESOURCE_KEYS = (("lut", "lut"), ("ff", "ff"), ("dsp", "dsp"), ("bram18k", "bram"), ("uram", "uram"))
TOP_FIELDS = ("weight_bits", "act_bits", "kv_bits")


def _numeric_fields() -> dict[str, type]:
    """Dotted numeric fields of a design's sections (``mpe.row_lanes`` -> int)."""
    out: dict[str, type] = {}
    hints = typing.get_type_hints(InstructionDesign)
    for f in dataclasses.fields(InstructionDesign):
        sub = hints.get(f.name)
        if not (isinstance(sub, type) and dataclasses.is_dataclass(sub)):
            continue
        sub_hints = typing.get_type_hints(sub)
        for g in dataclasses.fields(sub):
            kinds = {sub_hints[g.name]} | set(typing.get_args(sub_hints[g.name]))
            if int in kinds:
                out[f"{f.name}.{g.name}"] = int
            elif float in kinds:
                out[f"{f.name}.{g.name}"] = float
    return out


SECTION_FIELDS = _numeric_fields()


def _opt(name: str, kind: type, **kw: Any) -> Param:
    return Param(name, kind, required=False, **kw)


PARAMS: tuple[Param, ...] = (
    Param("design", str, default="glitches-u280", doc="built-in instruction design or design TOML path"),
    Param("ctx", int, low=0, default=512, unit="tokens", doc="tokens in the KV cache"),
    _opt("prefetch_ratio", int, low=1, doc="coalescing ratio k (default: the design's)"),
    _opt("clock_mhz", float, low=1.0, unit="MHz", doc="kernel clock asked for (default: the design's)"),
    Param("clock_policy", str, choices=("constrain", "clamp"), default="constrain"),
    _opt("weight_bits", int, choices=(4, 8, 16)),
    _opt("act_bits", int, choices=(8, 16)),
    _opt("kv_bits", int, choices=(4, 8, 16)),
    Param("timing_full_fraction", float, low=0.05, high=1.0, default=TimingModel().full_fraction),
    Param("timing_slr_derate", float, low=0.0, high=0.5, default=TimingModel().slr_derate),
)

METRICS: tuple[Metric, ...] = (
    Metric("latency_s", "s", "one decoded token at ctx", low=0.0),
    Metric("tokens_per_s", "1/s", low=0.0),
    Metric("cycles", "cycles", low=0.0),
    Metric("energy_per_token_j", "J", "board energy per decoded token (static included)", low=0.0),
    Metric("power_w", "W", "board power while decoding", low=0.0),
    Metric("run_clock_mhz", "MHz", low=0.0),
    Metric("reachable_clock_mhz", "MHz", low=0.0),
    Metric("timing_slack", "", "reachable / asked clock - 1", low=-1.0),
    *(Metric(f"{name}_util", "", f"{key.upper()} use / board", low=0.0) for key, name in RESOURCE_KEYS),
    Metric("dsp", "", "DSP slices used", low=0.0),
    Metric("slrs_spanned", "", low=1.0),
    Metric("hbm_ports_util", "", "datamover channels / board HBM ports", low=0.0),
    Metric("hbm_capacity_util", "", "weights + KV cache of ctx tokens (bounds.resident_bytes) / board HBM", low=0.0),
    Metric(
        "fits_hbm",
        "",
        "1 when the compiled layout (weights, metadata, head) + KV of ctx fit the HBM",
        low=0.0,
        high=1.0,
    ),
    Metric("prefetch_fits", "", "1 when a group of k tiles fits the on-chip buffers", low=0.0, high=1.0),
    Metric("hbm_bw_util", "", "achieved HBM bandwidth / board peak", low=0.0),
    Metric("mpe_busy", "", "matrix engine busy fraction", low=0.0, high=1.0),
)

CONSTRAINTS = {
    **{f"{name}_util": (None, 1.0) for _k, name in RESOURCE_KEYS},
    "hbm_ports_util": (None, 1.0),
    "fits_hbm": (1.0, None),
    "prefetch_fits": (1.0, None),
    "timing_slack": (0.0, None),
}


@functools.lru_cache(maxsize=64)
def _base(name: str) -> InstructionDesign:
    return load_design(name)


def _section_param(name: str) -> Param | None:
    kind = SECTION_FIELDS.get(name)
    return Param(name, kind, low=0) if kind is not None else None


def _check_space(values: Mapping[str, tuple[Scalar, ...]]) -> Iterable[tuple[str, str]]:
    """Every design loads, and every value of a section field passes that field's own check."""
    designs = []
    for d in values.get("design", ("glitches-u280",)):
        try:
            designs.append(_base(str(d)))
        except HwmodelError as exc:
            yield "design", f"a built-in instruction design ({', '.join(design_names())}) or a design TOML ({exc})"
            return
    for name, vals in values.items():
        if name in SECTION_FIELDS:
            for v in vals:
                try:
                    designs[0].with_params({name: v})
                except HwmodelError as exc:
                    yield name, f"a legal value ({exc})"
                    return


def build_design(p: Params) -> InstructionDesign:
    """The design of point ``p`` at the clock asked for, checked like a design file."""
    d = _base(str(p["design"]))
    changes: dict[str, float] = {k: p[k] for k in TOP_FIELDS if k in p}  # type: ignore[misc]
    changes.update({k: v for k, v in p.items() if k in SECTION_FIELDS})  # type: ignore[misc]
    if "clock_mhz" in p:
        changes["clock_hz"] = float(p["clock_mhz"]) * 1e6
    if "prefetch_ratio" in p:
        changes["prefetch_ratio"] = int(p["prefetch_ratio"])
    if changes:
        d = d.with_params(changes)
    for field, expected, got in d._validate():
        raise HwmodelError(f"design '{d.name}': field '{field}': expected {expected}, got {got!r}")
    return d


@dataclasses.dataclass(frozen=True)
class _Static:
    design: InstructionDesign
    exact: dict[str, float]
    run_hz: float


def _static(p: Params) -> _Static:
    from fpga.instruction.power import total_resources
    from fpga.instruction.prefetch import prefetch_fits
    from hwmodel.bounds import resident_bytes

    d = build_design(p)
    board, llm = d.board_spec, d.llm_spec
    use = total_resources(d)
    r = board.resources
    util = {
        "lut": use["lut"] / r.lut,
        "ff": use["ff"] / r.ff,
        "dsp": use["dsp"] / r.dsp,
        "bram": use["bram18k"] / max(1, r.bram18k),
        "uram": use["uram"] / max(1, r.uram),
    }
    model = TimingModel(full_fraction=float(p["timing_full_fraction"]), slr_derate=float(p["timing_slr_derate"]))
    reach = reachable_clock_hz(board.max_kernel_clock_hz, util, board.slrs, model)
    asked = d.clock_hz
    run = min(asked, reach) if p["clock_policy"] == "clamp" else asked
    exact = {f"{name}_util": util[name] for _k, name in RESOURCE_KEYS}
    exact.update(
        dsp=float(use["dsp"]),
        slrs_spanned=float(slrs_spanned(util, board.slrs)),
        hbm_ports_util=d.datamover.channels / board.hbm.axi_ports,
        hbm_capacity_util=resident_bytes(llm, d.weight_bits, d.kv_bits, int(p["ctx"])) / board.hbm.capacity_bytes,
        prefetch_fits=1.0 if prefetch_fits(d, llm, d.prefetch_ratio) else 0.0,
        run_clock_mhz=run / 1e6,
        reachable_clock_mhz=reach / 1e6,
        timing_slack=reach / run - 1.0 if p["clock_policy"] == "clamp" else reach / asked - 1.0,
    )
    return _Static(d, exact, run)


def evaluate(p: Params) -> dict[str, float]:
    """All metrics of point ``p`` (a HwmodelError, e.g. a prefetch ratio the buffers cannot hold, marks it
    invalid)."""
    from fpga.instruction.engine import InstructionEngine
    from fpga.instruction.power import run_power_w

    st = _static(p)
    eng = InstructionEngine(st.design, clock_hz=st.run_hz)
    ctx = int(p["ctx"])
    run = eng.decode(ctx)
    power = run_power_w(eng, run)
    fits = 1.0 if eng.weights_bytes + eng.kv_bytes(ctx) <= eng.hbm_capacity_bytes else 0.0
    return {
        **st.exact,
        "fits_hbm": fits,
        "latency_s": run.seconds,
        "tokens_per_s": 1.0 / run.seconds,
        "cycles": float(run.cycles),
        "energy_per_token_j": power * run.seconds,
        "power_w": power,
        "hbm_bw_util": run.hbm_utilization,
        "mpe_busy": run.mpe_busy_fraction,
    }


def screen(p: Params) -> Screen:
    """Exact resources, clocks, ports, capacity and prefetch fit; latency bounded below by the weights and KV
    cache at the board's peak HBM bandwidth."""
    st = _static(p)
    d = st.design
    return decode_floor_screen(
        st.exact, d.llm_spec, d.weight_bits, d.kv_bits, int(p["ctx"]), d.board_spec.hbm.peak_bw_bytes_per_s
    )


EVALUATOR = register(
    Evaluator(
        name="instruction-decode",
        version=VERSION,
        doc="cycle-level instruction-driven decode accelerator (fpga.instruction.engine) with resources, power and timing",
        params=PARAMS,
        metrics=METRICS,
        evaluate=evaluate,
        screen=screen,
        constraints=CONSTRAINTS,
        innermost=("clock_mhz",),
        extra_param=_section_param,
        check_space=_check_space,
    )
)
