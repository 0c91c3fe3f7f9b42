"""Guards: every predicted and leave-one-out error held at its committed value plus a small margin.

``hwmodel/validate/guards.json`` records, for every non-fitted row (predicted, fitted-derived, leave-one-out; point
values and bands alike), keyed by the row's id (:func:`hwmodel.validate.rows.row_id`), today's |error| (for a band:
the relative distance outside it, 0 inside) and, per area and role, the mean and largest |error|.
:func:`violations` compares a new set of rows with it: a row whose |error| grows past
``|error| x (1 + REL_MARGIN) + ABS_MARGIN``, a group whose mean or largest |error| does, or a guarded row that
disappeared, is named in the failure. Fitted and identity rows are not guarded by error (a fit reproduces them by
construction; ``hwmodel calibrate --check`` guards the fit itself).

A limit grows only with its reason beside it: ``hwmodel validate --update-guards`` (:func:`write_guards`) refuses
to record an |error| past its old limit unless ``--reason ID=TEXT`` names that row (or group), and the text is
stored in the row's entry (``reason``), where the next reader of the file sees it. An entry whose error fell keeps
its last reason.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hwmodel.errors import HwmodelError
from hwmodel.validate.rows import key, legacy_key

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
    return {
        "points": points,
        "groups": {g: {"mean": sum(v) / len(v), "max": max(v), "n": len(v)} for g, v in groups.items()},
    }


def _was(entry: Any) -> tuple[float, str]:
    """(|error|, reason) of a guard entry (a bare number in files written before reasons were kept)."""
    if isinstance(entry, Mapping):
        return float(entry["error"]), str(entry.get("reason", ""))
    return float(entry), ""


def updated(
    rows: Sequence[Mapping[str, Any]],
    old: Mapping[str, Any] | None,
    reasons: Mapping[str, str] | None = None,
    first_reason: str = "",
) -> dict[str, Any]:
    """The guard entries for ``rows`` given the ``old`` file: a value past its old limit needs ``reasons[id]``
    (one-line error naming every such row otherwise); the reason is stored beside it. A row the old file keyed
    by (area, name, role) is matched through :func:`legacy_key` when that key names one row only. ``first_reason``
    is stored for rows the old file did not guard."""
    reasons = dict(reasons or {})
    m = measure(rows)
    old_points = dict((old or {}).get("points", {}))
    old_groups = dict((old or {}).get("groups", {}))
    legacy: dict[str, list[str]] = {}
    for r in rows:
        if r["role"] in GUARDED_ROLES:
            legacy.setdefault(legacy_key(r), []).append(key(r))
    by_legacy = {ids[0]: k for k, ids in legacy.items() if len(ids) == 1 and k in old_points}
    missing: list[str] = []
    points: dict[str, Any] = {}
    for rid, e in m["points"].items():
        prev = old_points.get(rid, old_points.get(by_legacy.get(rid, ""), None))
        if prev is None:
            points[rid] = {"error": e, "reason": reasons.get(rid, first_reason)}
            continue
        was, why = _was(prev)
        if e > limit(was):
            if not reasons.get(rid):
                missing.append(f"{rid} ({100 * was:.2f} % -> {100 * e:.2f} %)")
            why = reasons.get(rid, "")
        points[rid] = {"error": e, "reason": why}
    groups: dict[str, Any] = {}
    for g, cur in m["groups"].items():
        prev = old_groups.get(g)
        why = str(prev.get("reason", "")) if prev else reasons.get(g, first_reason)
        if prev and any(cur[s] > limit(prev[s]) for s in ("mean", "max")):
            if not reasons.get(g):
                missing.append(f"{g} (group mean/max)")
            why = reasons.get(g, "")
        groups[g] = {**cur, "reason": why}
    if missing:
        raise HwmodelError(
            "guards: these limits would grow without a reason (pass --reason 'ID=why' for each): " + "; ".join(missing)
        )
    return {"points": points, "groups": groups}


def write_guards(
    rows: Sequence[Mapping[str, Any]],
    options: Mapping[str, Any] | None = None,
    path: Path = GUARDS_PATH,
    reasons: Mapping[str, str] | None = None,
    first_reason: str = "",
) -> Path:
    """Record today's errors (with the reason of every limit that grew, :func:`updated`), and the build options
    they were measured at (the tests rebuild at those)."""
    old = load_guards(path) if Path(path).is_file() else None
    doc = {
        "doc": "hwmodel/validate/guards.py: today's |error| per guarded row (keyed by row id); a value may grow to "
        f"|error| x {1 + REL_MARGIN} + {ABS_MARGIN}; a limit that grew carries its reason",
        "options": dict(options or {}),
        **updated(rows, old, reasons, first_reason),
    }
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return Path(path)


def load_guards(path: Path = GUARDS_PATH) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def violations(
    rows: Sequence[Mapping[str, Any]], guards: Mapping[str, Any] | None = None, partial: bool = False
) -> list[str]:
    """Every guarded value of ``rows`` that grew past its limit, named. ``partial``: ``rows`` is a subset (a
    missing guarded row is not a violation, group statistics are not compared)."""
    g = guards if guards is not None else load_guards()
    now = measure(rows)
    out = []
    for k, entry in g["points"].items():
        was = _was(entry)[0]
        if k not in now["points"]:
            if not partial:
                out.append(f"{k}: guarded row is missing")
            continue
        if now["points"][k] > limit(was):
            out.append(
                f"{k}: |error| {100 * now['points'][k]:.2f} % > guard {100 * limit(was):.2f} % (was {100 * was:.2f} %)"
            )
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
