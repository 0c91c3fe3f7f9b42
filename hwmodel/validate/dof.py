"""Degrees of freedom of a validation row, computed from the families its model value depends on (never typed).

A row names its ``families`` (or inherits its area's, :data:`AREA_FAMILIES`); its free-parameter count is the sum
of those families' free parameters, so a composed row (an FPGA/GPU ratio, a system result) counts both sides. A
family is either a calibration family (:data:`calibration.family.REGISTRY`: least-squares parameters plus values
chosen on the same points, :func:`calibration.family.accounting`) or one of the fits made elsewhere, declared here
by the names of its parameters (:data:`DECLARED`) -- the count is the length of that list.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from hwmodel.errors import HwmodelError

#: fits made outside calibration/ (family -> the names of its free parameters and where each is fitted)
DECLARED: dict[str, tuple[str, ...]] = {
    "hbm": ("latency_page_hit_cycles: fitted to Shuhai's U280 page-hit latency (hwmodel/validate/hbm.py)",),
    "streaming-clock": (
        ("the FlexLLM mem_opt design's achieved clock, fitted to the published 1.64x (hwmodel/validate/streaming.py)"),
    ),
    "acceptance": tuple(
        f"first-pass step rejection rate of {d} (hwmodel/workload/acceptance.py)"
        for d in ("math500", "gsm8k", "gaokao2023en", "olympiadbench")
    ),
    "backtrack": ("target_hazard_ratio of config1's target", "target_hazard_ratio of config2's target"),
}
#: the families a row depends on when its provider names none
AREA_FAMILIES: dict[str, tuple[str, ...]] = {
    "HBM": ("hbm",),
    "HBM peer": ("hbm",),
    "GPU": ("gpu",),
    "GPU out-of-source": ("gpu",),
    "edge": ("gpu",),
    "FPGA instruction": ("fpga-instruction",),
}


@functools.lru_cache(maxsize=1)
def family_params() -> dict[str, tuple[str, ...]]:
    """Every known family -> the names of its free parameters."""
    from calibration.family import accounting, get_family, names

    out = dict(DECLARED)
    for name in names():
        a = accounting(get_family(name))
        out[name] = tuple(a.least_squares) + tuple(a.choices)
    return out


def families_of(r: Mapping[str, Any]) -> tuple[str, ...]:
    """The families of row ``r``: its own list, else its area's (one-line error when neither is known)."""
    fams = r.get("families")
    if fams is None:
        fams = AREA_FAMILIES.get(r["area"])
    if fams is None:
        raise HwmodelError(
            f"validation row {r['id']!r}: field 'families': expected the families its model value "
            f"depends on (area {r['area']!r} has no default)"
        )
    return tuple(dict.fromkeys(fams))


def free_params(families: Sequence[str]) -> int:
    """Free parameters behind a value that depends on ``families`` (each family counted once)."""
    known = family_params()
    missing = [f for f in families if f not in known]
    if missing:
        raise HwmodelError(f"unknown family {', '.join(map(repr, missing))}; valid choices: {', '.join(known)}")
    return sum(len(known[f]) for f in dict.fromkeys(families))
