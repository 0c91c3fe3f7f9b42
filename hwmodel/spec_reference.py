"""The reference of every spec kind, generated from the schema: `docs/specs.md` and `hwmodel specs schema KIND`.

Each spec kind is a frozen dataclass read by :mod:`hwmodel.schema` (boards, LLMs, GPUs, links) or by its own loader
on top of it (streaming and instruction designs, serving clusters, reasoning systems, sweeps). This module walks
those dataclasses - field names, types, units, defaults, checks, docs, whether a value must carry its source - and
writes them out two ways: a Markdown reference (one table per TOML table, every field with its type, unit,
default, whether it is required, its allowed values and its description, and a shipped file as an example), and a
JSON Schema (draft 2020-12) an editor can validate a TOML spec against as it is typed (e.g. with taplo or Even
Better TOML: ``#:schema ./board.schema.json``). Fields other helpers add to a dataclass appear here by themselves.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import re
import types
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from hwmodel.errors import HwmodelError

ROOT = Path(__file__).resolve().parent.parent
DRAFT = "https://json-schema.org/draft/2020-12/schema"


@dataclasses.dataclass(frozen=True)
class Kind:
    """One spec kind: its dataclass, how its values are written, and where its shipped files are."""

    name: str
    cls_path: str  # "module:Class"
    what: str
    examples: tuple[str, ...]  # globs relative to the repository root
    values: str = "per-field"  # per-field: sourced fields need { value, source }; either: any value may carry one
    extra_tables: tuple[tuple[str, str], ...] = ()  # free-form top-level tables: (name, description)
    table: str = ""  # the TOML table the dataclass sits in ("" = top level)

    @property
    def cls(self) -> Any:
        mod, name = self.cls_path.split(":")
        return getattr(importlib.import_module(mod), name)


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "fpga-board",
            "hwmodel.specs:BoardSpec",
            "an FPGA accelerator card (`--spec-dir`, fpga/boards/)",
            ("fpga/boards/*.toml",),
        ),
        Kind(
            "llm",
            "hwmodel.specs:LlmSpec",
            "a decoder-only LLM's shapes (`--spec-dir`, hwmodel/llms/; `specs import-hf` writes one)",
            ("hwmodel/llms/*.toml", "examples/llms/*.toml", "calibration/llms/*.toml"),
        ),
        Kind("gpu", "hwmodel.specs:GpuSpec", "a GPU (`--spec-dir`, gpu/devices/)", ("gpu/devices/*.toml",)),
        Kind(
            "link",
            "hwmodel.specs:LinkSpec",
            "a point-to-point link (`--spec-dir`, interconnect/links/)",
            ("interconnect/links/*.toml",),
        ),
        Kind(
            "design",
            "fpga.streaming.design:StreamingDesign",
            "a streaming FPGA decode design (`fpga decode --design FILE`, fpga/designs/)",
            ("fpga/designs/*.toml", "examples/designs/*.toml"),
            values="either",
        ),
        Kind(
            "instruction-design",
            "fpga.instruction.design:InstructionDesign",
            "an instruction-driven FPGA design (`fpga instruction run --design FILE`, fpga/designs/instruction/)",
            ("fpga/designs/instruction/*.toml",),
        ),
        Kind(
            "cluster",
            "hwmodel.serving.cluster:ClusterSpec",
            "a serving cluster for system B (`serving run --cluster FILE`, hwmodel/serving/clusters/)",
            ("hwmodel/serving/clusters/*.toml",),
        ),
        Kind(
            "system",
            "hwmodel.reasoning.system:ReasoningSystem",
            "a system-A reasoning system (`reasoning run --system FILE`, hwmodel/reasoning/systems/)",
            ("hwmodel/reasoning/systems/*.toml",),
        ),
        Kind(
            "sweep",
            "hwmodel.dse.spec:SweepSection",
            "a design-space sweep (`sweep run FILE`, examples/sweeps/)",
            ("examples/sweeps/*.toml",),
            table="sweep",
            extra_tables=(
                ("report", "hwmodel.dse.spec:ReportSection"),
                (
                    "parameters",
                    "axes: `name = [values]` or `{ min, max, step | num | factor }`; the names "
                    "are the evaluator's parameters (`sweep evaluators`)",
                ),
                ("objectives", '`metric = "min" | "max"` for the evaluator\'s metrics'),
                ("constraints", "`metric = { min = ..., max = ... }` bounds on the evaluator's metrics"),
            ),
        ),
    )
}


def _extra_cls(what: str) -> Any:
    """The dataclass an extra table names ("module:Class"), or None for a free-form table's description."""
    if re.fullmatch(r"[\w.]+:\w+", what):
        mod, name = what.split(":")
        return getattr(importlib.import_module(mod), name)
    return None


def _extra_fields(kind: str) -> list[Field]:
    return [r for n, w in KINDS[kind].extra_tables if _extra_cls(w) is not None for r in fields(_extra_cls(w), n)]


# ------------------------------------------------------------------------------------------------ fields
@dataclasses.dataclass(frozen=True)
class Field:
    table: str  # dotted TOML table ("" = top level; "engines[]" = an array of tables)
    name: str
    type: str
    unit: str
    default: str  # "" when required
    required: bool
    allowed: str
    doc: str
    sourced: bool


def _fields_of(cls: Any) -> Iterator[dataclasses.Field]:
    for f in dataclasses.fields(cls):
        if f.metadata.get("toml", True) and f.init:
            yield f


def _unwrap(tp: Any) -> tuple[Any, bool]:
    """(the type without ``| None``, whether None was allowed)."""
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], True
    return tp, False


def _type_word(tp: Any) -> str:
    tp, _ = _unwrap(tp)
    origin = typing.get_origin(tp)
    if origin is tuple:
        return f"array of {_type_word(typing.get_args(tp)[0])}"
    if origin is dict:
        return f"table of {_type_word(typing.get_args(tp)[1])}"
    if dataclasses.is_dataclass(tp):
        return "table"
    return {int: "integer", float: "number", bool: "boolean", str: "string"}.get(tp, "any")


_PROBES: tuple[Any, ...] = (math.nan, "", (), (-1,), -1, object())


def check_words(check: Callable[[Any], str | None] | None) -> str:
    """What a check expects, in its own words (it is called on values that fail it: NaN, '', -1, ...)."""
    if check is None:
        return ""
    for probe in _PROBES:
        try:
            out = check(probe)
        except Exception:  # noqa: BLE001 - a probe of the wrong type; try the next
            continue
        if isinstance(out, str):
            return out
    return ""


def _default_words(f: dataclasses.Field) -> str:
    if f.default is not dataclasses.MISSING:
        return (
            "(absent)"
            if f.default is None
            else json.dumps(f.default)
            if isinstance(f.default, str)
            else repr(f.default).lower()
            if isinstance(f.default, bool)
            else repr(f.default)
        )
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        v = f.default_factory()  # type: ignore[misc]
        return "{}" if isinstance(v, dict) else "[]" if isinstance(v, (list, tuple)) else repr(v)
    return ""


def fields(cls: Any, table: str = "") -> list[Field]:
    """Every TOML field of ``cls`` and of the tables nested in it, in declaration order (nested tables after
    the table that holds them)."""
    hints = typing.get_type_hints(cls)
    rows: list[Field] = []
    nested: list[tuple[Any, str]] = []
    for f in _fields_of(cls):
        tp, _ = _unwrap(hints[f.name])
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
        rows.append(
            Field(
                table=table,
                name=f.name,
                type=_type_word(hints[f.name]),
                unit=f.metadata.get("unit", ""),
                default=_default_words(f),
                required=required,
                allowed=check_words(f.metadata.get("check")),
                doc=f.metadata.get("doc", ""),
                sourced=bool(f.metadata.get("sourced")),
            )
        )
        sub = f"{table}.{f.name}" if table else f.name
        elem = tp
        if typing.get_origin(tp) is tuple:
            elem, sub = typing.get_args(tp)[0], sub + "[]"
        elif typing.get_origin(tp) is dict:
            elem, sub = typing.get_args(tp)[1], sub + ".NAME"
        if dataclasses.is_dataclass(elem):
            nested.append((elem, sub))
    for elem, sub in nested:
        rows += fields(elem, sub)
    return rows


# ------------------------------------------------------------------------------------------------ JSON Schema
def _value_schema(tp: Any, check: Any, values: str) -> dict[str, Any]:
    tp, _ = _unwrap(tp)
    origin = typing.get_origin(tp)
    if origin is tuple:
        out: dict[str, Any] = {"type": "array", "items": _value_schema(typing.get_args(tp)[0], None, values)}
    elif origin is dict:
        out = {"type": "object", "additionalProperties": _value_schema(typing.get_args(tp)[1], None, values)}
    elif dataclasses.is_dataclass(tp):
        out = class_schema(tp, values)
    else:
        out = {
            int: {"type": "integer"},
            float: {"type": "number"},
            bool: {"type": "boolean"},
            str: {"type": "string"},
        }.get(tp, {})
    keywords = dict(getattr(check, "json", {}) or {})
    if out.get("type") == "string" and "minItems" in keywords:
        keywords["minLength"] = keywords.pop("minItems")
    if out.get("type") not in ("integer", "number"):
        for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
            keywords.pop(k, None)
    out.update(keywords)
    return out


def _sourced(inner: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"value": inner, "source": {"type": "string", "minLength": 1, "pattern": r"\S"}},
        "required": ["value", "source"],
        "additionalProperties": False,
    }


def class_schema(cls: Any, values: str = "per-field") -> dict[str, Any]:
    """The JSON Schema of one dataclass table: its properties, the required ones, no others."""
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    required: list[str] = []
    for f in _fields_of(cls):
        inner = _value_schema(hints[f.name], f.metadata.get("check"), values)
        words = " ".join(
            x for x in (f.metadata.get("doc", ""), f"[{f.metadata['unit']}]" if f.metadata.get("unit") else "") if x
        )
        if f.metadata.get("sourced"):
            schema = _sourced(inner)
        elif values == "either" and not dataclasses.is_dataclass(_unwrap(hints[f.name])[0]):
            schema = {"anyOf": [inner, _sourced(inner)]}
        else:
            schema = inner
        if words:
            schema = {**schema, "description": words}
        props[f.name] = schema
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:  # type: ignore[misc]
            required.append(f.name)
    out: dict[str, Any] = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of spec kind ``kind`` (a key of :data:`KINDS`)."""
    if kind not in KINDS:
        raise HwmodelError(f"unknown spec kind '{kind}'; valid choices: {', '.join(KINDS)}")
    k = KINDS[kind]
    body = class_schema(k.cls, k.values)
    if k.table:  # the dataclass sits in a table; the others are free-form or their own dataclasses
        props: dict[str, Any] = {k.table: body}
        for name, what in k.extra_tables:
            cls = _extra_cls(what)
            props[name] = class_schema(cls, k.values) if cls is not None else {"type": "object", "description": what}
        body = {"type": "object", "properties": props, "required": [k.table], "additionalProperties": False}
    if kind == "fpga-board":  # [hbm] and [ddr] are each optional, one is required (BoardSpec._validate)
        body["anyOf"] = [{"required": ["hbm"]}, {"required": ["ddr"]}]
    if "kind" in body.get("properties", {}) and "enum" not in body["properties"]["kind"]:  # a library spec
        body["properties"]["kind"] = {"const": kind, "description": "spec kind"}
    body["properties"]["extends"] = {"type": "string", "description": EXTENDS_DOC}
    # a file that extends another gives only the fields it changes: nothing is required of it (its parent has them)
    return {
        "$schema": DRAFT,
        "$id": f"https://hwmodel.invalid/schemas/{kind}.schema.json",
        "title": f"hwmodel {kind} spec",
        "description": k.what,
        **_relaxed(body),
        "if": {"not": {"required": ["extends"]}},
        "then": body,
    }


EXTENDS_DOC = (
    "the name of a spec of the same kind this file extends (hwmodel/spec_extends.py): the file gives "
    "only the fields it changes"
)


def _relaxed(schema: Any) -> Any:
    """``schema`` with every required field dropped, at every depth (what an extending file may leave out); a sourced
    value still needs its ``value`` and ``source``."""
    if isinstance(schema, dict):
        return {
            k: _relaxed(v)
            for k, v in schema.items()
            if not (k == "anyOf" or (k == "required" and v != ["value", "source"]))
        }
    if isinstance(schema, list):
        return [_relaxed(v) for v in schema]
    return schema


def example_files(kind: str) -> list[Path]:
    return sorted(p for g in KINDS[kind].examples for p in ROOT.glob(g))


# ------------------------------------------------------------------------------------------------ Markdown
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _dig(node: Any, table: str) -> Any:
    """The TOML table at dotted ``table`` ("a.b[]": the first element of array b; "a.NAME": the first entry)."""
    for part in [p for p in table.split(".") if p]:
        if part == "NAME":
            node = next(iter(node.values()), None) if isinstance(node, dict) else None
            continue
        arr = part.endswith("[]")
        node = node.get(part.removesuffix("[]")) if isinstance(node, dict) else None
        if arr:
            node = node[0] if isinstance(node, list) and node else None
    return node


def _examples(kind: str) -> dict[tuple[str, str], str]:
    """(table, field) -> the value a shipped file gives it (the first file that sets it)."""
    from hwmodel.io import read_toml

    out: dict[tuple[str, str], str] = {}
    parsed = [read_toml(p) for p in example_files(kind)]
    for r in fields(KINDS[kind].cls, KINDS[kind].table) + _extra_fields(kind):
        for doc in parsed:
            node = _dig(doc, r.table)
            if isinstance(node, dict) and r.name in node:
                v = node[r.name]
                v = v["value"] if isinstance(v, dict) and set(v) == {"value", "source"} else v
                if isinstance(v, (dict, list)) and r.type.startswith(("table", "array of table")):
                    break
                text = json.dumps(v) if not isinstance(v, float) else f"{v:g}"
                out[(r.table, r.name)] = text if len(text) <= 40 else text[:37] + "..."
                break
    return out


def _table_rows(rows: list[Field], how: str, examples: dict[tuple[str, str], str]) -> list[str]:
    out = [
        "| field | type | unit | default | required | allowed values | example | description |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ex = examples.get((r.table, r.name), "")
        written = (
            "`{ value, source }`"
            if r.sourced
            else "bare value or `{ value, source }`"
            if how == "either"
            else "bare value"
        )
        out.append(
            "| "
            + " | ".join(
                _cell(x)
                for x in (
                    f"`{r.name}`",
                    f"{r.type}, {written}"
                    if r.type != "table"
                    and not r.type.startswith("array of table")
                    and not r.type.startswith("table of table")
                    else r.type,
                    r.unit,
                    f"`{r.default}`" if r.default else "",
                    "yes" if r.required else "no",
                    r.allowed,
                    f"`{ex}`" if ex else "",
                    r.doc,
                )
            )
            + " |"
        )
    return out


def markdown() -> str:
    """docs/specs.md: every field of every spec kind."""
    lines = [
        "# Spec reference",
        "",
        "Generated from the schema by `hwmodel specs reference` (hwmodel/spec_reference.py); "
        "tests/test_spec_reference.py fails when this file is out of date. `hwmodel specs schema KIND` prints "
        "the same as JSON Schema for an editor.",
        "",
        'A *sourced* field is written `key = { value = ..., source = "..." }` (the source: a document and '
        "section, a repository file, or `[estimate]` with the reason); any other field is a bare value. "
        "Unknown keys are refused, so a typo never falls back to a default. A field with a default may be "
        "left out; a field with no default is required.",
        "",
        "Derived, not declared: `hwmodel specs show BOARD` lists what follows from a board's fields (each "
        "port's bytes per AXI cycle and wire rate, the per-channel peak from width x clock against the declared "
        "peak, every DRAM timing in AXI cycles with its rounding), and `hwmodel fpga designs --verbose` what a "
        "design's fields give on its board (kernel:AXI clock ratio, port bytes per kernel cycle, port peaks). "
        "Timings round up to whole cycles (the JEDEC rule, hwmodel/derive.py); a value less than 1 % above a "
        "whole number of cycles that rounds up to the next one warns with the file, the field, the value and "
        "both cycle counts (it was almost surely meant as the lower count), and a timing that makes a command "
        "impossible at the AXI clock (a refresh that never ends, a read latency below tCL) is refused.",
        "",
        "| kind | what | shipped |",
        "|---|---|---|",
    ]
    for k in KINDS.values():
        lines.append(f"| [`{k.name}`](#{k.name}) | {_cell(k.what)} | {len(example_files(k.name))} |")
    for k in KINDS.values():
        lines += ["", f"## {k.name}", "", k.what[0].upper() + k.what[1:] + ".", ""]
        doc = (k.cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        if doc:
            lines += [doc, ""]
        rows = fields(k.cls, k.table)
        examples = _examples(k.name)
        tables: dict[str, list[Field]] = {}
        for r in rows:
            tables.setdefault(r.table, []).append(r)
        for r in _extra_fields(k.name):
            tables.setdefault(r.table, []).append(r)
        for table, trs in tables.items():
            title = (
                "top level"
                if not table
                else f"`[{table.replace('[]', '')}]`"
                + (" (an array of tables: `[[...]]`)" if table.endswith("[]") else "")
            )
            lines += [f"### {k.name}: {title}", ""] + _table_rows(trs, k.values, examples) + [""]
        for name, what in k.extra_tables:
            if _extra_cls(what) is None:
                lines += [f"### {k.name}: `[{name}]`", "", what[0].upper() + what[1:] + ".", ""]
        ex = example_files(k.name)
        if ex:
            lines += [
                f"Example: `{ex[0].relative_to(ROOT)}`"
                + (f" (and {len(ex) - 1} more shipped)" if len(ex) > 1 else "")
                + ".",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"
