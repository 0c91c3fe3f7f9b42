"""The validation table: every provider's rows, de-duplicated, with error / band position; Markdown, CSV, JSON."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hwmodel.errors import HwmodelError
from hwmodel.validate import dof, providers
from hwmodel.validate.rows import AREAS, band_position, error, row_id

COLUMNS = (
    "id",
    "area",
    "name",
    "workload",
    "setting",
    "role",
    "free_params",
    "families",
    "model",
    "model_band",
    "band_sources",
    "full_model",
    "published",
    "band",
    "unit",
    "error",
    "band_position",
    "bound",
    "bound_kind",
    "source",
    "note",
)


@dataclasses.dataclass(frozen=True)
class Validation:
    """All rows (each with ``error`` and ``band_position`` filled in), the families' accounting, and the
    contributed modules that were found."""

    rows: list[dict[str, Any]]
    accounting: list[dict[str, Any]]
    contributed: list[str]
    options: dict[str, Any]
    #: rows each provider emitted (the table holds exactly their sum)
    emitted: dict[str, int] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "options": self.options,
            "accounting": self.accounting,
            "contributed": self.contributed,
            "emitted": self.emitted,
            "summary": summary(self.rows),
            "band_counts": band_counts(self.rows),
            "rows": self.rows,
        }


FULL_VALUES_PATH = Path(__file__).resolve().parent / "full_values.json"
#: areas whose providers run at a reduced (quick) setting when asked to
QUICK_AREAS = ("system A", "system B")


def full_id(r: dict[str, Any]) -> str:
    """The id the same row has at the full study's setting."""
    return row_id({**r, "setting": ""})


def attach_full_values(rows: Sequence[dict[str, Any]], path: Path = FULL_VALUES_PATH) -> None:
    """Give every quick-setting row the full study's recorded model value (``full_model``), where recorded."""
    recorded = json.loads(path.read_text(encoding="utf-8"))["rows"] if path.is_file() else {}
    for r in rows:
        if r.get("setting"):
            rec = recorded.get(full_id(r))
            r["full_model"] = None if rec is None else float(rec["model"])


def record_full_values(rows: Sequence[dict[str, Any]], path: Path = FULL_VALUES_PATH) -> Path:
    """Add (or replace) the model values of the full-setting rows of ``rows`` in the recorded file."""
    doc = (
        json.loads(path.read_text(encoding="utf-8"))
        if path.is_file()
        else {
            "doc": "hwmodel validate --record-full: model values of rows built at the full study's setting, shown "
            "beside the same rows built at a quick setting",
            "rows": {},
        }
    )
    for r in rows:
        if not r.get("setting") and r["area"] in QUICK_AREAS:
            doc["rows"][r["id"]] = {"model": r["model"]}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def build(cv: bool = True, system_a_limit: int | None = 40, jobs: int = 1, system_b_requests: int = 1000) -> Validation:
    """Run every provider (see :mod:`hwmodel.validate.providers`): the calibration families, and each area's own
    ``rows()`` module (system A, system B, HBM, FPGA streaming); the built-in HBM row runs only when the HBM module
    is absent. Every row a provider emits is in the table (:func:`finish`)."""
    settings = providers.Settings(cv=cv, system_a_limit=system_a_limit, jobs=jobs, system_b_requests=system_b_requests)
    extra, found = providers.contributed_rows(settings)
    own, emitted = providers.builtin_rows(settings, {r["area"] for r in extra})
    for r in extra:
        emitted[r["provider"]] = emitted.get(r["provider"], 0) + 1
    rows = finish(own + extra)
    attach_full_values(rows)
    from hwmodel.validate import perturb

    perturb.attach(rows)
    explain_missing_bands(rows)
    rows.sort(key=lambda r: (AREAS.index(r["area"]) if r["area"] in AREAS else len(AREAS), r["area"]))
    return Validation(
        rows,
        providers.accounting_rows(),
        found,
        {"cv": cv, "system_a_limit": system_a_limit, "system_b_requests": system_b_requests},
        emitted,
    )


def finish(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row, completed: free parameters computed from its families (:mod:`hwmodel.validate.dof`), a
    non-fitted row whose model value *is* a fitted row's value (same area and unit, bit-identical) relabelled
    ``fitted``, its id, error and band position. Two rows with one id are refused (one-line error): nothing is
    dropped."""
    out = [dict(r) for r in rows]
    fitted = {(r["area"], r["unit"], r["model"]): r for r in out if r["role"] == "fitted"}
    for r in out:
        fams = dof.families_of(r)
        r["families"] = list(fams)
        r["free_params"] = dof.free_params(fams)
        same = fitted.get((r["area"], r["unit"], r["model"]))
        if r["role"] in ("predicted", "fitted-derived") and same is not None and same is not r:
            r["role"] = "fitted"
            r["note"] = (
                f"model value is the fitted value of '{same['name']}' ({same['workload']}), here held "
                "against another published figure; " + r["note"]
            ).rstrip("; ")
        r["id"] = row_id(r)
        r["error"] = error(r)
        r["band_position"] = band_position(r)
    seen: dict[str, dict[str, Any]] = {}
    for r in out:
        if r["id"] in seen:
            raise HwmodelError(
                f"validation rows: two rows share the id {r['id']!r} "
                f"({seen[r['id']]['source']} and {r['source']}); give them distinct quantity, "
                "series, workload or setting"
            )
        seen[r["id"]] = r
    return out


def summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per area, role and setting: points, mean and largest |error| (point values), inside/outside (bands), and
    published figures inside / outside the model's band (predicted rows). ``identity`` rows are their own group,
    never in a leave-one-out summary."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        role = r["role"] + (f" ({r['setting']})" if r.get("setting") else "")
        groups.setdefault((r["area"], role), []).append(r)
    out = []
    for (area, role), rs in groups.items():
        errs = [abs(r["error"]) for r in rs if r["published"] is not None]
        bands = [r for r in rs if r["band"] is not None]
        out.append(
            {
                "area": area,
                "role": role,
                "rows": len(rs),
                "point_values": len(errs),
                "mean_abs_error": sum(errs) / len(errs) if errs else None,
                "max_abs_error": max(errs) if errs else None,
                "bands": len(bands),
                "inside_band": sum(r["band_position"] == "inside" for r in bands),
                **model_band_counts(rs),
            }
        )
    return out


#: why a row that is not a prediction has no band (``band_sources`` says ``none: ...``)
NO_BAND = {
    "fitted": "none: fitted (a parameter was matched to this figure, or its value is a fitted value)",
    "fitted-derived": "none: follows from fitted points by identity",
    "leave-one-out": "none: a refit without the point (its error is the test)",
    "identity": "none: a leave-one-out that cannot change",
}


def explain_missing_bands(rows: Sequence[dict[str, Any]]) -> None:
    """``band_sources`` of every row without a band: ``none: <reason>`` for a row that is not a prediction (a
    predicted row without a band stays without one, and the report counts it)."""
    for r in rows:
        if r.get("model_band") is None and r["role"] in NO_BAND:
            r["band_sources"] = NO_BAND[r["role"]]


def band_counts(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Of the predicted rows, overall and per area: how many, how many published figures fall inside the model's
    band, outside it, and how many predictions have no band (inside + outside + without = predicted)."""
    pred = [r for r in rows if r["role"] == "predicted"]
    areas: dict[str, list[dict[str, Any]]] = {}
    for r in pred:
        areas.setdefault(r["area"], []).append(r)

    def count(rs: Sequence[dict[str, Any]]) -> dict[str, int]:
        c = model_band_counts(rs)
        return {
            "predicted": len(rs),
            "inside": c["published_inside_model_band"],
            "outside": c["published_outside_model_band"],
            "without_band": c["predicted_without_band"],
        }

    return {**count(pred), "per_area": {a: count(rs) for a, rs in areas.items()}}


def band_counts_line(rows: Sequence[dict[str, Any]]) -> str:
    """One line: published figures inside / outside the model's band, overall and per area."""
    c = band_counts(rows)
    per = ", ".join(
        f"{a} {x['inside']} / {x['outside']}" + (f" ({x['without_band']} without)" if x["without_band"] else "")
        for a, x in c["per_area"].items()
    )
    return (
        f"published figures inside / outside the model's band, of {c['predicted']} predictions: "
        f"{c['inside']} / {c['outside']}"
        + (f", {c['without_band']} without a band" if c["without_band"] else "")
        + f" (a published range counts inside when it overlaps the band); per area: {per}"
    )


def model_band_counts(rows: Sequence[dict[str, Any]]) -> dict[str, int]:
    """Of the rows with a model band: how many published figures (points, or the published range's midpoint)
    fall inside it, outside it, and how many predicted rows have no band."""
    inside = outside = none = 0
    for r in rows:
        mb = r.get("model_band")
        if mb is None:
            none += r["role"] == "predicted"
            continue
        pub = r["published"]
        ok = mb[0] <= pub <= mb[1] if pub is not None else mb[0] <= r["band"][1] and r["band"][0] <= mb[1]
        inside += ok
        outside += not ok
    return {
        "published_inside_model_band": inside,
        "published_outside_model_band": outside,
        "predicted_without_band": none,
    }


def _fmt(x: Any, digits: int = 4) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return "inf" if math.isinf(x) else f"{x:.{digits}g}"
    if isinstance(x, list):
        return "–".join(_fmt(v, digits) for v in x)
    return str(x)


def _err(r: dict[str, Any]) -> str:
    if r["band"] is not None:
        return r["band_position"] + ("" if r["band_position"] == "inside" else f" ({100 * r['error']:+.1f} %)")
    return f"{100 * r['error']:+.1f} %"


def markdown(v: Validation) -> str:
    """The whole report: accounting per family, summary per area and role, then every row."""
    out = [
        "# Validation: every published or measured figure beside the model",
        "",
        "Role: `fitted` (a parameter was matched to it), `fitted-derived` (follows from fitted points by "
        "identity), `predicted` (nothing was matched to it), `leave-one-out` (a fitted point predicted by a "
        "refit without it), `identity` (a leave-one-out that cannot change: kept out of leave-one-out "
        "summaries). A row whose model value is a fitted value is `fitted`, whatever it is compared with. "
        "`free` = free parameters of the families the row depends on (least squares + values chosen on the "
        "same points), counted from `families` (a composed row counts every side). `model [band]`: the "
        "model's value and, for a prediction, its 95 % band (hwmodel/validate/bands.py). `bound` "
        "is the physical floor (times) or ceiling (rates) of the figure from hwmodel/bounds.py.",
        "",
        "## Calibration families",
        "",
        "| family | points fitted | free parameters | degrees of freedom | least squares | chosen on the same points |",
        "|---|---|---|---|---|---|",
    ]
    for a in v.accounting:
        out.append(
            f"| {a['family']} | {a['points_fitted']} | {a['free_params']} | {a['degrees_of_freedom']} | "
            f"{', '.join(a['least_squares'])} | {'; '.join(a['choices']) or '-'} |"
        )
    out += [
        "",
        "## Summary",
        "",
        (
            "| area | role | rows | mean abs error | max abs error | inside band | "
            "published inside / outside the model's band | predictions without a band |"
        ),
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in summary(v.rows):
        mean = "" if s["mean_abs_error"] is None else f"{100 * s['mean_abs_error']:.1f} %"
        mx = "" if s["max_abs_error"] is None else f"{100 * s['max_abs_error']:.1f} %"
        bands = f"{s['inside_band']} / {s['bands']}" if s["bands"] else ""
        mb = (
            f"{s['published_inside_model_band']} / {s['published_outside_model_band']}"
            if s["published_inside_model_band"] + s["published_outside_model_band"]
            else ""
        )
        out.append(
            f"| {s['area']} | {s['role']} | {s['rows']} | {mean} | {mx} | {bands} | {mb} | "
            f"{s['predicted_without_band'] or ''} |"
        )
    out += ["", band_counts_line(v.rows) + "."]
    out += [
        "",
        "## Every figure",
        "",
        (
            "| id | figure | workload | setting | role | free (families) | model [band] | published | unit | "
            "error / band | bound | source |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in v.rows:
        pub = _fmt(r["published"]) if r["published"] is not None else "[" + _fmt(r["band"]) + "]"
        bound = f"{r['bound_kind']} {_fmt(r['bound'])}" if r["bound"] is not None else ""
        free = f"{r['free_params']} ({' + '.join(r['families'])})"
        note = f" — {r['note']}" if r["note"] and r["role"] in ("leave-one-out", "identity") else ""
        model = _fmt(r["model"]) + (f" [{_fmt(r['model_band'])}]" if r.get("model_band") else " (band: none)")
        if r.get("setting"):
            model += "; full study " + ("not recorded" if r.get("full_model") is None else _fmt(r["full_model"]))
        out.append(
            f"| `{r['id']}` | {r['name']} | {r['workload']} | {r['setting']} | {r['role']}{note} | {free} | "
            f"{model} | {pub} | {r['unit']} | {_err(r)} | {bound} | {r['source']} |"
        )
    if v.contributed:
        out += ["", "Rows contributed by: " + ", ".join(f"`{m}`" for m in v.contributed) + "."]
    return "\n".join(out) + "\n"


def write(v: Validation, out_dir: Path) -> list[Path]:
    """validation.md, validation.csv, validation.json under ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md, cs, js = out_dir / "validation.md", out_dir / "validation.csv", out_dir / "validation.json"
    md.write_text(markdown(v), encoding="utf-8")
    with open(cs, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(COLUMNS)
        for r in v.rows:
            w.writerow([_csv(r.get(c)) for c in COLUMNS])
    js.write_text(json.dumps(v.as_dict(), indent=1, default=str) + "\n", encoding="utf-8")
    return [md, cs, js]


def _csv(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return repr(x)
    if isinstance(x, list):
        return " ".join(_csv(v) for v in x)
    return str(x)
