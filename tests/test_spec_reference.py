"""docs/specs.md and `hwmodel specs schema KIND` are generated from the schema (issue 26): the file is fresh, every
field of every kind is in it, and the JSON Schemas accept every shipped spec and reject malformed ones."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from hwmodel.cli import main
from hwmodel.io import read_toml
from hwmodel.spec_reference import (
    KINDS,
    ROOT,
    example_files,
    fields,
    json_schema,
    markdown,
)

DOC = ROOT / "docs" / "specs.md"


def test_docs_specs_md_is_fresh() -> None:
    assert DOC.read_text() == markdown(), (
        "docs/specs.md is out of date: run `hwmodel specs reference --out docs/specs.md`"
    )


def test_every_field_of_every_kind_is_documented() -> None:
    text = DOC.read_text()
    for kind in KINDS:
        assert f"## {kind}" in text
        for f in fields(KINDS[kind].cls, KINDS[kind].table):
            assert f"| `{f.name}` |" in text, (kind, f.table, f.name)
    assert "| `tccds_s` |" in text and "| `positions` |" in text  # a board timing, an issue-26 LLM field


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_accepts_every_shipped_spec(kind: str) -> None:
    schema = json_schema(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    files = example_files(kind)
    assert files, kind
    validator = jsonschema.Draft202012Validator(schema)
    for path in files:
        errors = sorted(validator.iter_errors(read_toml(path)), key=lambda e: list(e.path))
        assert not errors, f"{path}: {errors[0].message} at {list(errors[0].path)}"


@pytest.mark.parametrize(
    ("kind", "file", "break_it"),
    [
        ("fpga-board", "fpga/boards/u280.toml", lambda t: t["hbm"].update(stacks={"value": "two", "source": "x"})),
        ("fpga-board", "fpga/boards/u280.toml", lambda t: t["hbm"].update(stacks=2)),  # no source
        ("fpga-board", "fpga/boards/u280.toml", lambda t: t["hbm"].update(tccd_s={"value": 1e-9, "source": "x"})),
        ("fpga-board", "fpga/boards/u280.toml", lambda t: t.pop("resources")),
        ("llm", "hwmodel/llms/qwen2.5-0.5b.toml", lambda t: t.update(norm={"value": "batch", "source": "x"})),
        ("llm", "hwmodel/llms/qwen2.5-0.5b.toml", lambda t: t.update(layers={"value": 0, "source": "x"})),
        ("design", "fpga/designs/draft-u280.toml", lambda t: t.update(clock_hz="fast")),
    ],
)
def test_schema_rejects_a_malformed_spec(kind: str, file: str, break_it) -> None:  # type: ignore[no-untyped-def]
    table = copy.deepcopy(read_toml(ROOT / file))
    validator = jsonschema.Draft202012Validator(json_schema(kind))
    assert validator.is_valid(table)
    break_it(table)
    assert not validator.is_valid(table)


def test_cli_prints_schema_and_reference(tmp_path: Path) -> None:
    r = CliRunner().invoke(main, ["specs", "schema", "fpga-board"])
    assert r.exit_code == 0, r.output
    schema = json.loads(r.stdout)
    assert schema["properties"]["hbm"]["properties"]["tccds_s"]["required"] == ["value", "source"]
    r = CliRunner().invoke(main, ["specs", "schema", "board"])
    assert r.exit_code != 0 and "fpga-board" in r.output and "Traceback" not in r.output
    r = CliRunner().invoke(main, ["specs", "reference", "--out", str(tmp_path / "s.md")])
    assert r.exit_code == 0 and (tmp_path / "s.md").read_text() == DOC.read_text()
