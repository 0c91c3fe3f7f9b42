"""The spec library: built-ins load and are sourced; malformed or inconsistent specs fail with one clear line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hwmodel.errors import SpecError, UnknownNameError
from hwmodel.graph import params_of
from hwmodel.specs import BUILTIN_DIRS, SpecLibrary, library, load_spec_file


def test_every_builtin_loads_and_every_numeric_field_has_a_source() -> None:
    lib = library()
    assert set(lib.names("llm")) >= {
        "qwen2.5-0.5b",
        "qwen2.5-math-1.5b",
        "qwen2.5-math-7b",
        "skywork-prm-7b",
        "llama2-7b",
        "llama-3.2-1b",
    }
    assert set(lib.names("fpga-board")) >= {"u280", "v80"}
    assert set(lib.names("gpu")) >= {"rtx3090", "a100-40gb", "a100-80gb", "v100s", "orin-nano", "h200"}
    assert set(lib.names("link")) >= {"pcie-gen3-x16", "pcie-gen4-x16", "pcie-gen5-x8"}
    for spec in lib.all():
        assert spec.sources, spec.name
        assert all(src.strip() for src in spec.sources.values())


@pytest.mark.parametrize(
    "name, linear_b, total_b",
    [
        ("qwen2.5-0.5b", 0.358, 0.494),
        ("qwen2.5-math-1.5b", 1.31, 1.54),
        ("qwen2.5-math-7b", 6.53, 7.62),
        ("llama2-7b", 6.48, 6.74),
        ("llama-3.2-1b", 0.97, 1.24),
    ],
)
def test_derived_parameter_counts_match_published_sizes(name: str, linear_b: float, total_b: float) -> None:
    llm = library().llm(name)
    assert params_of(llm).weights / 1e9 == pytest.approx(linear_b, rel=0.01)
    assert params_of(llm).total / 1e9 == pytest.approx(total_b, rel=0.01)


def test_kv_bytes_per_token() -> None:
    lib = library()
    assert lib.llm("llama2-7b").kv_bytes(1, 8) == 256 * 1024
    assert lib.llm("qwen2.5-0.5b").kv_bytes(1, 8) == 6 * 1024


def test_hbm_aggregates() -> None:
    u280 = library().board("u280")
    assert u280.hbm.peak_bw_bytes_per_s == pytest.approx(460e9)
    assert u280.hbm.measured_bw_bytes_per_s == pytest.approx(425e9, rel=0.001)
    assert u280.hbm.pc_capacity_bytes == 256 * 2**20


def _mutated(tmp_path: Path, builtin: str, kind: str, old: str, new: str) -> Path:
    src = (BUILTIN_DIRS[kind] / f"{builtin}.toml").read_text()
    assert re.search(old, src, flags=re.M), old
    path = tmp_path / f"broken-{builtin}.toml"
    path.write_text(re.sub(old, new, src, count=1, flags=re.M))
    return path


CASES = [
    # (builtin, kind, regex, replacement, field named in the message, words of the expectation)
    ("qwen2.5-0.5b", "llm", r"^layers = .*$", "", "layers", "required field"),
    ("qwen2.5-0.5b", "llm", r"^hidden = \{ value = 896", 'hidden = { value = "896"', "hidden", "an integer"),
    ("qwen2.5-0.5b", "llm", r"^kv_heads = \{ value = 2,", "kv_heads = { value = 16,", "kv_heads", "at most heads"),
    ("qwen2.5-0.5b", "llm", r"^kv_heads = \{ value = 2,", "kv_heads = { value = 4,", "kv_heads", "a divisor of heads"),
    ("qwen2.5-0.5b", "llm", r"^layers = \{ value = 24,", "layers = { value = -3,", "layers", "a positive number"),
    ("qwen2.5-0.5b", "llm", r"^layers = \{ value = 24, source = .*$", "layers = 24", "layers", "{ value = ..., source"),
    ("qwen2.5-0.5b", "llm", r"^vocab = ", "vocabulary = ", "vocabulary", "a known field name"),
    (
        "qwen2.5-0.5b",
        "llm",
        r'^architecture = \{ value = "qwen2"',
        'architecture = { value = "gpt"',
        "architecture",
        "one of 'llama', 'mistral', 'qwen2'",
    ),
    (
        "u280",
        "fpga-board",
        r"^pc_peak_bw_bytes_per_s = \{ value = 14.375e9",
        "pc_peak_bw_bytes_per_s = { value = -1.0",
        "hbm.pc_peak_bw_bytes_per_s",
        "a positive number",
    ),
    (
        "u280",
        "fpga-board",
        r"^pc_measured_bw_bytes_per_s = \{ value = 13.28e9",
        "pc_measured_bw_bytes_per_s = { value = 15e9",
        "hbm.pc_measured_bw_bytes_per_s",
        "at most pc_peak",
    ),
    (
        "u280",
        "fpga-board",
        r'^host_link = \{ value = "pcie-gen3-x16"',
        'host_link = { value = "pcie-gen9"',
        "host_link",
        "the name of a link spec",
    ),
    (
        "u280",
        "fpga-board",
        r"^dsp = \{ value = 8304, source = \"[^\"]*\"",
        'dsp = { value = 8304, source = ""',
        "resources.dsp.source",
        "non-empty string",
    ),
    (
        "a100-40gb",
        "gpu",
        r"^idle_power_w = \{ value = 35.0",
        "idle_power_w = { value = 900.0",
        "idle_power_w",
        "below tdp_w",
    ),
    (
        "pcie-gen3-x16",
        "link",
        r"^effective_bw_bytes_per_s = \{ value = 12.0e9",
        "effective_bw_bytes_per_s = { value = 99e9",
        "effective_bw_bytes_per_s",
        "at most raw_bw",
    ),
    ("pcie-gen3-x16", "link", r'^kind = "link"', 'kind = "cable"', "kind", "one of"),
]


@pytest.mark.parametrize("builtin, kind, old, new, field, expected", CASES)
def test_malformed_spec_fails_with_file_field_and_expectation(
    tmp_path: Path, builtin: str, kind: str, old: str, new: str, field: str, expected: str
) -> None:
    path = _mutated(tmp_path, builtin, kind, old, new)
    with pytest.raises(SpecError) as info:
        SpecLibrary((tmp_path,))
    msg = str(info.value)
    assert "\n" not in msg
    assert str(path) in msg
    assert f"field '{field}'" in msg
    assert expected in msg


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('kind = "llm"\nname = \n')
    with pytest.raises(SpecError, match=r"bad\.toml:2: expected valid TOML"):
        load_spec_file(path)


def test_unknown_names_list_the_choices() -> None:
    with pytest.raises(UnknownNameError) as info:
        library().llm("gpt-5")
    assert "qwen2.5-0.5b" in str(info.value) and "llama2-7b" in str(info.value)
    with pytest.raises(UnknownNameError) as info:
        library().device("tpu-v4")
    assert "u280" in str(info.value) and "a100-40gb" in str(info.value)


def test_user_spec_directory_adds_and_overrides(tmp_path: Path) -> None:
    src = (BUILTIN_DIRS["gpu"] / "a100-40gb.toml").read_text()
    (tmp_path / "mine.toml").write_text(src.replace('name = "a100-40gb"', 'name = "my-gpu"'))
    (tmp_path / "override.toml").write_text(src.replace("price_usd = { value = 10000.0", "price_usd = { value = 1.0"))
    lib = SpecLibrary((tmp_path,))
    assert lib.gpu("my-gpu").memory_bytes == lib.gpu("a100-40gb").memory_bytes
    assert lib.gpu("a100-40gb").price_usd == 1.0
