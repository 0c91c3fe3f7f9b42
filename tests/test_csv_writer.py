"""The one CSV writer (hwmodel.report.tables.write_csv): mapping and sequence rows give the same bytes; the line
ending and the cell style are options, so files written with the csv module's defaults keep their bytes."""

from __future__ import annotations

import csv
from pathlib import Path

from hwmodel.report.tables import write_csv

FIELDS = ["a", "b", "c"]
ROWS = [{"a": 1, "b": 0.1 + 0.2, "c": "x, y"}, {"a": None, "b": float("nan"), "c": 'q"'}]


def test_mapping_and_sequence_rows_are_the_same_bytes(tmp_path: Path) -> None:
    m = write_csv(tmp_path / "m.csv", ROWS, FIELDS).read_bytes()
    s = write_csv(tmp_path / "s.csv", ([r[k] for k in FIELDS] for r in ROWS), FIELDS).read_bytes()
    assert m == s == b'a,b,c\n1,0.30000000000000004,"x, y"\n,,"q"""\n'


def test_plain_crlf_is_what_the_csv_module_writes(tmp_path: Path) -> None:
    with open(tmp_path / "ref.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS)
        w.writeheader()
        w.writerows(ROWS)
    ours = write_csv(tmp_path / "ours.csv", ROWS, FIELDS, line_end="\r\n", cells="plain")
    assert ours.read_bytes() == (tmp_path / "ref.csv").read_bytes()
