"""The validation row (the format every provider returns) and what is derived from it: error, band position."""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from hwmodel.errors import HwmodelError

ROLES = ("fitted", "fitted-derived", "predicted", "leave-one-out")
AREAS = ("GPU", "edge", "HBM", "FPGA instruction", "FPGA streaming", "system A", "system B")
REQUIRED = {"area": str, "name": str, "model": float, "unit": str, "role": str, "source": str}
OPTIONAL = ("published", "band", "free_params", "workload", "note", "bound", "bound_kind", "family")


def row(area: str, name: str, model: float, unit: str, role: str, source: str, *, published: float | None = None,
        band: Sequence[float] | None = None, free_params: int | None = None, workload: str = "", note: str = "",
        bound: float | None = None, bound_kind: str = "", family: str = "") -> dict[str, Any]:
    """One validation row (see the package docstring); ``bound`` is the physical limit of the figure
    (``bound_kind``: ``"floor"`` for a time, ``"ceiling"`` for a rate)."""
    return check({"area": area, "name": name, "model": float(model), "published": published,
                  "band": list(band) if band is not None else None, "unit": unit, "role": role,
                  "free_params": free_params, "workload": workload, "source": source, "note": note,
                  "bound": bound, "bound_kind": bound_kind, "family": family})


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
        out.setdefault(k, None if k in ("published", "band", "free_params", "bound") else "")
    return out


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
    """"inside", "below" or "above" a band ("" for a point value)."""
    if r.get("band") is None:
        return ""
    lo, hi = r["band"]
    return "inside" if lo <= r["model"] <= hi else ("below" if r["model"] < lo else "above")


def key(r: Mapping[str, Any]) -> str:
    """A stable identifier of a row (guards and de-duplication): area, name and role."""
    return f"{r['area']}|{r['name']}|{r['role']}"
