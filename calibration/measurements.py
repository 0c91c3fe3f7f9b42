"""Measured points: one CSV row per measurement, with its source and its role in calibration.

Schema (``calibration/measurements/*.csv``; the same for every device family)::

    id, subject, quantity, value, unit, role, source, notes, <condition columns...>

* ``id`` -- unique within the file (a short slug);
* ``subject`` -- what was measured (a GPU spec name, an FPGA design name...);
* ``quantity`` -- what the value is (e.g. ``prefill_s``, ``decode_s_per_token``, ``generate_tokens_per_s``);
  the model family decides which quantities it can predict;
* ``value``, ``unit`` -- the measured number and its unit (checked against the quantity by the model family);
* ``role`` -- ``fitted`` (used by the fit), ``predicted`` (held out; the report shows the model's error) or
  ``fitted-derived`` (not used by the fit, but the model's value follows from fitted points by identity -- e.g. a
  utilization = fixed bytes / fitted time / peak -- so matching it is no evidence of predictive power);
* ``source`` -- where the number comes from (paper table, repository file and commit, script + machine);
* ``notes`` -- free text (assumptions made when the source is vague);
* any further columns are *conditions* of the measurement (LLM, framework, token counts, clock...), empty when not
  applicable. Lines starting with ``#`` are comments.

Errors name the file, the line and the column.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from hwmodel.errors import HwmodelError

REQUIRED = ("id", "subject", "quantity", "value", "unit", "role", "source")
ROLES = ("fitted", "predicted", "fitted-derived")
MEASUREMENTS_DIR = Path(__file__).resolve().parent / "measurements"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class MeasurementError(HwmodelError):
    """A measurement file or row is malformed (the message names the file, the line and the column)."""


@dataclasses.dataclass(frozen=True)
class Measurement:
    """One measured point."""

    id: str
    subject: str
    quantity: str
    value: float
    unit: str
    role: str
    source: str
    notes: str = ""
    conditions: Mapping[str, str] = dataclasses.field(default_factory=dict)
    origin: str = ""  # "file:line", for error messages

    @property
    def fitted(self) -> bool:
        return self.role == "fitted"

    def has(self, name: str) -> bool:
        return bool(self.conditions.get(name, ""))

    def text(self, name: str, default: str | None = None) -> str:
        """A condition as text (an error naming the row when it is missing and has no default)."""
        raw = self.conditions.get(name, "")
        if raw:
            return raw
        if default is not None:
            return default
        raise MeasurementError(f"{self.origin}: column '{name}': expected a value for measurement '{self.id}'")

    def integer(self, name: str, default: int | None = None) -> int:
        raw = self.conditions.get(name, "")
        if not raw:
            if default is not None:
                return default
            raise MeasurementError(f"{self.origin}: column '{name}': expected an integer for measurement '{self.id}'")
        try:
            return int(raw)
        except ValueError:
            raise MeasurementError(f"{self.origin}: column '{name}': expected an integer, got {raw!r}") from None

    def number(self, name: str, default: float | None = None) -> float:
        raw = self.conditions.get(name, "")
        if not raw:
            if default is not None:
                return default
            raise MeasurementError(f"{self.origin}: column '{name}': expected a number for measurement '{self.id}'")
        try:
            return float(raw)
        except ValueError:
            raise MeasurementError(f"{self.origin}: column '{name}': expected a number, got {raw!r}") from None


def expect_quantity(pt: Measurement, units: Mapping[str, str], model: str) -> None:
    """Refuse a point whose quantity ``model`` does not predict, or whose unit is not that quantity's (one line)."""
    if pt.quantity not in units:
        raise MeasurementError(
            f"{pt.origin}: column 'quantity': {model} predicts {', '.join(units)}; got {pt.quantity!r}"
        )
    if pt.unit != units[pt.quantity]:
        raise MeasurementError(
            f"{pt.origin}: column 'unit': expected {units[pt.quantity]!r} for {pt.quantity}, got {pt.unit!r}"
        )


def load_measurements(path: Path | str) -> list[Measurement]:
    """Read and validate one measurement CSV."""
    path = Path(path)
    from hwmodel.io import errors_as, read_text

    with errors_as(MeasurementError):
        text = read_text(path, "measurement CSV")
    lines = [(i + 1, ln) for i, ln in enumerate(text.splitlines()) if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise MeasurementError(f"{path}: no header row")
    reader = csv.reader([ln for _i, ln in lines])
    header = [h.strip() for h in next(reader)]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise MeasurementError(
            f"{path}:{lines[0][0]}: header: expected columns {', '.join(REQUIRED)} (missing {', '.join(missing)})"
        )
    dup = sorted({h for h in header if header.count(h) > 1})
    if dup:
        raise MeasurementError(f"{path}:{lines[0][0]}: header: duplicate column {dup[0]!r}")
    out: list[Measurement] = []
    seen: set[str] = set()
    for (lineno, _ln), row in zip(lines[1:], reader):
        where = f"{path}:{lineno}"
        if len(row) != len(header):
            raise MeasurementError(f"{where}: expected {len(header)} columns, got {len(row)}")
        cells = {h: c.strip() for h, c in zip(header, row)}
        for col in REQUIRED:
            if not cells[col]:
                raise MeasurementError(f"{where}: column '{col}': expected a value")
        if not _ID_RE.match(cells["id"]):
            raise MeasurementError(
                f"{where}: column 'id': expected letters, digits, '.', '_' or '-', got {cells['id']!r}"
            )
        if cells["id"] in seen:
            raise MeasurementError(f"{where}: column 'id': {cells['id']!r} is used twice")
        seen.add(cells["id"])
        try:
            value = float(cells["value"])
        except ValueError:
            raise MeasurementError(f"{where}: column 'value': expected a number, got {cells['value']!r}") from None
        if not math.isfinite(value) or value <= 0:
            raise MeasurementError(
                f"{where}: column 'value': expected a positive finite number, got {cells['value']!r}"
            )
        if cells["role"] not in ROLES:
            raise MeasurementError(f"{where}: column 'role': expected one of {', '.join(ROLES)}, got {cells['role']!r}")
        conditions = {k: v for k, v in cells.items() if k not in REQUIRED and k != "notes"}
        out.append(
            Measurement(
                id=cells["id"],
                subject=cells["subject"],
                quantity=cells["quantity"],
                value=value,
                unit=cells["unit"],
                role=cells["role"],
                source=cells["source"],
                notes=cells.get("notes", ""),
                conditions=conditions,
                origin=where,
            )
        )
    return out


def write_measurements(path: Path | str, points: Iterable[Measurement], condition_columns: Iterable[str]) -> None:
    """Write points in the schema above (for scripts that add measured points)."""
    cols = [*REQUIRED, "notes", *condition_columns]
    from hwmodel.report.tables import write_csv

    def cells(p: Measurement) -> list[object]:
        base = {
            "id": p.id,
            "subject": p.subject,
            "quantity": p.quantity,
            "value": repr(p.value),
            "unit": p.unit,
            "role": p.role,
            "source": p.source,
            "notes": p.notes,
        }
        return [base.get(c, p.conditions.get(c, "")) for c in cols]

    write_csv(path, (cells(p) for p in points), cols, line_end="\r\n", cells="plain")  # CRLF, as always written
