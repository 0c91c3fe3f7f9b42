"""The validation row (the format every provider returns) and what is derived from it: error, band position."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hwmodel.errors import HwmodelError

#: ``identity``: a leave-one-out that cannot change (the left-out point's value does not move with any refitted
#: parameter, e.g. it rests only on a value chosen on that very point); excluded from leave-one-out summaries
ROLES = ("fitted", "fitted-derived", "predicted", "leave-one-out", "identity")
AREAS = (
    "GPU",
    "GPU out-of-source",
    "edge",
    "HBM",
    "FPGA instruction",
    "FPGA power",
    "FPGA streaming",
    "system A",
    "system B",
)
REQUIRED = {"area": str, "name": str, "model": float, "unit": str, "role": str, "source": str}
OPTIONAL = (
    "published",
    "band",
    "free_params",
    "workload",
    "note",
    "bound",
    "bound_kind",
    "family",
    "quantity",
    "series",
    "setting",
    "families",
    "full_model",
    "model_band",
    "band_sources",
    "provider",
)
#: id fields, in order: what was measured, the coordinate a README group varies over (e.g. the dataset), the
#: workload, the setting (empty for the full study, ``quick: ...`` for a reduced one) and the role
ID_FIELDS = ("area", "quantity", "series", "workload", "setting", "role")


def row(
    area: str,
    name: str,
    model: float,
    unit: str,
    role: str,
    source: str,
    *,
    published: float | None = None,
    band: Sequence[float] | None = None,
    free_params: int | None = None,
    workload: str = "",
    note: str = "",
    bound: float | None = None,
    bound_kind: str = "",
    family: str = "",
    quantity: str = "",
    series: str = "",
    setting: str = "",
    families: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One validation row (see the package docstring); ``bound`` is the physical limit of the figure
    (``bound_kind``: ``"floor"`` for a time, ``"ceiling"`` for a rate); ``families``: the calibration families its
    model value depends on (their free parameters are the row's, :mod:`hwmodel.validate.dof`)."""
    return check(
        {
            "area": area,
            "name": name,
            "model": float(model),
            "published": published,
            "band": list(band) if band is not None else None,
            "unit": unit,
            "role": role,
            "free_params": free_params,
            "workload": workload,
            "source": source,
            "note": note,
            "bound": bound,
            "bound_kind": bound_kind,
            "family": family,
            "quantity": quantity,
            "series": series,
            "setting": setting,
            "families": list(families) if families is not None else None,
        }
    )


def check(r: Mapping[str, Any], origin: str = "validation row") -> dict[str, Any]:
    """Validate a provider's row (one-line error naming the row and the field); returns it completed."""
    out = dict(r)
    where = f"{origin} {out.get('name', '?')!r}"
    for field, typ in REQUIRED.items():
        v = out.get(field)
        if typ is float:
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise HwmodelError(f"{where}: field '{field}': expected a finite number, got {v!r}")
            out[field] = float(v)
        elif not isinstance(v, str) or not v:
            raise HwmodelError(f"{where}: field '{field}': expected a non-empty string, got {v!r}")
    if out["role"] not in ROLES:
        raise HwmodelError(f"{where}: field 'role': expected one of {', '.join(ROLES)}, got {out['role']!r}")
    pub, band = out.get("published"), out.get("band")
    if (pub is None) == (band is None):
        raise HwmodelError(f"{where}: expected exactly one of 'published' (a point) and 'band' (a range)")
    if band is not None and (len(band) != 2 or not band[0] <= band[1]):
        raise HwmodelError(f"{where}: field 'band': expected [lo, hi] with lo <= hi, got {band!r}")
    for k in OPTIONAL:
        out.setdefault(
            k,
            None
            if k
            in ("published", "band", "free_params", "bound", "families", "full_model", "model_band", "band_sources")
            else "",
        )
    for k in ("quantity", "series", "setting", "workload"):
        if out[k] is None:
            out[k] = ""
    if not out["quantity"]:
        out["quantity"] = out["name"]
    fams = out["families"]
    if fams is not None and (isinstance(fams, str) or not all(isinstance(f, str) and f for f in fams)):
        raise HwmodelError(f"{where}: field 'families': expected a list of family names, got {fams!r}")
    out["id"] = row_id(out)
    return out


def row_id(r: Mapping[str, Any]) -> str:
    """The row's stable identifier: area, quantity, series, workload, setting and role (:data:`ID_FIELDS`); two
    rows of one table never share it (the table refuses a duplicate)."""
    return " | ".join(str(r.get(f) or "") for f in ID_FIELDS)


def error(r: Mapping[str, Any]) -> float | None:
    """(model - published) / published for a point value; for a band, the relative distance outside it (0 inside)."""
    if r.get("published") is not None:
        return (r["model"] - r["published"]) / r["published"]
    lo, hi = r["band"]
    if lo <= r["model"] <= hi:
        return 0.0
    edge = lo if r["model"] < lo else hi
    return (r["model"] - edge) / edge if edge else math.inf


def band_position(r: Mapping[str, Any]) -> str:
    """ "inside", "below" or "above" a band ("" for a point value)."""
    if r.get("band") is None:
        return ""
    lo, hi = r["band"]
    return "inside" if lo <= r["model"] <= hi else ("below" if r["model"] < lo else "above")


def key(r: Mapping[str, Any]) -> str:
    """The row's id (:func:`row_id`): what the guards are keyed by."""
    return r["id"] if r.get("id") else row_id(check(r))


def legacy_key(r: Mapping[str, Any]) -> str:
    """The key of guards.json before rows had ids (area, name, role): kept to carry old guard values over."""
    return f"{r['area']}|{r['name']}|{r['role']}"
