"""Guards: every predicted and leave-one-out error held at its committed value plus a small margin.

``hwmodel/validate/guards.json`` records, for every non-fitted row (predicted, fitted-derived, leave-one-out; point
values and bands alike), today's |error| (for a band: the relative distance outside it, 0 inside) and, per area and
role, the mean and largest |error|. :func:`violations` compares a new set of rows with it: a row whose |error| grows
past ``|error| x (1 + REL_MARGIN) + ABS_MARGIN``, a group whose mean or largest |error| does, or a guarded row that
disappeared, is named in the failure. Fitted rows are not guarded by error (a fit reproduces them by construction;
``hwmodel calibrate --check`` guards the fit itself). ``hwmodel validate --update-guards`` rewrites the file -- a
change that does so must say in its commit why an error grew.
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hwmodel.validate.rows import key

GUARDS_PATH = Path(__file__).resolve().parent / "guards.json"
REL_MARGIN = 0.05
ABS_MARGIN = 0.005  # half a percentage point
GUARDED_ROLES = ("predicted", "fitted-derived", "leave-one-out")


def limit(abs_error: float) -> float:
    """The largest |error| a guarded value may reach."""
    return abs_error * (1 + REL_MARGIN) + ABS_MARGIN


def measure(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """|error| per guarded row, and mean / largest |error| per (area, role)."""
    points = {key(r): abs(float(r["error"])) for r in rows if r["role"] in GUARDED_ROLES}
    groups: dict[str, list[float]] = {}
    for r in rows:
        if r["role"] in GUARDED_ROLES:
            groups.setdefault(f"{r['area']}|{r['role']}", []).append(abs(float(r["error"])))
    return {"points": points,
            "groups": {g: {"mean": sum(v) / len(v), "max": max(v), "n": len(v)} for g, v in groups.items()}}


def write_guards(rows: Sequence[Mapping[str, Any]], options: Mapping[str, Any] | None = None,
                 path: Path = GUARDS_PATH) -> Path:
    """Record today's errors, and the build options they were measured at (the tests rebuild at those)."""
    m = measure(rows)
    doc = {"doc": "hwmodel/validate/guards.py: today's |error| per guarded row; a value may grow to "
                  f"|error| x {1 + REL_MARGIN} + {ABS_MARGIN}", "options": dict(options or {}), **m}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return path


def load_guards(path: Path = GUARDS_PATH) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def violations(rows: Sequence[Mapping[str, Any]], guards: Mapping[str, Any] | None = None,
               partial: bool = False) -> list[str]:
    """Every guarded value of ``rows`` that grew past its limit, named. ``partial``: ``rows`` is a subset (a
    missing guarded row is not a violation, group statistics are not compared)."""
    g = guards if guards is not None else load_guards()
    now = measure(rows)
    out = []
    for k, was in g["points"].items():
        if k not in now["points"]:
            if not partial:
                out.append(f"{k}: guarded row is missing")
            continue
        if now["points"][k] > limit(was):
            out.append(f"{k}: |error| {100 * now['points'][k]:.2f} % > guard {100 * limit(was):.2f} % "
                       f"(was {100 * was:.2f} %)")
    if not partial:
        for grp, was in g["groups"].items():
            cur = now["groups"].get(grp)
            if cur is None:
                out.append(f"{grp}: guarded group is missing")
                continue
            for stat in ("mean", "max"):
                if cur[stat] > limit(was[stat]):
                    out.append(f"{grp}: {stat} |error| {100 * cur[stat]:.2f} % > guard {100 * limit(was[stat]):.2f} %")
    return out
