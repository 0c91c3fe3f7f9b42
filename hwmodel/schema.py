"""TOML tables -> frozen dataclasses, with one-line errors that name the file, the field and what was expected.

Every spec-like file in the project (hardware specs, FPGA designs, sweep specs, cluster specs) is declared as a
frozen dataclass whose fields carry metadata made by :func:`sourced` or :func:`plain`:

* a *sourced* field must be written in TOML as ``key = { value = ..., source = "..." }``: the value and where it
  comes from (datasheet, paper, repository file, measurement). The sources end up in the ``sources`` mapping of the
  top-level object, keyed by the dotted field path;
* a *plain* field is written as ``key = value``.

Supported field types: ``int``, ``float`` (an integer is accepted), ``bool``, ``str``, nested dataclasses (TOML
tables), ``tuple[T, ...]`` (TOML arrays, of scalars or of tables), ``dict[str, T]`` (a table of T), and
``T | None`` with a default of None. Unknown keys are refused, so a typo never silently falls back to a default.
A class may define ``_validate(self)`` yielding ``(field, expected, got)`` for cross-field rules.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from hwmodel.errors import SpecError
from hwmodel.io import read_toml as _read_toml

T = TypeVar("T")
Check = Callable[[Any], str | None]
"""A check returns None when the value is fine, else the expectation it violates (e.g. 'a positive number')."""


def sourced(*, unit: str = "", doc: str = "", check: Check | None = None, default: Any = dataclasses.MISSING) -> Any:
    """A field written as ``{ value = ..., source = "..." }`` in TOML."""
    return dataclasses.field(default=default, metadata={"sourced": True, "unit": unit, "doc": doc, "check": check})


def plain(*, unit: str = "", doc: str = "", check: Check | None = None, default: Any = dataclasses.MISSING) -> Any:
    """A field written as a bare value in TOML."""
    return dataclasses.field(default=default, metadata={"sourced": False, "unit": unit, "doc": doc, "check": check})


def internal(default: Any = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING) -> Any:
    """A field filled by the loader, never read from TOML (e.g. ``sources``, ``origin``)."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"toml": False}, compare=False)


# ---------------------------------------------------------------------------------------------------- checks
# Each check may carry ``json``: the JSON Schema keywords that express it (hwmodel/spec_reference.py turns them
# into `hwmodel specs schema KIND` and docs/specs.md); a check without it is described by its expectation text.
def _with_json(check: Check, **keywords: Any) -> Check:
    check.json = keywords  # type: ignore[attr-defined]
    return check


def positive(v: Any) -> str | None:
    return None if v > 0 else "a positive number"


def non_negative(v: Any) -> str | None:
    return None if v >= 0 else "a number >= 0"


def fraction(v: Any) -> str | None:
    return None if 0 < v <= 1 else "a fraction in (0, 1]"


_with_json(positive, exclusiveMinimum=0)
_with_json(non_negative, minimum=0)
_with_json(fraction, exclusiveMinimum=0, maximum=1)


def one_of(*choices: Any) -> Check:
    def check(v: Any) -> str | None:
        return None if v in choices else "one of " + ", ".join(repr(c) for c in choices)

    return _with_json(check, enum=list(choices))


def in_range(lo: float, hi: float) -> Check:
    def check(v: Any) -> str | None:
        return None if lo <= v <= hi else f"a number in [{lo}, {hi}]"

    return _with_json(check, minimum=lo, maximum=hi)


def power_of_two(v: Any) -> str | None:
    return None if isinstance(v, int) and v > 0 and v & (v - 1) == 0 else "a positive power of two"


def all_positive(v: Any) -> str | None:
    return None if all(x > 0 for x in v) else "a list of positive numbers"


def non_empty(v: Any) -> str | None:
    return None if len(v) > 0 else "a non-empty value"


_with_json(power_of_two, exclusiveMinimum=0)
_with_json(non_empty, minItems=1)


# ---------------------------------------------------------------------------------------------------- loading
def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file through the reading layer (:mod:`hwmodel.io`): every OS, encoding, compression and syntax
    problem becomes one error naming the file and the line. A file that says ``extends = "NAME"`` comes back merged
    over its parent (:mod:`hwmodel.spec_extends`)."""
    from hwmodel.spec_extends import resolve

    return resolve(_read_toml(path), Path(path))


def load_toml_as(cls: type[T], path: Path | str, *, overrides: Mapping[str, Any] | None = None) -> T:
    """Load ``path`` into dataclass ``cls`` (see the module docstring), validated; ``origin`` is set if present."""
    path = Path(path)
    table = read_toml(path)
    if overrides:
        table = {**table, **overrides}
    return build(cls, table, path=path)


def build(cls: type[T], table: Any, *, path: object, prefix: str = "") -> T:
    """Build ``cls`` from a parsed TOML table; raises SpecError on the first problem found."""
    sources: dict[str, str] = {}
    obj = _build(cls, table, path, prefix, sources)
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    extra: dict[str, Any] = {}
    if "sources" in names:
        extra["sources"] = types.MappingProxyType(dict(sources))
    if "origin" in names:
        extra["origin"] = str(path)
    return typing.cast(T, dataclasses.replace(obj, **extra)) if extra else obj


def _type_name(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin is tuple:
        return f"a list of {_type_name(typing.get_args(tp)[0])}"
    if origin is dict:
        return f"a table of {_type_name(typing.get_args(tp)[1])}"
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return f"a table ({tp.__name__})"
    return {int: "an integer", float: "a number", bool: "true or false", str: "a string"}.get(tp, str(tp))


def _convert(tp: Any, raw: Any, path: object, key: str, sources: dict[str, str]) -> Any:
    """Convert one raw TOML value to ``tp``; raise SpecError with the dotted key on mismatch."""
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if raw is None:
            return None
        return _convert(args[0], raw, path, key, sources)
    if dataclasses.is_dataclass(tp):
        if not isinstance(raw, dict):
            raise SpecError(path, key, _type_name(tp), raw)
        return _build(tp, raw, path, key + ".", sources)
    if origin is tuple:
        (elem, *_rest) = typing.get_args(tp)
        if not isinstance(raw, list):
            raise SpecError(path, key, _type_name(tp), raw)
        return tuple(_convert(elem, v, path, f"{key}[{i}]", sources) for i, v in enumerate(raw))
    if origin is dict:
        _k, elem = typing.get_args(tp)
        if not isinstance(raw, dict):
            raise SpecError(path, key, _type_name(tp), raw)
        return types.MappingProxyType({k: _convert(elem, v, path, f"{key}.{k}", sources) for k, v in raw.items()})
    if tp is bool:
        if not isinstance(raw, bool):
            raise SpecError(path, key, "true or false", raw)
        return raw
    if tp is int:
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise SpecError(path, key, "an integer", raw)
        return raw
    if tp is float:
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
            raise SpecError(path, key, "a finite number", raw)
        return float(raw)
    if tp is str:
        if not isinstance(raw, str):
            raise SpecError(path, key, "a string", raw)
        return raw
    if tp is Any:
        return raw
    raise TypeError(f"schema: unsupported field type {tp!r} for {key}")  # a programming error, not user input


def _build(cls: Any, table: Any, path: object, prefix: str, sources: dict[str, str]) -> Any:
    if not isinstance(table, dict):
        raise SpecError(path, prefix.rstrip(".") or None, f"a table ({cls.__name__})", table)
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    known = [f.name for f in dataclasses.fields(cls) if f.metadata.get("toml", True) and f.init]
    unknown = sorted(set(table) - set(known))
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise SpecError(path, prefix + unknown[0], f"a known field name ({hint}known: {', '.join(known)})")
    missing = [
        f.name
        for f in dataclasses.fields(cls)
        if f.name in known
        and f.name not in table
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    for f in dataclasses.fields(cls):
        if f.name not in known:
            continue
        key = prefix + f.name
        if f.name not in table:
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                continue
            what = 'a { value = ..., source = "..." } table' if f.metadata.get("sourced") else _type_name(hints[f.name])
            also = f"; also missing: {', '.join(prefix + m for m in missing[1:])}" if len(missing) > 1 else ""
            raise SpecError(path, key, f"this required field to be present ({what}){also}")
        raw = table[f.name]
        if f.metadata.get("sourced"):
            if not isinstance(raw, dict) or set(raw) != {"value", "source"}:
                raise SpecError(path, key, 'a table { value = ..., source = "..." }', raw)
            src = raw["source"]
            if not isinstance(src, str) or not src.strip():
                raise SpecError(path, key + ".source", "a non-empty string naming where the value comes from", src)
            sources[key] = src
            raw = raw["value"]
        value = _convert(hints[f.name], raw, path, key, sources)
        check = f.metadata.get("check")
        if check is not None and value is not None:
            problem = check(value)
            if problem:
                raise SpecError(path, key, problem, value)
        kwargs[f.name] = value
    obj = cls(**kwargs)
    validate = getattr(obj, "_validate", None)
    if validate is not None:
        for field, expected, got in validate():
            raise SpecError(path, prefix + field, expected, got)
    return obj


def field_doc(cls: Any) -> Iterator[tuple[str, str, str]]:
    """(name, unit, doc) for each TOML field of ``cls``, for help texts and `specs show`."""
    for f in dataclasses.fields(cls):
        if f.metadata.get("toml", True):
            yield f.name, f.metadata.get("unit", ""), f.metadata.get("doc", "")
