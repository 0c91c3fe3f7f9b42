"""The results file of a sweep: a CSV journal appended as points finish, fsync'd, safe to kill at any moment.

Each row is one finished point: ``point_id``, ``status``, the parameters, every metric of the evaluator and a
``message``. Status is ``ok`` (evaluated), ``screened`` (excluded by the evaluator's cheap estimate; only the
metrics known exactly are filled) or ``invalid`` (the evaluator refused the point, e.g. a design that does not
validate; the reason is in ``message``). Whether a point is *feasible* is decided when reporting, from the
current constraints, so tightening a constraint and rerunning needs no re-evaluation.

Robustness:

* rows are written whole and the file is flushed and fsync'd after each batch, so a killed sweep loses at most
  the points still being evaluated;
* a torn last line (the process killed mid-write) is cut off when the file is reopened;
* floats are written in shortest round-trip form (``repr``), so reading back gives the same bits;
* an exclusive lock (``fcntl.flock``) stops two sweeps from appending to the same file;
* a file written by a different sweep (other columns) is refused rather than mixed.

CSV was chosen over Parquet: it appends line by line (Parquet files are immutable once their footer is written)
and needs no extra dependency; it loads directly into any dataframe library.
"""
from __future__ import annotations

import csv
import dataclasses
import io
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from hwmodel.dse.evaluators import Evaluator
from hwmodel.dse.space import Params, Scalar
from hwmodel.errors import HwmodelError

STATUSES = ("ok", "screened", "invalid")


@dataclasses.dataclass(frozen=True)
class Row:
    """One finished point as stored: metrics absent from the file (screened points) are NaN."""

    point_id: str
    status: str
    params: Params
    metrics: dict[str, float]
    message: str = ""


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else repr(v)
    return str(v)


def _parse_param(kind: type, text: str) -> Scalar:
    if kind is bool:
        return text == "true"
    if kind is int:
        return int(text)
    if kind is float:
        return float(text)
    return text


class ResultStore:
    """Append-only CSV results of one sweep (see the module docstring)."""

    def __init__(self, path: Path | str, evaluator: Evaluator, param_names: Sequence[str]) -> None:
        self.path = Path(path)
        self.evaluator = evaluator
        self.param_names = tuple(param_names)
        self.columns = ("point_id", "status", *self.param_names, *evaluator.metric_names, "message")
        self._fh: IO[str] | None = None

    # ---- reading
    def read(self) -> dict[str, Row]:
        """Rows already in the file, the last one per point id (a later evaluation supersedes a screening)."""
        if not self.path.exists():
            return {}
        from hwmodel.io import read_text

        text = read_text(self.path, "sweep results journal (CSV)")
        if not text:
            return {}
        complete = text if text.endswith("\n") else text[: text.rfind("\n") + 1]
        reader = csv.reader(io.StringIO(complete))
        try:
            header = next(reader, None)
        except csv.Error as exc:
            raise HwmodelError(f"{self.path}:1: malformed results header ({exc}); "
                               "rerun with --fresh to discard the file") from None
        if header is None:
            return {}
        if tuple(header) != self.columns:
            shown = ", ".join(repr(h)[1:-1][:40] for h in header[:40])  # one line, whatever the cells hold
            raise HwmodelError(
                f"{self.path}: written by a different sweep (columns {shown}; this sweep writes "
                f"{', '.join(self.columns)}); choose another --out directory or rerun with --fresh to discard it")
        kinds = {}
        for n in self.param_names:
            decl = self.evaluator.param(n)
            kinds[n] = decl.kind if decl is not None else str
        np_ = len(self.param_names)
        metric_names = self.evaluator.metric_names
        rows: dict[str, Row] = {}
        try:
            for lineno, rec in enumerate(reader, start=2):
                if len(rec) != len(self.columns) or rec[1] not in STATUSES:
                    raise HwmodelError(f"{self.path}:{lineno}: malformed results row; "
                                       "rerun with --fresh to discard the file")
                try:
                    params = {n: _parse_param(kinds[n], t) for n, t in zip(self.param_names, rec[2:2 + np_])}
                    vals = rec[2 + np_: 2 + np_ + len(metric_names)]
                    metrics = {m: float(t) if t else math.nan for m, t in zip(metric_names, vals)}
                except ValueError as exc:
                    raise HwmodelError(f"{self.path}:{lineno}: malformed results row ({exc}); "
                                       "rerun with --fresh to discard the file") from None
                rows[rec[0]] = Row(rec[0], rec[1], params, metrics, rec[-1])
        except csv.Error as exc:
            raise HwmodelError(f"{self.path}:{reader.line_num}: malformed results row ({exc}); "
                               "rerun with --fresh to discard the file") from None
        return rows

    # ---- writing
    def open(self, *, fresh: bool = False) -> dict[str, Row]:
        """Open for appending (locking the file); returns the rows already there. ``fresh`` discards them."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if fresh and self.path.exists():
            self.path.unlink()
        rows = self.read()
        fh = open(self.path, "a+", newline="", encoding="utf-8")
        try:
            import fcntl

            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - not POSIX: no lock
            pass
        except OSError:
            fh.close()
            raise HwmodelError(f"{self.path} is being written by another sweep; "
                               "wait for it or use another --out") from None
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size:
            # cut a torn last line (a process killed mid-write) so the next row starts on its own line
            fh.seek(0)
            data = fh.read()
            keep = data[: data.rfind("\n") + 1] if not data.endswith("\n") else data
            if keep != data:
                fh.truncate(len(keep.encode()))
            fh.seek(0, os.SEEK_END)
        if not rows and fh.tell() == 0:
            fh.write(",".join(self.columns) + "\n")
            self._sync(fh)
        self._fh = fh
        return rows

    def append(self, rows: Iterable[Row]) -> None:
        """Write ``rows`` whole, then flush and fsync (a killed process keeps every row written here)."""
        assert self._fh is not None, "ResultStore.open() first"
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for r in rows:
            w.writerow([r.point_id, r.status, *(_fmt(r.params[n]) for n in self.param_names),
                        *(_fmt(r.metrics[m]) if m in r.metrics else "" for m in self.evaluator.metric_names),
                        r.message])
        self._fh.write(buf.getvalue())
        self._sync(self._fh)

    @staticmethod
    def _sync(fh: IO[str]) -> None:
        fh.flush()
        os.fsync(fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing releases the flock
            self._fh = None

    def __enter__(self) -> ResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rows_equal(a: Mapping[str, Row], b: Mapping[str, Row]) -> bool:
    """Same point ids with bit-identical parameters, metrics (NaN equal to NaN), status and message."""
    if a.keys() != b.keys():
        return False
    for k, ra in a.items():
        rb = b[k]
        if (ra.status, ra.params, ra.message) != (rb.status, rb.params, rb.message):
            return False
        if ra.metrics.keys() != rb.metrics.keys():
            return False
        for m, x in ra.metrics.items():
            y = rb.metrics[m]
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                return False
    return True
