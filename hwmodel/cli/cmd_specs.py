"""`hwmodel specs list|show`: the spec library."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import click

from hwmodel.cli.base import console, echo_json, group, json_option
from hwmodel.specs import BUILTIN_DIRS, BoardSpec, LlmSpec, Spec, library

specs = group("specs", "Browse the spec library (FPGA boards, GPUs, links, LLMs).")


def _origin_label(spec: Spec) -> str:
    builtin = any(str(spec.origin).startswith(str(d)) for d in BUILTIN_DIRS.values())
    return "built-in" if builtin else spec.origin


def _flatten(obj: Any, prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for f in dataclasses.fields(obj):
        if not f.metadata.get("toml", True) or f.name in ("kind", "name", "display_name", "notes"):
            continue
        value = getattr(obj, f.name)
        if value is None or type(value).__name__ == "MissingMemory":  # an optional table left out
            continue
        if dataclasses.is_dataclass(value):
            rows += _flatten(value, prefix + f.name + ".")
        else:
            rows.append((prefix + f.name, value))
    return rows


def _derived(spec: Spec) -> list[tuple[str, Any, str, str]]:
    """(name, value, unit, how) of what follows from the fields: an LLM's shapes and parameter counts; a board's
    per-channel peak, port bytes per cycle and every timing in AXI cycles (checked: hwmodel.derive)."""
    if isinstance(spec, LlmSpec):
        from hwmodel.graph import params_of

        p = params_of(spec)  # parameter counts come from the operator graph
        values = {
            "q_dim": spec.q_dim,
            "kv_dim": spec.kv_dim,
            "linear_params": p.weights,
            "bias_params": p.bias,
            "norm_params": p.norm,
            "embedding_params": spec.embedding_params,
            "head_params": spec.head_params,
            "total_params": p.total,
            "kv_elements_per_token": spec.kv_elements_per_token,
        }
        return [(name, value, "", "derived") for name, value in values.items()]
    if isinstance(spec, BoardSpec):
        from hwmodel.derive import board_derived

        return board_derived(spec)
    return []


@specs.command("list")
@json_option
def list_cmd(as_json: bool) -> None:
    """List every spec: kind, name, display name, origin."""
    rows = [
        {"kind": s.KIND, "name": s.name, "display_name": s.display_name, "origin": _origin_label(s)}
        for s in library().all()
    ]
    if as_json:
        echo_json(rows)
        return
    from rich.markup import escape  # spec strings are printed literally: `[estimate]` is text, not markup
    from rich.table import Table

    table = Table("kind", "name", "display name", "origin")
    for r in rows:
        table.add_row(*(escape(str(r[k])) for k in ("kind", "name", "display_name", "origin")))
    console().print(table)


@specs.command("show")
@click.argument("name")
@json_option
def show_cmd(name: str, as_json: bool) -> None:
    """Show every field of spec NAME with its unit and source, and derived quantities."""
    spec = library().find(name)
    units = _units(type(spec))
    fields = _flatten(spec)
    if as_json:
        echo_json(
            {
                "kind": spec.KIND,
                "name": spec.name,
                "display_name": spec.display_name,
                "notes": spec.notes,
                "origin": spec.origin,
                "fields": {k: {"value": v, "unit": units.get(k, ""), "source": spec.source_of(k)} for k, v in fields},
                "derived": {k: {"value": v, "unit": u, "how": how} for k, v, u, how in _derived(spec)},
            }
        )
        return
    from rich.markup import escape  # spec strings are printed literally: `[estimate]` is text, not markup
    from rich.table import Table

    table = Table(
        "field",
        "value",
        "unit",
        "source",
        title=escape(f"{spec.display_name} ({spec.KIND} '{spec.name}')"),
        caption=escape(spec.notes) if spec.notes else None,
    )
    for k, v in fields:
        table.add_row(
            escape(k),
            escape(f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)),
            escape(units.get(k, "")),
            escape(spec.source_of(k)),
        )
    for k, v, u, how in _derived(spec):
        table.add_row(escape(k), f"{v:,}" if isinstance(v, int) else f"{v:.6g}", escape(u), escape(how))
    console().print(table)


def _units(cls: Any, prefix: str = "") -> dict[str, str]:
    import typing

    out: dict[str, str] = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if dataclasses.is_dataclass(hints.get(f.name)):
            out.update(_units(hints[f.name], prefix + f.name + "."))
        else:
            out[prefix + f.name] = f.metadata.get("unit", "")
    return out


@specs.command("import-hf")
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--name", required=True, help="Spec name to give the model (lower-case; the file is NAME.toml).")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("."),
    show_default=True,
    help="Directory to write NAME.toml into (use it with --spec-dir).",
)
@click.option(
    "--hf-id", default=None, help="Hugging Face repository id for the sources (default: the config's _name_or_path)."
)
@click.option("--display-name", default=None, help="Human-readable name (default: the repository's last part).")
def import_hf_cmd(config: Path, name: str, out_dir: Path, hf_id: str | None, display_name: str | None) -> None:
    """Write a sourced LLM spec from a Hugging Face CONFIG.json (Llama, Mistral, Qwen2, Qwen3, Mixtral, Qwen2-MoE,
    Qwen3-MoE). A field it cannot map is refused with its name; `--spec-dir OUT` then makes the model usable by
    every command."""
    from hwmodel.hf_import import import_hf

    path = import_hf(config, name, out_dir, hf_id=hf_id, display_name=display_name)
    click.echo(f"wrote {path}  (use: hwmodel --spec-dir {path.parent} ... --llm {name})")


@specs.command("schema")
@click.argument("kind")
def schema_cmd(kind: str) -> None:
    """Print the JSON Schema of spec KIND (fpga-board, llm, gpu, link, design, instruction-design, cluster, system,
    sweep), for an editor that validates TOML specs as they are typed (taplo / Even Better TOML)."""
    from hwmodel.spec_reference import json_schema

    click.echo(json.dumps(json_schema(kind), indent=2))


@specs.command("reference")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the Markdown here (docs/specs.md) instead of printing it.",
)
def reference_cmd(out: Path | None) -> None:
    """The reference of every field of every spec kind (table, type, unit, default, required, allowed values, an
    example, description), generated from the schema: docs/specs.md."""
    from hwmodel.spec_reference import markdown

    text = markdown()
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
        click.echo(f"wrote {out}")
