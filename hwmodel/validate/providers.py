"""Providers of validation rows: the calibration families (GPU, edge GPU, FPGA instruction), the HBM channel fit,
system A and system B, and the ``rows()`` functions other areas contribute.

Every provider is a :class:`Provider` in :data:`REGISTRY` (the project's one registry mechanism,
:mod:`hwmodel.registry`), registered from its own file: the built-ins below and the modules of this package
(``hwmodel/validate/*.py``: ``register(Provider(...))`` at import), a user's from a file in ``HWMODEL_PLUGINS``.
``hwmodel validate`` runs the area modules first, then the built-ins, each group in ``rank`` order (the table's
row order within an area).

Every provider computes its model values from the code and the committed parameters; the published values come
from the measurement files (``calibration/measurements/*.csv``) or the published constants of each study module, and
never enter a model computation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hwmodel.registry import Registry
from hwmodel.validate.rows import check, row


@dataclasses.dataclass(frozen=True)
class Settings:
    """How a ``hwmodel validate`` run is set: leave-one-out rows, system A's problems per dataset and workers,
    system B's requests."""

    cv: bool = True
    system_a_limit: int | None = 40
    jobs: int = 1
    system_b_requests: int = 200


@dataclasses.dataclass(frozen=True)
class Provider:
    """A source of validation rows: ``rows(settings)``.

    ``area_module``: an area's own rows module (listed among the providers found; each row tagged with ``name``);
    it runs before the built-ins. ``unless_area``: a built-in that runs only when no area module emitted a row of
    that area (the built-in HBM row). ``rank``: the order within its group (lowest first)."""

    name: str
    rows: Callable[[Settings], list[dict[str, Any]]]
    rank: float = 100
    area_module: bool = False
    unless_area: str | None = None


#: the registered providers (this package's modules register theirs at import)
REGISTRY: Registry[Provider] = Registry("validation provider", "hwmodel.validate", rank=lambda p: p.rank)


def register(provider: Provider) -> Provider:
    """Register ``provider`` under its name; called at import by the file defining it."""
    return REGISTRY.register(provider.name, provider)


EDGE_PREFIXES = ("orin", "jetson")
SYSTEM_A_POLICIES = ("baseline", "step-ahead", "heteroreason", "edge-draft")


# ------------------------------------------------------------------------------------------------ calibration
def _gpu_bound(pt: Any) -> tuple[float | None, str]:
    """Physical limit of a GPU point from :mod:`hwmodel.bounds`: a floor for a time, a ceiling for a rate."""
    from calibration.gpu import resolve_llm
    from hwmodel.bounds import bounds
    from hwmodel.specs import library

    gpu = library().gpu(pt.subject)
    llm = resolve_llm(pt.text("llm"))
    wb, kb = pt.integer("weight_bits", 16), pt.integer("kv_bits", 16)
    n_in = pt.integer("input_tokens")
    q = pt.quantity
    if q == "decode_tokens_per_s_per_w":
        return None, ""

    def decode_floor(ctx: int) -> float:
        return bounds(llm, gpu, wb, kb, ctx).decode_floor_peak_s

    def prefill_floor(n: int) -> float:
        b = bounds(llm, gpu, wb, kb, 0, prefill_tokens=n)
        return max(b.prefill_compute_floor_s, b.decode_floor_peak_s)

    if q == "prefill_s":
        return prefill_floor(n_in), "floor"
    n_out = pt.integer("output_tokens")
    if q in ("decode_s_per_token", "decode_tokens_per_s"):
        mean = 0.5 * (decode_floor(n_in) + decode_floor(n_in + n_out - 1))  # bytes are affine in the context
        return (mean, "floor") if q == "decode_s_per_token" else (1.0 / mean, "ceiling")
    steps = n_out - 1
    decode = steps * 0.5 * (decode_floor(n_in) + decode_floor(n_in + max(steps - 1, 0))) if steps else 0.0
    return n_out / (prefill_floor(n_in) + decode), "ceiling"


def _workload(pt: Any, columns: tuple[str, ...]) -> str:
    return ", ".join(f"{c}={pt.conditions[c]}" for c in columns if pt.conditions.get(c))


def family_rows(
    name: str,
    *,
    cv: bool = True,
    area_of: Callable[[Any], str] | None = None,
    bound_of: Callable[[Any], tuple[float | None, str]] | None = None,
    params_file: Path | None = None,
    extra_families: Callable[[Any], tuple[str, ...]] | None = None,
    with_bands: bool = True,
) -> list[dict[str, Any]]:
    """Every point of calibration family ``name`` (fitted, fitted-derived, predicted) and, with ``cv``, a
    leave-one-out row for every fitted point that can be left out (``identity`` when the refit cannot change it);
    against ``params_file`` (default: the committed parameters). ``extra_families``: the other families a point's
    model value depends on (e.g. the FPGA power family for an energy point)."""
    from calibration.cv import leave_one_out
    from calibration.family import get_family, report_family
    from calibration.measurements import load_measurements

    fam = get_family(name)
    pts = load_measurements(fam.measurements_path)
    by_id = {p.id: p for p in pts}
    report = report_family(fam, pts, params_file)
    from calibration.params import load_values
    from hwmodel.validate.bands import family_bands

    bands = (
        family_bands(fam, pts, load_values(params_file if params_file is not None else fam.params_path))
        if with_bands
        else {}
    )
    out = []
    area_fn = area_of or (lambda p: fam.name)

    def families_of(pt: Any) -> tuple[str, ...]:
        return (fam.name,) + (extra_families(pt) if extra_families else ())

    source_file = f"calibration/measurements/{fam.measurements_path.name}"
    for r in report:
        pt = by_id[r.id]
        bound, kind = bound_of(pt) if bound_of else (None, "")
        out.append(
            row(
                area_fn(pt),
                r.id,
                r.model,
                r.unit,
                r.role,
                f"{r.source} ({source_file})",
                published=r.measured,
                workload=f"{r.subject}: " + _workload(pt, fam.conditions) + f" [{r.quantity}]",
                note=pt.notes,
                bound=bound,
                bound_kind=kind,
                family=fam.name,
                families=families_of(pt),
            )
        )
        if fam.name == "fpga-instruction" and pt.quantity.endswith("_per_w"):
            out[-1]["note"] = _static_share(report, r, pt, fam.conditions)
        if r.id in bands:
            (lo, hi), what = bands[r.id]
            y = fam.predict(load_values(params_file if params_file is not None else fam.params_path), pt)
            out[-1]["model_band"] = [r.model * lo / y, r.model * hi / y]  # centred on the deployed value
            out[-1]["band_sources"] = what
    if cv:
        for lr in leave_one_out(fam, pts, str(params_file) if params_file else None):
            if lr.model is None:
                continue
            pt = by_id[lr.id]
            bound, kind = bound_of(pt) if bound_of else (None, "")
            out.append(
                row(
                    area_fn(pt),
                    lr.id,
                    lr.model,
                    pt.unit,
                    "identity" if lr.identity else "leave-one-out",
                    f"{pt.source} ({source_file})",
                    published=pt.value,
                    workload=f"{pt.subject}: " + _workload(pt, fam.conditions) + f" [{pt.quantity}]",
                    note=lr.reason,
                    bound=bound,
                    bound_kind=kind,
                    family=fam.name,
                    families=families_of(pt),
                )
            )
    return out


def _static_share(report: Any, r: Any, pt: Any, conditions: tuple[str, ...]) -> str:
    """The note of an FPGA energy row: what share of the modelled board power is the measured static floor
    (power = 1 / (tokens/s/W x s/token), with the decode time of the same conditions)."""
    from fpga.instruction.design import load_design
    from fpga.streaming.power import static_w

    same = [
        x
        for x in report
        if x.quantity == "decode_s_per_token"
        and all(x.conditions.get(c) == r.conditions.get(c) for c in conditions if c not in ("ctx", "baseline_ratio"))
    ]
    if not same:
        return pt.notes
    board = load_design(pt.subject).board
    power_w = 1.0 / (r.model * same[0].model)
    return (
        f"{pt.notes}; of the modelled {power_w:.1f} W, the measured static floor is {static_w(board):.1f} W "
        f"({100 * static_w(board) / power_w:.0f} %), the modelled dynamic power the rest"
    ).lstrip("; ")


def gpu_rows(cv: bool = True, params_file: Path | None = None, with_bands: bool = True) -> list[dict[str, Any]]:
    """The GPU family's points; Jetson-class boards are the ``edge`` area."""
    return family_rows(
        "gpu",
        cv=cv,
        bound_of=_gpu_bound,
        params_file=params_file,
        with_bands=with_bands,
        area_of=lambda p: "edge" if p.subject.startswith(EDGE_PREFIXES) else "GPU",
    )


def fpga_instruction_rows(cv: bool = True) -> list[dict[str, Any]]:
    """The instruction-driven U280 family's points (GLITCHES single-device figures)."""
    return family_rows(
        "fpga-instruction",
        cv=cv,
        area_of=lambda p: "FPGA instruction",
        extra_families=lambda p: ("fpga-power",) if p.quantity.endswith("_per_w") else (),
    )


def fpga_power_rows(cv: bool = True) -> list[dict[str, Any]]:
    """The FPGA board-power family's points (FlexLLM's U280 power log)."""
    return family_rows("fpga-power", cv=cv, area_of=lambda p: "FPGA power")


def accounting_rows() -> list[dict[str, Any]]:
    """Per calibration family: points fitted, free parameters, degrees of freedom (for the report's header)."""
    from calibration.family import accounting, get_family, names

    return [accounting(get_family(n)).as_dict() for n in names()]


# ------------------------------------------------------------------------------------------------ HBM
def hbm_rows() -> list[dict[str, Any]]:
    """The U280 pseudo-channel's sequential stream bandwidth against Shuhai's per-channel figure (the one free
    channel parameter, the exposed row-switch bubble, is fitted to it)."""
    from fpga.hbm import channel as hbm
    from fpga.hbm import profile as hbm_profile
    from hwmodel.specs import library

    b = library().board("u280")
    measured = b.hbm.pc_measured_bw_bytes_per_s / b.hbm.ports_per_pc
    return [
        row(
            "HBM",
            "u280-pc-sequential-4k",
            hbm_profile.sustained_channel_bw(b) / 1e9,
            "GB/s",
            "fitted",
            b.source_of("hbm.pc_measured_bw_bytes_per_s") + " (fpga/boards/u280.toml)",
            published=measured / 1e9,
            free_params=1,
            workload="U280, one pseudo-channel, sequential 4 KB requests, enough outstanding",
            note="row_switch_cycles fitted to this figure (`hwmodel fpga profile-port --fit`)",
            bound=hbm.channel_peak_bytes_per_s(b) / 1e9,
            bound_kind="ceiling",
            family="hbm",
        )
    ]


# ------------------------------------------------------------------------------------------------ built-ins
register(Provider("calibration gpu", lambda s: gpu_rows(s.cv), rank=0))
register(Provider("calibration fpga-instruction", lambda s: fpga_instruction_rows(s.cv), rank=1))
register(Provider("calibration fpga-power", lambda s: fpga_power_rows(s.cv), rank=2))
register(Provider("built-in HBM", lambda s: hbm_rows(), rank=4, unless_area="HBM"))


def _system_a_rows(s: Settings) -> list[dict[str, Any]]:
    from hwmodel.reasoning import validation

    return validation.rows(limit=s.system_a_limit, workers=s.jobs)


def _system_b_rows(s: Settings) -> list[dict[str, Any]]:
    from hwmodel.serving import validation

    return validation.rows(requests=s.system_b_requests)


# the systems' rows modules live in their own packages (which import nothing of hwmodel.validate)
register(Provider("hwmodel.reasoning.validation", _system_a_rows, rank=10, area_module=True))
register(Provider("hwmodel.serving.validation", _system_b_rows, rank=11, area_module=True))


# ------------------------------------------------------------------------------------------------ running them
def contributed_rows(settings: Settings) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows of the areas' own modules (each row checked and tagged with its provider); the providers run."""
    out: list[dict[str, Any]] = []
    found = []
    for name, p in REGISTRY.items():
        if p.area_module:
            found.append(name)
            out += [{**check(r, f"{name}.rows()"), "provider": name} for r in p.rows(settings)]
    return out, found


def builtin_rows(settings: Settings, covered: set[str]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Rows of the built-in providers (those with an ``unless_area`` in ``covered`` skipped); rows per provider."""
    out: list[dict[str, Any]] = []
    emitted: dict[str, int] = {}
    for name, p in REGISTRY.items():
        if p.area_module or (p.unless_area is not None and p.unless_area in covered):
            continue
        rows = p.rows(settings)
        out += rows
        emitted[name] = len(rows)
    return out, emitted
