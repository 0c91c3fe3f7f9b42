"""The one reading layer for every input file: text, TOML, JSON, JSON lines and CSV, plain or gzip-compressed.

Every reader in hwmodel (specs, designs, clusters, systems, sweeps, traces, RSD logs, request streams, KVMU
command files, checkpoints' indexes, measurements, results journals) opens its file through this module, so every
operating-system, encoding, compression and truncation problem becomes one :class:`InputFileError` whose message
reads ``FILE[:LINE]: [field 'X': ]expected ..., got ...`` (the CLI prints it as ``Error: ...`` with exit status 2).

Compression is detected from the file's first bytes (the gzip magic ``1f 8b``), never from its name: gzip data
named ``x.jsonl`` and plain text named ``x.jsonl.gz`` both read correctly. Other compressions (zstd, bzip2, xz,
zip) are refused by name. Text is UTF-8 (a leading byte-order mark is dropped); a byte that is not UTF-8 is
reported with its line and column.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gzip
import io
import json
import math
import re
import tomllib
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from hwmodel.errors import HwmodelError, SpecError

GZIP_MAGIC = b"\x1f\x8b"
_OTHER_MAGIC = {b"\x28\xb5\x2f\xfd": "zstd", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"PK\x03\x04": "zip"}
_BOM = b"\xef\xbb\xbf"


class InputFileError(SpecError):
    """A file that cannot be read as what it should be; the message names the file, the line and the field.

    A :class:`SpecError` (so code that handles broken spec files handles unreadable ones too) with a line number.
    """

    def __init__(
        self, path: object, expected: str, got: object = ..., *, line: int | None = None, field: str | None = None
    ) -> None:
        where = f"{path}" + (f":{line}" if line is not None else "")
        what = f" field '{field}':" if field else ""
        got_txt = "" if got is ... else f", got {got}"
        HwmodelError.__init__(self, f"{where}:{what} expected {expected}{got_txt}")
        self.path, self.line, self.field, self.expected = path, line, field, expected


@contextlib.contextmanager
def errors_as(cls: type[Exception]) -> Iterator[None]:
    """Re-raise an :class:`InputFileError` from the block as ``cls`` (a reader's own error type, so callers that
    catch e.g. ``TraceError`` also catch unreadable files), with the same one-line message and fields."""
    try:
        yield
    except InputFileError as exc:
        if isinstance(exc, cls):
            raise
        err = cls.__new__(cls)
        Exception.__init__(err, str(exc))
        for k in ("path", "line", "field", "expected"):
            setattr(err, k, getattr(exc, k))
        err.why = "expected " + exc.expected  # type: ignore[attr-defined]
        raise err from None


def _os_problem(exc: OSError) -> str:
    if isinstance(exc, FileNotFoundError):
        return "no such file"
    if isinstance(exc, IsADirectoryError):
        return "a directory"
    if isinstance(exc, PermissionError):
        return "permission denied"
    return exc.strerror or type(exc).__name__


def open_binary(path: Path | str, what: str = "file") -> IO[bytes]:
    """Open ``path`` for reading bytes, transparently gunzipping it when it starts with the gzip magic."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "Is a directory")
        fh: IO[bytes] = open(path, "rb")
        head = fh.peek(8)[:8] if hasattr(fh, "peek") else b""  # type: ignore[attr-defined]
    except OSError as exc:
        raise InputFileError(path, f"a readable {what}", _os_problem(exc)) from None
    if head.startswith(GZIP_MAGIC):
        return gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[return-value]
    for magic, name in _OTHER_MAGIC.items():
        if head.startswith(magic):
            fh.close()
            raise InputFileError(path, f"a {what} as plain text or gzip", f"{name}-compressed data")
    return fh


def iter_lines(path: Path | str, what: str = "file") -> Iterator[tuple[int, str]]:
    """``(line number, text)`` for each line of ``path`` (newline kept), decoded as UTF-8, read lazily.

    A decoding error, a truncated or corrupt gzip stream and an I/O error during the read all raise
    :class:`InputFileError` naming the line where they happened.
    """
    path = Path(path)
    fh = open_binary(path, what)
    n = 0
    try:
        with fh:
            for n, raw in enumerate(fh, start=1):
                if n == 1 and raw.startswith(_BOM):
                    raw = raw[len(_BOM) :]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise InputFileError(
                        path, "UTF-8 text", f"byte 0x{raw[exc.start]:02x} at column {exc.start + 1}", line=n
                    ) from None
                yield n, text
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise InputFileError(
            path,
            f"a complete gzip stream ({what})",
            f"truncated or corrupt data {f'after line {n}' if n else 'before the first line'} "
            f"({exc or type(exc).__name__})",
            line=n + 1,
        ) from None
    except OSError as exc:
        raise InputFileError(path, f"a readable {what}", _os_problem(exc), line=n + 1) from None


def read_text(path: Path | str, what: str = "file") -> str:
    """The whole of ``path`` as text (see :func:`iter_lines`)."""
    return "".join(t for _n, t in iter_lines(path, what))


_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


def read_toml(path: Path | str, what: str = "TOML file") -> dict[str, Any]:
    """Parse a TOML file; a syntax error names the file and the line."""
    text = read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = _TOML_AT.search(msg)
        line = int(m.group(1)) if m else (text.count("\n") + 1 if "end of document" in msg else None)
        why = _TOML_AT.sub("", msg).strip()
        raise InputFileError(path, "valid TOML", why + (f" at column {m.group(2)}" if m else ""), line=line) from None


def jsonable(obj: Any) -> Any:
    """``obj`` made JSON-safe, the project's one converter: dataclasses as dicts, mapping keys as strings (JSON's
    spelling of true/false/null), tuples and sets as lists, paths as strings, numpy scalars and arrays as Python
    values, non-finite floats as null."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return jsonable(dataclasses.asdict(obj))
    if isinstance(obj, dict) or (hasattr(obj, "items") and not hasattr(obj, "dtype")):
        return {_json_key(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "dtype") and hasattr(obj, "tolist"):  # a numpy scalar or array
        return jsonable(obj.tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


def _json_key(k: Any) -> str:
    if hasattr(k, "dtype") and hasattr(k, "item"):
        k = k.item()
    if k is None or isinstance(k, bool):
        return json.dumps(k)
    return str(k)


def parse_json(text: str, path: object, line: int | None = None, what: str = "JSON") -> Any:
    """``json.loads`` with an error naming the file and the line (NaN and Infinity literals refused)."""

    def _no_constant(name: str) -> Any:
        raise ValueError(name)

    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        at = line if line is not None else exc.lineno
        raise InputFileError(path, what, f"{exc.msg} at column {exc.colno}", line=at) from None
    except ValueError as exc:
        raise InputFileError(path, f"{what} with finite numbers", str(exc), line=line) from None
    except RecursionError:
        raise InputFileError(path, what, "nesting too deep", line=line) from None


def read_json(path: Path | str, what: str = "JSON file") -> Any:
    """Parse a JSON file (see :func:`parse_json`)."""
    return parse_json(read_text(path, what), path, what="a JSON document")


def iter_jsonl(path: Path | str, what: str = "JSON-lines file") -> Iterator[tuple[int, Any]]:
    """``(line number, object)`` for each non-blank line of a JSON-lines file, lazily."""
    for n, text in iter_lines(path, what):
        if text.strip():
            yield n, parse_json(text, path, n, what="one JSON object per line")


def read_csv(path: Path | str, what: str = "CSV file") -> list[tuple[int, list[str]]]:
    """``(line number, cells)`` for each row of a CSV file (line number where the row starts)."""
    text = read_text(path, what)
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for cells in reader:
            rows.append((start, cells))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputFileError(path, "well-formed CSV", str(exc), line=reader.line_num) from None
    return rows


_NOTED: set[str] = set()


def note_damaged(path: object, what: str, why: str, action: str = "ignored and rebuilt") -> None:
    """Say once per process on stderr that a cache or journal file was damaged and what is done about it:
    ``hwmodel: warning: FILE: damaged WHAT (WHY); ACTION``. Readers of files the program itself writes (caches,
    journals) treat a damaged one as absent and call this, so a torn or scrambled file costs a rebuild, never a
    crash or a wrong number (docs/reliability.md)."""
    import sys

    line = f"hwmodel: warning: {path}: damaged {what} ({why}); {action}"
    if line not in _NOTED:
        _NOTED.add(line)
        try:
            print(line, file=sys.stderr, flush=True)
        except (OSError, ValueError):  # stderr closed
            pass


class AtomicFile:
    """A file being written to a temporary name beside ``path``; leaving its ``with`` block normally flushes,
    fsyncs and renames it over ``path`` (readers see the old file or the whole new one, never a part), an
    exception (a full disk, Ctrl-C) deletes the temporary file and leaves ``path`` as it was. Use
    :func:`atomic_open`."""

    def __init__(self, path: Path | str, mode: str = "w", **kwargs: Any) -> None:
        import uuid

        self.path = Path(path)
        self._tmp = self.path.with_name(f".{self.path.name}.{uuid.uuid4().hex[:12]}.tmp")  # one per writer
        self._fh: IO[Any] = open(self._tmp, mode, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._fh)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        import os

        try:
            if exc_type is None:
                self._fh.flush()
                os.fsync(self._fh.fileno())
            self._fh.close()
            if exc_type is None:
                os.replace(self._tmp, self.path)
        except BaseException:
            exc_type = True
            raise
        finally:
            if exc_type is not None:
                with contextlib.suppress(OSError):
                    self._fh.close()
                with contextlib.suppress(OSError):
                    self._tmp.unlink()


def atomic_open(path: Path | str, mode: str = "w", **kwargs: Any) -> AtomicFile:
    """Open ``path`` for writing as an :class:`AtomicFile` (whole or not at all); use it in a ``with`` block."""
    return AtomicFile(path, mode, **kwargs)


def atomic_write_text(path: Path | str, text: str, encoding: str = "utf-8") -> Path:
    """Write ``text`` to ``path`` whole or not at all (see :class:`AtomicFile`)."""
    with atomic_open(path, "w", encoding=encoding) as fh:
        fh.write(text)
    return Path(path)


def open_locked(path: Path | str, mode: str, busy: Exception, **kwargs: Any) -> IO[Any]:
    """Open ``path`` for appending (``mode`` "a" or "a+") holding an exclusive ``flock``; raise ``busy`` when another
    process holds it (a second sweep or study writing the same journal). The lock goes with the file's close."""
    fh = open(path, mode, **kwargs)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: no lock
        return fh
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        raise busy from None
    return fh
