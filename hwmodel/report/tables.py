"""Tables: CSV files and Markdown tables (generic; rows are mappings or sequences)."""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hwmodel.io import atomic_open  # whole files or none: a full disk never leaves a short table


def write_csv(
    path: Path | str,
    rows: Iterable[Mapping[str, Any] | Sequence[Any]],
    fields: Sequence[str],
    *,
    line_end: str = "\n",
    cells: str = "model",
) -> Path:
    """Write the header ``fields`` then ``rows`` (each a mapping, its cells by field name, or a sequence of cells in
    column order); deterministic, whole file or none.

    ``cells="model"``: floats with full precision (``repr``), non-finite ones empty; ``cells="plain"``: every cell
    as Python's csv module writes it (``str``, ``None`` empty) -- for files whose cells the caller formats itself.
    ``line_end``: ``"\n"``, or ``"\r\n"`` (the csv module's default, RFC 4180) for the files that have always been
    written with it (request streams, measurements, calibration tables), so their bytes do not change."""
    if cells not in ("model", "plain"):
        raise ValueError(f"cells must be 'model' or 'plain', got {cells!r}")
    model = cells == "model"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator=line_end)
        w.writerow(list(fields))
        for row in rows:
            vals = [row.get(k) for k in fields] if hasattr(row, "get") else row
            w.writerow([_cell(v) for v in vals] if model else vals)
    return path


def csv_lines(rows: Iterable[Sequence[Any]]) -> str:
    """The CSV text of ``rows`` (sequences of values, in column order), cell by cell as :func:`write_csv` writes
    them: ``write_csv_text(path, fields, [csv_lines(...)])`` is byte-identical to ``write_csv`` of the same rows as
    mappings. Lets a caller format rows once and write them into several files."""
    buf = io.StringIO(newline="")
    w = csv.writer(buf, lineterminator="\n")
    # _cell inlined (a full system-A reproduction formats ~3.3 million cells): ``v - v == 0`` is math.isfinite(v)
    w.writerows([(repr(v) if v - v == 0 else "") if isinstance(v, float) else v for v in row] for row in rows)
    return buf.getvalue()


def write_csv_text(path: Path | str, fields: Sequence[str], bodies: Iterable[str]) -> Path:
    """Write the header ``fields`` then the CSV texts ``bodies`` (from :func:`csv_lines`) in order."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w", newline="", encoding="utf-8") as fh:
        fh.write(csv_lines([list(fields)]))
        for body in bodies:
            fh.write(body)
    return path


def read_csv(path: Path | str) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _cell(v: Any) -> Any:
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ""
    return v


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]], align: str | None = None) -> str:
    """A GitHub-flavoured Markdown table; ``align`` is one character per column (l, r or c), default l then r."""
    headers = [str(h) for h in headers]
    align = align or ("l" + "r" * (len(headers) - 1))
    marks = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(marks[a] for a in align) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def fmt(value: float | None, digits: int = 3) -> str:
    """A number with ``digits`` significant digits, '-' for missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}g}"
