"""The validation table: every provider's rows, de-duplicated, with error / band position; Markdown, CSV, JSON."""
from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hwmodel.validate import providers
from hwmodel.validate.rows import AREAS, band_position, error, key

COLUMNS = ("area", "name", "workload", "role", "free_params", "model", "published", "band", "unit", "error",
           "band_position", "bound", "bound_kind", "source", "note")


@dataclasses.dataclass(frozen=True)
class Validation:
    """All rows (each with ``error`` and ``band_position`` filled in), the families' accounting, and the
    contributed modules that were found."""

    rows: list[dict[str, Any]]
    accounting: list[dict[str, Any]]
    contributed: list[str]
    options: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {"options": self.options, "accounting": self.accounting, "contributed": self.contributed,
                "summary": summary(self.rows), "rows": self.rows}


def build(cv: bool = True, system_a_limit: int | None = 40, jobs: int = 1,
          system_b_requests: int = 200) -> Validation:
    """Run every provider (see :mod:`hwmodel.validate.providers`). An area whose own module contributes rows
    (HBM, FPGA streaming, system A, system B) is taken from that module alone; the built-in provider of the same
    area runs only when the module is absent."""
    extra, found = providers.contributed_rows(system_a_limit=system_a_limit, jobs=jobs,
                                              system_b_requests=system_b_requests)
    covered = {r["area"] for r in extra}
    own = providers.gpu_rows(cv) + providers.fpga_instruction_rows(cv)
    if "HBM" not in covered:
        own += providers.hbm_rows()
    if "system A" not in covered:
        own += providers.system_a_rows(system_a_limit, jobs)
    if "system B" not in covered:
        own += providers.system_b_rows()
    rows = dedupe(own + extra)
    for r in rows:
        r["error"] = error(r)
        r["band_position"] = band_position(r)
    rows.sort(key=lambda r: (AREAS.index(r["area"]) if r["area"] in AREAS else len(AREAS), r["area"]))
    return Validation(rows, providers.accounting_rows(), found,
                      {"cv": cv, "system_a_limit": system_a_limit, "system_b_requests": system_b_requests})


def dedupe(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (area, name, role): a contributed row replaces the built-in one of the same key."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        out[key(r)] = r
    return list(out.values())


def summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per area and role: points, mean and largest |error| (point values), inside/outside (bands)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["area"], r["role"]), []).append(r)
    out = []
    for (area, role), rs in groups.items():
        errs = [abs(r["error"]) for r in rs if r["published"] is not None]
        bands = [r for r in rs if r["band"] is not None]
        out.append({"area": area, "role": role, "rows": len(rs), "point_values": len(errs),
                    "mean_abs_error": sum(errs) / len(errs) if errs else None,
                    "max_abs_error": max(errs) if errs else None, "bands": len(bands),
                    "inside_band": sum(r["band_position"] == "inside" for r in bands)})
    return out


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
    out = ["# Validation: every published or measured figure beside the model", "",
           "Role: `fitted` (a parameter was matched to it), `fitted-derived` (follows from fitted points by "
           "identity), `predicted` (nothing was matched to it), `leave-one-out` (a fitted point predicted by a "
           "refit without it). `free` = free parameters of the family behind the row (least squares + values "
           "chosen on the same points); system-level rows compose families and fit nothing of their own. `bound` "
           "is the physical floor (times) or ceiling (rates) of the figure from hwmodel/bounds.py.", "",
           "## Calibration families", "",
           "| family | points fitted | free parameters | degrees of freedom | least squares | chosen on the same points |",
           "|---|---|---|---|---|---|"]
    for a in v.accounting:
        out.append(f"| {a['family']} | {a['points_fitted']} | {a['free_params']} | {a['degrees_of_freedom']} | "
                   f"{', '.join(a['least_squares'])} | {'; '.join(a['choices']) or '-'} |")
    out += ["", "## Summary", "", "| area | role | rows | mean abs error | max abs error | inside band |",
            "|---|---|---|---|---|---|"]
    for s in summary(v.rows):
        mean = "" if s["mean_abs_error"] is None else f"{100 * s['mean_abs_error']:.1f} %"
        mx = "" if s["max_abs_error"] is None else f"{100 * s['max_abs_error']:.1f} %"
        bands = f"{s['inside_band']} / {s['bands']}" if s["bands"] else ""
        out.append(f"| {s['area']} | {s['role']} | {s['rows']} | {mean} | {mx} | {bands} |")
    out += ["", "## Every figure", "",
            "| area | figure | workload | role | free | model | published | unit | error / band | bound | source |",
            "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in v.rows:
        pub = _fmt(r["published"]) if r["published"] is not None else "[" + _fmt(r["band"]) + "]"
        bound = f"{r['bound_kind']} {_fmt(r['bound'])}" if r["bound"] is not None else ""
        free = "" if r["free_params"] is None else str(r["free_params"])
        note = f" — {r['note']}" if r["note"] and r["role"] == "leave-one-out" else ""
        out.append(f"| {r['area']} | {r['name']} | {r['workload']} | {r['role']}{note} | {free} | {_fmt(r['model'])} "
                   f"| {pub} | {r['unit']} | {_err(r)} | {bound} | {r['source']} |")
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
