"""Leave-one-out cross-validation of a calibration family: refit without each fitted point, then predict it.

A fitted point reproduced by its own fit says little; the same point predicted by a fit that never saw it says how
well the family would predict a point like it. For every fitted point ``i``:

1. the least-squares parameters are refitted on the other fitted points (same bounds, same start, same fixed
   constants and *choices* -- values a family picked outside least squares by looking at all fitted points, so the
   leave-one-out error is optimistic about them, and says so);
2. the refitted model predicts point ``i``; its error is the leave-one-out error.

Not every point can be left out. A parameter that only point ``i`` constrains (its sensitivity is zero on every
other fitted point, measured by a finite difference at the committed values) cannot be refitted without it; when
point ``i`` depends on such a parameter, the point has no leave-one-out prediction and the row says which parameter
is missing its other point. A refit with fewer remaining points than identifiable parameters is refused the same
way. A family with zero degrees of freedom typically has few or no leave-one-out predictions: that is the finding.

A leave-one-out that *cannot change* is an ``identity``: when the left-out point's value moves with none of the
refitted parameters (it rests only on fixed constants and values chosen on that very point -- the instruction
family's best prefetch ratio and the buffer size inferred from it), the refit reproduces it whatever the other
points say; such rows are flagged and kept out of leave-one-out summaries.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

from calibration.family import Family
from calibration.fit import fit
from calibration.measurements import Measurement, load_measurements
from calibration.params import load_values

#: relative change of a parameter used to probe which points it moves, and the relative change of a point's value
#: below which the point is taken not to depend on it
PROBE_STEP = 0.02
SENSITIVITY_FLOOR = 1e-6


@dataclasses.dataclass(frozen=True)
class LooRow:
    """One fitted point predicted by a refit without it (``model``/``error`` None when it cannot be)."""

    id: str
    measured: float
    model: float | None
    error: float | None  # (model - measured) / measured
    refit: Mapping[str, float]
    reason: str  # why there is no prediction, or what the prediction assumes
    identity: bool = False  # the prediction cannot differ from the committed fit's (see the module docstring)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def sensitivities(
    fam: Family, points: Sequence[Measurement], values: Mapping[str, float]
) -> dict[str, dict[str, float]]:
    """Relative change of every point's model value when each least-squares parameter moves by PROBE_STEP of its
    range-clipped value (point id -> parameter -> |relative change|)."""
    base = {p.id: fam.predict(values, p) for p in points}
    out: dict[str, dict[str, float]] = {p.id: {} for p in points}
    for par in fam.params:
        v = values[par.name]
        step = PROBE_STEP * max(abs(v), 0.05 * (par.upper - par.lower))
        moved = min(par.upper, v + step) if v + step <= par.upper else max(par.lower, v - step)
        trial = {**values, par.name: moved}
        for p in points:
            b = base[p.id]
            out[p.id][par.name] = abs(fam.predict(trial, p) - b) / abs(b) if b else math.inf
    return out


def leave_one_out(
    fam: Family, points: Sequence[Measurement] | None = None, params_file: str | None = None
) -> list[LooRow]:
    """A :class:`LooRow` for every fitted point of ``fam`` (file order)."""
    pts = list(points) if points is not None else load_measurements(fam.measurements_path)
    fitted = [p for p in pts if p.fitted]
    values = load_values(params_file if params_file is not None else fam.params_path)
    sens = sensitivities(fam, fitted, values)
    chose = f"; chosen values held ({', '.join(fam.choices)}), picked on all fitted points" if fam.choices else ""
    rows = []
    for pt in fitted:
        rest = [p for p in fitted if p.id != pt.id]
        free = [par for par in fam.params if any(sens[p.id][par.name] > SENSITIVITY_FLOOR for p in rest)]
        lost = [par.name for par in fam.params if par not in free]
        needs = [n for n in lost if sens[pt.id][n] > SENSITIVITY_FLOOR]
        if needs:
            rows.append(LooRow(pt.id, pt.value, None, None, {}, f"no other fitted point constrains {', '.join(needs)}"))
            continue
        if len(rest) < len(free):
            rows.append(
                LooRow(
                    pt.id,
                    pt.value,
                    None,
                    None,
                    {},
                    f"{len(rest)} fitted points left for {len(free)} least-squares parameters",
                )
            )
            continue
        # parameters nothing else constrains, and that this point does not depend on either, stay at the committed
        # value: no point in the refit or the prediction moves with them
        held = {**fam.fixed, **{n: values[n] for n in lost}}
        res = fit(rest, fam.predict, free, fixed=held)
        model = float(fam.predict(res.values, pt))
        note = f"refit of {len(free)} parameters on {len(rest)} points" + chose
        if lost:
            note += f"; {', '.join(lost)} unconstrained without it and irrelevant to it"
        identity = all(sens[pt.id][par.name] <= SENSITIVITY_FLOOR for par in free)
        if identity:
            note = "identity: the value moves with none of the refitted parameters, so the refit cannot change it" + (
                f" (it rests on {', '.join(fam.choices)}, chosen on the fitted points)" if fam.choices else ""
            )
        rows.append(
            LooRow(
                pt.id,
                pt.value,
                model,
                (model - pt.value) / pt.value,
                {par.name: float(res.values[par.name]) for par in free},
                note,
                identity,
            )
        )
    return rows
