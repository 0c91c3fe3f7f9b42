"""Mutation strategies for the reader fuzz tests (tests/test_fuzz_readers.py): each one starts from a real, valid
file and breaks it the way users and disks do -- bytes (truncation, garbage, non-UTF-8, NUL, gzip with and without
its name, truncated gzip), structure (a key deleted, duplicated, misspelt) and values (wrong types, impossible
numbers) -- so every example exercises the reader's error paths, not just its happy path."""

from __future__ import annotations

import gzip
import itertools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from hypothesis import strategies as st

from hwmodel.errors import HwmodelError

_counter = itertools.count()

# Values that are wrong for (almost) every field: wrong types, or numbers no physical quantity takes.
TOML_BAD_LITERALS = (
    "-1",
    "0",
    "-0.5",
    "nan",
    "inf",
    "-inf",
    "1e308",
    "-1e308",
    "100000000000000000000000",
    '"x"',
    '""',
    "true",
    "false",
    "[]",
    "[1, 2]",
    "{}",
    '{ value = -1, source = "s" }',
    '{ value = nan, source = "s" }',
    "{ value = 1 }",
    '{ source = "s" }',
    '{ value = 1, source = "" }',
    "1979-05-27",
    '"\\u0000"',
    "'[/bold]'",
)
IMPOSSIBLE_TOML = (
    "-1",
    "nan",
    "inf",
    "-inf",
    '{ value = -1, source = "s" }',
    '{ value = nan, source = "s" }',
    '{ value = -inf, source = "s" }',
)
JSON_BAD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.lists(st.integers(-3, 3), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from(["False", "True", "nan", "-1", "", "[/bold]"]),
)
CSV_BAD_CELLS = ("", "-1", "0", "nan", "inf", "-inf", "x", "1e400", "1.5", '"', ",", "True", "\x00", "é")


def fresh(root: Path, name: str) -> Path:
    """A path no earlier example used (readers may memoize by path)."""
    d = root / f"ex{next(_counter)}"
    d.mkdir(parents=True, exist_ok=True)
    return d / name


@st.composite
def corrupt_bytes(draw: Any, good: bytes) -> bytes:
    """Byte-level damage of ``good``."""
    kind = draw(
        st.sampled_from(
            ["truncate", "garbage", "nonutf8", "nul", "flip", "gzip", "gzip-truncated", "empty", "bom", "zstd", "crlf"]
        )
    )
    n = len(good)
    at = draw(st.integers(0, max(0, n - 1)))
    if kind == "truncate":
        return good[:at]
    if kind == "garbage":
        return good[:at] + draw(st.binary(min_size=1, max_size=16)) + good[at + draw(st.integers(0, 16)) :]
    if kind == "nonutf8":
        return good[:at] + draw(st.sampled_from([b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\x80"])) + good[at:]
    if kind == "nul":
        return good[:at] + b"\x00" + good[at:]
    if kind == "flip":
        return good[:at] + bytes([good[at] ^ (1 << draw(st.integers(0, 7)))]) + good[at + 1 :] if n else good
    if kind == "gzip":
        return gzip.compress(good, mtime=0)
    if kind == "gzip-truncated":
        z = gzip.compress(good, mtime=0)
        return z[: draw(st.integers(2, max(2, len(z) - 1)))]
    if kind == "bom":
        return b"\xef\xbb\xbf" + good
    if kind == "zstd":
        return b"\x28\xb5\x2f\xfd" + good[:at]
    if kind == "crlf":
        return good.replace(b"\n", b"\r\n")
    return b""


_TOML_LINE = re.compile(r"^(\s*)([A-Za-z_][\w-]*)(\s*=\s*)(.+)$")
_TOML_SOURCED = re.compile(r"^(\{\s*value\s*=\s*)(.+?)(\s*,\s*source\s*=.*\})\s*$")


def toml_value_lines(text: str) -> list[int]:
    return [i for i, ln in enumerate(text.splitlines()) if _TOML_LINE.match(ln) and not ln.lstrip().startswith("#")]


def replace_toml_value(text: str, index: int, literal: str, *, inside_sourced: bool) -> str:
    lines = text.splitlines()
    m = _TOML_LINE.match(lines[index])
    assert m is not None
    value = m.group(4)
    s = _TOML_SOURCED.match(value)
    if inside_sourced and s:
        value = s.group(1) + literal + s.group(3)
    else:
        value = literal
    lines[index] = m.group(1) + m.group(2) + m.group(3) + value
    return "\n".join(lines) + "\n"


def numeric_toml_lines(text: str) -> list[int]:
    """Lines whose value (or sourced value) is a plain number: the targets of the impossible-value tests."""
    num = re.compile(r"^[-+]?(\d[\d_]*(\.\d+)?([eE][-+]?\d+)?)$")
    out = []
    for i in toml_value_lines(text):
        m = _TOML_LINE.match(text.splitlines()[i])
        value = m.group(4).split("#")[0].strip()  # type: ignore[union-attr]
        s = _TOML_SOURCED.match(value)
        if num.match(s.group(2).strip() if s else value):
            out.append(i)
    return out


@st.composite
def mutate_toml(draw: Any, good: str) -> str:
    """Structural or value damage of a TOML document."""
    lines = toml_value_lines(good)
    kind = draw(st.sampled_from(["value", "sourced-value", "delete", "duplicate", "unknown", "table"]))
    i = draw(st.sampled_from(lines))
    all_lines = good.splitlines()
    if kind in ("value", "sourced-value"):
        return replace_toml_value(
            good, i, draw(st.sampled_from(TOML_BAD_LITERALS)), inside_sourced=kind == "sourced-value"
        )
    if kind == "delete":
        return "\n".join(all_lines[:i] + all_lines[i + 1 :]) + "\n"
    if kind == "duplicate":
        return "\n".join(all_lines[: i + 1] + [all_lines[i]] + all_lines[i + 1 :]) + "\n"
    if kind == "unknown":
        return "\n".join(all_lines[:i] + ["bogus_field_x = 1"] + all_lines[i:]) + "\n"
    return (
        "\n".join(all_lines[:i] + ["[" + draw(st.sampled_from(["", "x", "hbm", "[nodes]"])) + "]"] + all_lines[i:])
        + "\n"
    )


def _paths(obj: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _set(obj: Any, path: tuple, value: Any, delete: bool = False) -> None:
    for k in path[:-1]:
        obj = obj[k]
    if delete:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


@st.composite
def mutate_json_obj(draw: Any, obj: Any) -> Any:
    """A deep copy of ``obj`` with one leaf replaced by a bad value, deleted, or an unknown key added."""
    obj = json.loads(json.dumps(obj))
    paths = _paths(obj)
    if not paths:
        return draw(JSON_BAD_VALUES)
    p = draw(st.sampled_from(paths))
    kind = draw(st.sampled_from(["value", "value", "delete", "unknown"]))
    if kind == "delete":
        _set(obj, p, None, delete=True)
    elif kind == "unknown" and isinstance(obj, dict):
        obj["bogus_key"] = 1
    else:
        _set(obj, p, draw(JSON_BAD_VALUES))
    return obj


@st.composite
def mutate_jsonl(draw: Any, good: str) -> str:
    lines = good.splitlines()
    i = draw(st.integers(0, len(lines) - 1))
    kind = draw(st.sampled_from(["obj", "obj", "obj", "drop", "dup", "text"]))
    if kind == "obj":
        lines[i] = json.dumps(draw(mutate_json_obj(json.loads(lines[i]))))
    elif kind == "drop":
        del lines[i]
    elif kind == "dup":
        lines.insert(i, lines[i])
    else:
        lines[i] = draw(st.sampled_from(["{", "[]", "null", "1", '"x"', "{}", "NaN", '{"a": Infinity}', "]["]))
    return "\n".join(lines) + "\n"


@st.composite
def mutate_csv(draw: Any, good: str, *, skip_comments: bool = True) -> str:
    lines = good.splitlines()
    rows = [i for i, ln in enumerate(lines) if ln.strip() and not (skip_comments and ln.lstrip().startswith("#"))]
    i = draw(st.sampled_from(rows))
    cells = lines[i].split(",")
    kind = draw(st.sampled_from(["cell", "cell", "cell", "drop-cell", "add-cell", "drop-row", "dup-row"]))
    j = draw(st.integers(0, len(cells) - 1))
    if kind == "cell":
        cells[j] = draw(st.sampled_from(CSV_BAD_CELLS))
    elif kind == "drop-cell" and len(cells) > 1:
        del cells[j]
    elif kind == "add-cell":
        cells.insert(j, draw(st.sampled_from(CSV_BAD_CELLS)))
    elif kind == "drop-row":
        return "\n".join(lines[:i] + lines[i + 1 :]) + "\n"
    elif kind == "dup-row":
        return "\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1 :]) + "\n"
    lines[i] = ",".join(cells)
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- checks
def one_line_error(msg: str, path: Path) -> None:
    """An error a user can act on: one line, naming the file and what was expected."""
    assert "\n" not in msg.strip(), msg
    assert path.name in msg, (path.name, msg)
    assert "Traceback" not in msg


def check_reader(load: Callable[[Path], Any], path: Path) -> bool:
    """Call a library reader: it accepts the file (True) or refuses it with one line naming it (False). Any
    other exception is a bug and propagates (the test fails with its traceback)."""
    try:
        load(path)
    except HwmodelError as exc:
        one_line_error(str(exc), path)
        return False
    return True


def check_cli(args: list[str], path: Path, ok_codes: tuple[int, ...] = (0,)) -> int:
    """Invoke ``hwmodel ARGS`` in-process: exit 0 (accepted) or exit 2 with one ``Error:`` line naming the file."""
    from hwmodel.cli import main

    r = CliRunner().invoke(main, args, catch_exceptions=True)
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception  # a traceback: the test fails showing it
    if r.exit_code in ok_codes:
        return r.exit_code
    assert r.exit_code == 2, (r.exit_code, r.output)
    last = r.output.strip().splitlines()[-1]
    assert last.startswith("Error: "), r.output
    assert path.name in last or "Invalid value" in last, r.output
    return 2
