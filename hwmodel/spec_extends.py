"""Specs that extend specs, and overrides from Python: change a few fields of a spec without copying its file.

A spec file (system, cluster, design, board, GPU, link or LLM TOML) may start with ``extends = "NAME"``: its tables
are deep-merged over those of the parent and the merged table is validated exactly as a file would be (every
loader reads TOML through :func:`hwmodel.schema.read_toml`, which calls :func:`resolve`). Rules:

* the parent is ``NAME`` as a path relative to the file (when it ends in ``.toml``), else ``NAME.toml`` beside the
  file, else the built-in file ``NAME.toml`` of the same kind (:data:`BUILTIN_DIRS`; a ``kind`` field, when both
  files have one, must agree); parents may extend further parents (a cycle is an error naming the chain);
* tables merge key by key; any other value -- a number, a string, an array (of tables too: ``[[roles]]``), or a
  sourced leaf ``{ value = ..., source = "..." }`` -- is replaced whole by the child's;
* sources stay per field: a field the child sets carries the child's source, an inherited one keeps the parent's
  with `` [inherited from PARENT]`` appended, so ``spec.sources`` tells which file each value came from.

:func:`override` applies a nested dict of new values to a parsed table the same way (the API's
``hw.with_fields``); a bare value given for a sourced leaf is sourced as ``"override from Python (hwmodel.api)"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hwmodel.errors import SpecError

_ROOT = Path(__file__).resolve().parent.parent
#: built-in spec directories searched for a parent by name (after the extending file's own directory)
BUILTIN_DIRS = (
    _ROOT / "hwmodel" / "reasoning" / "systems",
    _ROOT / "hwmodel" / "serving" / "clusters",
    _ROOT / "fpga" / "designs",
    _ROOT / "fpga" / "designs" / "instruction",
    _ROOT / "fpga" / "boards",
    _ROOT / "gpu" / "devices",
    _ROOT / "interconnect" / "links",
    _ROOT / "hwmodel" / "llms",
)
OVERRIDE_SOURCE = "override from Python (hwmodel.api)"


def _is_leaf(v: Any) -> bool:
    """A sourced leaf ``{value, source}`` (replaced whole, never merged)."""
    return isinstance(v, Mapping) and "value" in v and set(v) <= {"value", "source", "unit", "note"}


def _mark_inherited(table: Any, parent: str) -> Any:
    if _is_leaf(table):
        return (
            {**table, "source": f"{table.get('source', '')} [inherited from {parent}]"}
            if "source" in table
            else dict(table)
        )
    if isinstance(table, Mapping):
        return {k: _mark_inherited(v, parent) for k, v in table.items()}
    if isinstance(table, list):
        return [_mark_inherited(v, parent) for v in table]
    return table


def merge(parent: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """``child`` deep-merged over ``parent`` (tables key by key; every other value and sourced leaves replaced)."""
    out = dict(parent)
    for k, v in child.items():
        p = out.get(k)
        if isinstance(v, Mapping) and isinstance(p, Mapping) and not _is_leaf(v) and not _is_leaf(p):
            out[k] = merge(p, v)
        else:
            out[k] = v
    return out


def _find_parent(name: str, path: Path, kind: Any) -> Path:
    if name.endswith(".toml"):
        cand = (path.parent / name).resolve()
        if not cand.is_file():
            raise SpecError(path, "extends", f"an existing spec file (relative to {path.parent})", name)
        return cand
    beside = path.parent / f"{name}.toml"
    if beside.is_file() and beside.resolve() != path.resolve():
        return beside
    found = [d / f"{name}.toml" for d in BUILTIN_DIRS if (d / f"{name}.toml").is_file()]
    if len(found) > 1 and kind is not None:
        from hwmodel.io import read_toml

        found = [f for f in found if read_toml(f).get("kind") == kind] or found
    if not found:
        raise SpecError(
            path,
            "extends",
            f"the name of a spec beside this file or a built-in one "
            f"(looked in {path.parent} and {len(BUILTIN_DIRS)} built-in directories)",
            name,
        )
    if len(found) > 1:
        raise SpecError(
            path,
            "extends",
            "a name that is one spec only (several match: "
            + ", ".join(str(f.relative_to(_ROOT)) for f in found)
            + "); give a relative path",
            name,
        )
    return found[0]


def resolve(table: dict[str, Any], path: Path, _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """``table`` (parsed from ``path``) with its ``extends`` chain merged in; a table without ``extends`` is
    returned as it is."""
    name = table.get("extends")
    if name is None:
        return table
    if not isinstance(name, str) or not name:
        raise SpecError(path, "extends", "the name (or relative path) of the spec this one extends", name)
    chain = (*_chain, Path(path).resolve())
    parent_path = _find_parent(name, Path(path), table.get("kind"))
    if parent_path.resolve() in chain:
        raise SpecError(
            path, "extends", "a chain without cycles (" + " -> ".join(p.name for p in (*chain, parent_path)) + ")", name
        )
    from hwmodel.io import read_toml

    parent = resolve(read_toml(parent_path), parent_path, chain)
    if "kind" in parent and "kind" in table and parent["kind"] != table["kind"]:
        raise SpecError(
            path, "kind", f"{parent['kind']!r}, the kind of the spec it extends ({parent_path.name})", table["kind"]
        )
    child = {k: v for k, v in table.items() if k != "extends"}
    return merge(_mark_inherited(parent, parent_path.stem), child)


def override(table: Mapping[str, Any], changes: Mapping[str, Any], cls: Any = None) -> dict[str, Any]:
    """``changes`` (a nested dict, or dotted keys ``"devices.fpga.clock_hz"``) applied to a parsed ``table``; a
    bare value for a sourced field (of dataclass ``cls``, or a sourced leaf in ``table``) becomes
    ``{value, source = OVERRIDE_SOURCE}``."""
    nested: dict[str, Any] = {}
    for k, v in changes.items():
        parts = str(k).split(".")
        cur = nested
        for p in parts[:-1]:
            cur = cur.setdefault(p, {})
        cur[parts[-1]] = v
    return _apply(table, nested, cls)


def _field_type(cls: Any, key: str) -> tuple[Any, bool]:
    """(the type of ``key`` in ``cls``, whether it is sourced); ``dict[str, T]`` descends to ``T``."""
    import dataclasses
    import typing

    if cls is None:
        return None, False
    if typing.get_origin(cls) is dict:
        return typing.get_args(cls)[1], False
    if not dataclasses.is_dataclass(cls):
        return None, False
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name == key:
            tp = hints[f.name]
            args = [a for a in typing.get_args(tp) if a is not type(None)]
            if typing.get_origin(tp) is not dict and args and not dataclasses.is_dataclass(tp):
                tp = args[0]  # T | None
            return tp, bool(f.metadata.get("sourced"))
    return None, False


def _apply(table: Mapping[str, Any], changes: Mapping[str, Any], cls: Any) -> dict[str, Any]:
    out = dict(table)
    for k, v in changes.items():
        p = out.get(k)
        tp, is_sourced = _field_type(cls, k)
        if (_is_leaf(p) or is_sourced) and not _is_leaf(v):
            out[k] = {"value": v, "source": OVERRIDE_SOURCE}
        elif isinstance(p, list) and isinstance(v, Mapping) and v and all(str(i).isdigit() for i in v):
            out[k] = _apply_items(p, v, tp, k)  # "nodes.0.decode.0.count": items of an array of tables
        elif isinstance(v, Mapping) and not _is_leaf(v):
            out[k] = _apply(p if isinstance(p, Mapping) else {}, v, tp)
        else:
            out[k] = v
    return out


def _apply_items(items: list[Any], changes: Mapping[str, Any], tp: Any, key: str) -> list[Any]:
    import typing

    elem = typing.get_args(tp)[0] if typing.get_origin(tp) is tuple else None
    out = list(items)
    for i, v in changes.items():
        n = int(i)
        if not 0 <= n < len(out) or not isinstance(out[n], Mapping) or not isinstance(v, Mapping):
            raise SpecError(
                "override", f"{key}.{i}", f"an index of an array of {len(out)} tables, with a table of changes", v
            )
        out[n] = _apply(out[n], v, elem)
    return out
