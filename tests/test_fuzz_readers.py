"""Property-based fuzzing of every reader (issue #19): malformed bytes, structure, types and values. Each reader
either accepts the file or refuses it with ONE line naming the file (and the field where there is one) -- never a
traceback -- and an impossible value is never accepted. Commands are called in-process with click's CliRunner
where a cheap command reads the file; elsewhere the library reader the commands use is called directly.
Examples per reader: FUZZ_EXAMPLES (>= 200)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.fuzzing import (
    IMPOSSIBLE_TOML,
    check_cli,
    check_reader,
    corrupt_bytes,
    fresh,
    mutate_csv,
    mutate_jsonl,
    mutate_toml,
    numeric_toml_lines,
    replace_toml_value,
)

ROOT = Path(__file__).resolve().parent.parent
FUZZ_EXAMPLES = 200
FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.function_scoped_fixture,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


# ---------------------------------------------------------------------------------------------------- loaders
def _spec(p: Path) -> object:
    from hwmodel.specs import load_spec_file

    return load_spec_file(p)


def _design(p: Path) -> object:
    from fpga.streaming.design import load_design
    from fpga.streaming.engine import validate_design

    d = load_design(p)
    validate_design(d)
    return d


def _instruction_design(p: Path) -> object:
    from fpga.instruction.design import load_design

    return load_design(p)


def _cluster(p: Path) -> object:
    from hwmodel.serving.cluster import load_cluster, resolve_cluster

    return resolve_cluster(load_cluster(p))


def _system(p: Path) -> object:
    from hwmodel.reasoning.system import load_system

    return load_system(str(p))


def _sweep(p: Path) -> object:
    from hwmodel.dse import load_plan

    return load_plan(p)


def _commands(p: Path) -> object:
    from fpga.kvmu.commands import load_commands

    return load_commands(p)


def _measurements(p: Path) -> object:
    from calibration.measurements import load_measurements

    return load_measurements(p)


def _params(p: Path) -> object:
    from calibration.params import read_params_file

    return read_params_file(p)


def _prompts(p: Path) -> object:
    from fpga.functional.accuracy import load_prompt_file

    return load_prompt_file(p, 1000)


def _checkpoint(p: Path) -> object:
    from fpga.functional.weights import SafetensorsWeights
    from hwmodel.specs import library

    return SafetensorsWeights(p, library().llm("qwen2.5-0.5b"))


TOML_READERS = {
    "board": (ROOT / "fpga/boards/u280.toml", _spec),
    "llm": (ROOT / "hwmodel/llms/qwen2.5-0.5b.toml", _spec),
    "gpu": (ROOT / "gpu/devices/a100-40gb.toml", _spec),
    "link": (ROOT / "interconnect/links/pcie-gen3-x16.toml", _spec),
    "streaming-design": (ROOT / "fpga/designs/draft-u280.toml", _design),
    "instruction-design": (ROOT / "fpga/designs/instruction/glitches-u280.toml", _instruction_design),
    "cluster": (ROOT / "hwmodel/serving/clusters/a100+7xu280.toml", _cluster),
    "system": (ROOT / "hwmodel/reasoning/systems/config1.toml", _system),
    "sweep": (ROOT / "examples/sweeps/draft_u280.toml", _sweep),
}


def _good(name: str) -> tuple[Path, str]:
    path, _load = TOML_READERS[name]
    assert path.is_file(), path
    return path, path.read_text(encoding="utf-8")


def _copy_name(name: str) -> str:
    return TOML_READERS[name][0].name


# ---------------------------------------------------------------------------------------------------- TOML files
@pytest.mark.parametrize("name", sorted(TOML_READERS))
@FUZZ
@given(data=st.data())
def test_toml_reader_fuzz(root: Path, name: str, data: st.DataObject) -> None:
    src, text = _good(name)
    load = TOML_READERS[name][1]
    if data.draw(st.booleans()):
        blob = data.draw(corrupt_bytes(text.encode()))
    else:
        blob = data.draw(mutate_toml(text)).encode()
    p = fresh(root, _copy_name(name))
    p.write_bytes(blob)
    check_reader(load, p)


@pytest.mark.parametrize("name", sorted(TOML_READERS))
def test_toml_impossible_values_are_refused(root: Path, name: str) -> None:
    """Every number of every built-in spec-like file, replaced by NaN, an infinity or a negative number, is
    refused with one line naming the file (a physical quantity, count or index is never negative here)."""
    src, text = _good(name)
    load = TOML_READERS[name][1]
    lines = numeric_toml_lines(text)
    assert lines
    accepted = []
    for i in lines:
        for lit in IMPOSSIBLE_TOML:
            for inside in (True, False):
                p = fresh(root, _copy_name(name))
                p.write_text(replace_toml_value(text, i, lit, inside_sourced=inside), encoding="utf-8")
                if check_reader(load, p):
                    accepted.append(f"{text.splitlines()[i].split('=')[0].strip()} = {lit}")
    assert not accepted, accepted


def test_os_errors_are_one_line(root: Path) -> None:
    """A directory in place of the file, a missing file, gzip data under a plain name and plain text under .gz."""
    for name, (src, load) in TOML_READERS.items():
        d = fresh(root, src.name)
        d.mkdir()
        assert not check_reader(load, d), name
        assert not check_reader(load, fresh(root, "missing.toml")), name
        z = fresh(root, src.name)
        z.write_bytes(gzip.compress(src.read_bytes(), mtime=0))
        check_reader(load, z)  # gzip detected by its magic: accepted or refused on content, never a traceback


def test_cli_directory_named_like_a_toml_file(root: Path) -> None:
    d = fresh(root, "x.toml")
    d.mkdir()
    assert check_cli(["fpga", "decode", "--design", str(d)], d) == 2
    assert check_cli(["sweep", str(d), "--dry-run"], d) == 2
    assert check_cli(["serve", "run", "--cluster", str(d)], d) == 2


# ---------------------------------------------------------------------------------------------------- traces
def _trace_text(root: Path) -> str:
    from hwmodel.workload.generator import generate
    from hwmodel.workload.traceio import trace_lines

    return "\n".join(trace_lines(generate("gsm8k", "qwen2.5-math-7b", True, limit=3))) + "\n"


@FUZZ
@given(data=st.data())
def test_trace_fuzz_cli(root: Path, data: st.DataObject) -> None:
    text = _trace_text(root)
    name = data.draw(st.sampled_from(["t.jsonl", "t.jsonl.gz"]))
    blob = (
        data.draw(corrupt_bytes(text.encode())) if data.draw(st.booleans()) else data.draw(mutate_jsonl(text)).encode()
    )
    p = fresh(root, name)
    p.write_bytes(blob)
    check_cli(["workload", "validate", str(p), "--system", "config1"], p)


@pytest.mark.parametrize(
    "field,value",
    [
        ("prompt_tokens", -1),
        ("prompt_tokens", 0),
        ("prompt_tokens", 10**9),
        ("prompt_tokens", 1.5),
        ("prompt_tokens", True),
        ("correct", "False"),
        ("attempts", []),
    ],
)
def test_trace_impossible_values_exit_2(root: Path, field: str, value: object) -> None:
    lines = _trace_text(root).splitlines()
    obj = json.loads(lines[1])
    obj[field] = value
    p = fresh(root, "t.jsonl")
    p.write_text("\n".join([lines[0], json.dumps(obj), *lines[2:]]) + "\n")
    assert check_cli(["workload", "validate", str(p)], p) == 2


def test_trace_step_past_every_cap_and_empty_trace(root: Path) -> None:
    lines = _trace_text(root).splitlines()
    obj = json.loads(lines[1])
    obj["prompt_tokens"] = 4000  # a step then pushes the context past the 4,096-token caps of config1
    p = fresh(root, "t.jsonl")
    p.write_text("\n".join([lines[0], json.dumps(obj)]) + "\n")
    assert check_cli(["workload", "validate", str(p)], p) == 2
    assert check_cli(["reason", "run", "--trace", str(p), "--policy", "baseline"], p) == 2
    h = fresh(root, "h.jsonl")
    h.write_text(lines[0] + "\n")
    assert check_cli(["workload", "validate", str(h)], h) == 2


# ---------------------------------------------------------------------------------------------------- RSD logs
RSD_ROWS = [
    {
        "idx": 0,
        "token_counts": [100, 47, 61],
        "turn_info": [[0, 1], [1, 2], [2, 1], [3, 2]],
        "reward": [0.91, 0.42, 0.77, 0.1],
        "score": [True],
    },
    {"idx": 3, "token_counts": [30, 0, 0], "turn_info": [[0, 1]], "reward": [0.8], "score": [False]},
]
RSD_TEXT = "".join(json.dumps(r) + "\n" for r in RSD_ROWS)


@FUZZ
@given(data=st.data())
def test_rsd_fuzz_cli(root: Path, data: st.DataObject) -> None:
    blob = (
        data.draw(corrupt_bytes(RSD_TEXT.encode()))
        if data.draw(st.booleans())
        else data.draw(mutate_jsonl(RSD_TEXT)).encode()
    )
    p = fresh(root, "rsd.jsonl")
    p.write_bytes(blob)
    check_cli(["workload", "import-rsd", str(p), "--dataset", "math500", "--out", str(p.parent / "out.jsonl")], p)


@pytest.mark.parametrize(
    "row_change", [{"score": ["False"]}, {"score": "yes"}, {"score": [1]}, {"idx": 0.5}, {"idx": None}, {"idx": True}]
)
def test_rsd_bad_score_or_idx_exit_2(root: Path, row_change: dict) -> None:
    p = fresh(root, "rsd.jsonl")
    p.write_text(json.dumps({**RSD_ROWS[1], **row_change}) + "\n")
    assert (
        check_cli(["workload", "import-rsd", str(p), "--dataset", "math500", "--out", str(p.parent / "o.jsonl")], p)
        == 2
    )


def test_rsd_duplicate_ids_refused_at_import(root: Path) -> None:
    p = fresh(root, "rsd.jsonl")
    p.write_text(RSD_TEXT + json.dumps(RSD_ROWS[1]) + "\n")
    assert (
        check_cli(["workload", "import-rsd", str(p), "--dataset", "math500", "--out", str(p.parent / "o.jsonl")], p)
        == 2
    )


# ---------------------------------------------------------------------------------------------------- request streams
REQ_CSV = "id,arrival_s,prompt_tokens,output_tokens\n0,0.0,128,32\n1,0.5,256,64\n2,1.25,64,16\n"
REQ_JSONL = "".join(
    json.dumps({"id": i, "arrival_s": a, "prompt_tokens": p, "output_tokens": o}) + "\n"
    for i, a, p, o in [(0, 0.0, 128, 32), (1, 0.5, 256, 64), (2, 1.25, 64, 16)]
)


@FUZZ
@given(data=st.data())
def test_request_stream_fuzz_cli(root: Path, data: st.DataObject) -> None:
    fmt = data.draw(st.sampled_from(["csv", "jsonl"]))
    good = REQ_CSV if fmt == "csv" else REQ_JSONL
    if data.draw(st.booleans()):
        blob = data.draw(corrupt_bytes(good.encode()))
    else:
        blob = (data.draw(mutate_csv(good)) if fmt == "csv" else data.draw(mutate_jsonl(good))).encode()
    p = fresh(root, f"r.{fmt}")
    p.write_bytes(blob)
    check_cli(["workload", "requests", "validate", str(p)], p)


# ---------------------------------------------------------------------------------------------------- KVMU commands
@FUZZ
@given(data=st.data())
def test_kvmu_commands_fuzz(root: Path, data: st.DataObject) -> None:
    good = (ROOT / "examples/kvmu/scenario.txt").read_text()
    if data.draw(st.booleans()):
        blob = data.draw(corrupt_bytes(good.encode()))
    else:
        lines = good.splitlines()
        i = data.draw(st.integers(0, len(lines) - 1))
        lines[i] = data.draw(
            st.sampled_from(
                [
                    "init -1",
                    "speculate x",
                    "accept 3",
                    "ingest",
                    "wait 1e9",
                    "capacity 0",
                    "rollback rollback",
                    "speculate 99999999999999999999",
                    "mark 1",
                    "\x00",
                    "init 1.5",
                    "frobnicate 2",
                ]
            )
        )
        blob = ("\n".join(lines) + "\n").encode()
    p = fresh(root, "cmds.txt")
    p.write_bytes(blob)
    check_reader(_commands, p)


# ---------------------------------------------------------------------------------------------------- measurements
@FUZZ
@given(data=st.data())
def test_measurements_fuzz(root: Path, data: st.DataObject) -> None:
    good = (ROOT / "calibration/measurements/gpu.csv").read_text()
    blob = data.draw(corrupt_bytes(good.encode())) if data.draw(st.booleans()) else data.draw(mutate_csv(good)).encode()
    p = fresh(root, "m.csv")
    p.write_bytes(blob)
    check_reader(_measurements, p)


# ---------------------------------------------------------------------------------------------------- JSON files
@FUZZ
@given(data=st.data())
def test_params_file_fuzz(root: Path, data: st.DataObject) -> None:
    from tests.fuzzing import mutate_json_obj

    good = (ROOT / "calibration/params/gpu.json").read_text()
    blob = (
        data.draw(corrupt_bytes(good.encode()))
        if data.draw(st.booleans())
        else json.dumps(data.draw(mutate_json_obj(json.loads(good)))).encode()
    )
    p = fresh(root, "params.json")
    p.write_bytes(blob)
    check_reader(_params, p)


@FUZZ
@given(data=st.data())
def test_prompt_file_fuzz(root: Path, data: st.DataObject) -> None:
    from tests.fuzzing import mutate_json_obj

    good = json.dumps([[1, 2, 3, 4], [5, 6, 7, 8]])
    blob = (
        data.draw(corrupt_bytes(good.encode()))
        if data.draw(st.booleans())
        else json.dumps(data.draw(mutate_json_obj(json.loads(good)))).encode()
    )
    p = fresh(root, "prompts.json")
    p.write_bytes(blob)
    check_reader(_prompts, p)


# ---------------------------------------------------------------------------------------------------- checkpoints
@FUZZ
@given(data=st.data())
def test_checkpoint_fuzz(root: Path, data: st.DataObject) -> None:
    import numpy as np
    from safetensors.numpy import save as save_bytes

    good = save_bytes({"model.norm.weight": np.ones(896, dtype=np.float32)})
    p = fresh(root, "model.safetensors")
    p.write_bytes(data.draw(corrupt_bytes(good)))
    assert not check_reader(_checkpoint, p)  # never a complete checkpoint: always refused, in one line


# ---------------------------------------------------------------------------------------------------- results journal
@pytest.fixture(scope="module")
def journal(root: Path) -> tuple[Path, str]:
    from hwmodel.dse import load_plan, run_sweep
    from tests.test_dse_support import spec_file

    d = root / "journal"
    d.mkdir()
    spec = spec_file(d, "lanes = [8, 16]\nports = [4, 8]\nclock_mhz = [300]\n")
    run_sweep(load_plan(spec), d / "out", workers=1, progress=False)
    return spec, (d / "out" / "results.csv").read_text()


@FUZZ
@given(data=st.data())
def test_results_journal_fuzz(root: Path, journal: tuple[Path, str], data: st.DataObject) -> None:
    from hwmodel.dse import load_plan
    from hwmodel.dse.runner import open_store

    spec, good = journal
    blob = (
        data.draw(corrupt_bytes(good.encode()))
        if data.draw(st.booleans())
        else data.draw(mutate_csv(good, skip_comments=False)).encode()
    )
    out = fresh(root, "out")
    out.mkdir()
    (out / "results.csv").write_bytes(blob)
    plan = load_plan(spec)
    check_reader(lambda _p: open_store(plan, out).read(), out / "results.csv")
