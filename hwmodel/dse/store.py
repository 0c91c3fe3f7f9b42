"""The results file of a sweep: a CSV journal appended as points finish, fsync'd, safe to kill at any moment.

Each row is one finished point: ``point_id``, ``status``, the parameters, every metric of the evaluator and a
``message``. Status is ``ok`` (evaluated), ``screened`` (excluded by the evaluator's cheap estimate; only the
metrics known exactly are filled) or ``invalid`` (the evaluator refused the point, e.g. a design that does not
validate; the reason is in ``message``). Whether a point is *feasible* is decided when reporting, from the
current constraints, so tightening a constraint and rerunning needs no re-evaluation.

Robustness:

* rows are written whole and the file is flushed and fsync'd after each batch, so a killed sweep loses at most
  the points still being evaluated;
* a torn last line (the process killed mid-write) is cut off when the file is reopened; a damaged row (bytes
  that are not UTF-8, a wrong number of cells, a value that does not parse) ends what is kept, with one line on
  stderr, and the points from there on are evaluated again; a damaged header moves the file aside;
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
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from hwmodel.dse.evaluators import Evaluator
from hwmodel.dse.space import Params, Scalar
from hwmodel.errors import HwmodelError
from hwmodel.io import note_damaged, open_locked

STATUSES = ("ok", "screened", "invalid")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*")  # a column name: a header of names is another sweep's


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
        """Rows already in the file, the last one per point id (a later evaluation supersedes a screening). A
        damaged part ends what is read (one line on stderr); a file of another sweep is refused."""
        rows, _good, problem = self._scan()
        if problem:
            note_damaged(self.path, "results journal", problem, f"reading the {len(rows)} rows before it")
        return rows

    def _scan(self) -> tuple[dict[str, Row], int, str]:
        """(rows, bytes of the file that are whole rows of this sweep, the damage that ended the scan or '').

        A torn last line (a kill mid-write) is simply not counted; bytes that are not UTF-8, a row with the wrong
        number of cells, an unknown status or a value that does not parse end the scan there. A header that is
        not this sweep's raises: another sweep's file (a header of names) is refused rather than overwritten."""
        if not self.path.exists():
            return {}, 0, ""
        try:
            raw = self.path.read_bytes()
        except OSError as exc:
            raise HwmodelError(f"{self.path}: {exc.strerror or exc}") from None
        problem = ""
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            text = raw[: exc.start].decode("utf-8")
            problem = f"byte 0x{raw[exc.start]:02x} at offset {exc.start} is not UTF-8"
        complete = text[: text.rfind("\n") + 1]
        if not complete:
            return {}, 0, "" if not problem else problem
        starts = [0]
        for line in complete.splitlines(keepends=True):
            starts.append(starts[-1] + len(line))
        reader = csv.reader(io.StringIO(complete, newline=""))
        try:
            header = next(reader, None)
        except csv.Error as exc:
            header, problem = None, f"malformed header ({exc})"
        if header is None or tuple(header) != self.columns:
            if header is not None and header and all(_NAME.fullmatch(h) for h in header):
                shown = ", ".join(h[:40] for h in header[:40])
                raise HwmodelError(
                    f"{self.path}: written by a different sweep (columns {shown}; this sweep writes "
                    f"{', '.join(self.columns)}); choose another --out directory or rerun with --fresh to discard it"
                )
            return {}, 0, problem or "the first line is not a results header"
        good = starts[reader.line_num]
        kinds = {}
        for n in self.param_names:
            decl = self.evaluator.param(n)
            kinds[n] = decl.kind if decl is not None else str
        np_ = len(self.param_names)
        metric_names = self.evaluator.metric_names
        rows: dict[str, Row] = {}
        lineno = reader.line_num + 1
        try:
            for rec in reader:
                if len(rec) != len(self.columns) or rec[1] not in STATUSES:
                    problem = f"line {lineno}: a row with {len(rec)} cells or an unknown status"
                    break
                try:
                    params = {n: _parse_param(kinds[n], t) for n, t in zip(self.param_names, rec[2 : 2 + np_])}
                    vals = rec[2 + np_ : 2 + np_ + len(metric_names)]
                    metrics = {m: float(t) if t else math.nan for m, t in zip(metric_names, vals)}
                except ValueError as exc:
                    problem = f"line {lineno}: {exc}"
                    break
                rows[rec[0]] = Row(rec[0], rec[1], params, metrics, rec[-1])
                good = starts[reader.line_num]
                lineno = reader.line_num + 1
        except csv.Error as exc:
            problem = f"line {lineno}: {exc}"
        return rows, len(complete[:good].encode("utf-8")), problem

    # ---- writing
    def open(self, *, fresh: bool = False) -> dict[str, Row]:
        """Open for appending (locking the file); returns the rows already there. ``fresh`` discards them. A torn
        last line is cut; from a damaged row on, the file is cut too (one line on stderr) and those points are
        evaluated again; a damaged header moves the file aside (``results.csv.damaged``) and starts afresh."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        busy = HwmodelError(f"{self.path} is being written by another sweep; wait for it or use another --out")
        fh = open_locked(self.path, "a+", busy, newline="", encoding="utf-8")
        try:
            if fresh:
                rows, good, problem = {}, 0, ""
            else:
                rows, good, problem = self._scan()
            if problem and good == 0 and self.path.stat().st_size:
                aside = self.path.with_name(self.path.name + ".damaged")
                os.replace(self.path, aside)  # keep what was there: a header that is not ours may be a user's
                note_damaged(self.path, "results journal", problem, f"moved to {aside.name}, starting afresh")
                fh.close()
                fh = open_locked(self.path, "a+", busy, newline="", encoding="utf-8")
            elif problem:
                note_damaged(
                    self.path,
                    "results journal",
                    problem,
                    f"keeping the {len(rows)} rows before it, the rest are evaluated again",
                )
            fh.truncate(good)
            fh.seek(0, os.SEEK_END)
            if good == 0:
                fh.write(",".join(self.columns) + "\n")
                self._sync(fh)
        except BaseException:
            fh.close()
            raise
        self._fh = fh
        return rows

    def append(self, rows: Iterable[Row]) -> None:
        """Write ``rows`` whole, then flush and fsync (a killed process keeps every row written here)."""
        assert self._fh is not None, "ResultStore.open() first"
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for r in rows:
            w.writerow(
                [
                    r.point_id,
                    r.status,
                    *(_fmt(r.params[n]) for n in self.param_names),
                    *(_fmt(r.metrics[m]) if m in r.metrics else "" for m in self.evaluator.metric_names),
                    r.message,
                ]
            )
        self._fh.write(buf.getvalue())
        self._sync(self._fh)

    def rewrite_in_order(self, order: Sequence[str]) -> None:
        """Rewrite a finished sweep's file with one record per point, the last one of each point id, in ``order``
        (the plan's point order; ids not in it after, sorted). Points finish in an order that depends on the
        workers' timing; after this the file is the same bytes whatever the worker count or the finishing order,
        and :meth:`read` returns the same rows as before. The cells are the ones written (read back as text), so no
        value is re-formatted. Atomic: a temporary file renamed over the journal, so a kill mid-way leaves the
        journal as it was. Called with the file open (the lock held)."""
        assert self._fh is not None, "ResultStore.open() first"
        text = self.path.read_text(encoding="utf-8")
        records = list(csv.reader(io.StringIO(text[: text.rfind("\n") + 1], newline="")))
        last = {rec[0]: rec for rec in records[1:] if rec}
        rank = {pid: i for i, pid in enumerate(order)}
        ids = sorted(last, key=lambda pid: (rank.get(pid, len(rank)), pid))
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.columns)
        w.writerows(last[pid] for pid in ids)
        tmp = self.path.with_name(self.path.name + ".sorting")
        with open(tmp, "w", newline="", encoding="utf-8") as fh:
            fh.write(buf.getvalue())
            self._sync(fh)
        os.replace(tmp, self.path)

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
