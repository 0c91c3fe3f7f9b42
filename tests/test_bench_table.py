"""The README's speed table is generated (benchmarks/table.py): the README shows exactly what
results/benchmarks.json holds, the generator replaces only what lies between its markers, and each figure is read
from the line its benchmark prints (a missing line is an error row, never a number)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("bench_table", ROOT / "benchmarks" / "table.py")
assert _spec is not None and _spec.loader is not None
table = importlib.util.module_from_spec(_spec)
sys.modules["bench_table"] = table
_spec.loader.exec_module(table)


def _data() -> dict:
    return json.loads(table.JSON_PATH.read_text(encoding="utf-8"))


def test_the_readme_speed_table_is_the_json_rendered() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert table.block_of(readme, "README.md") == table.render(_data()), (
        "README.md's speed table differs from results/benchmarks.json: python benchmarks/table.py --from-json --readme"
    )


def test_the_json_has_every_benchmark_and_each_figure_a_value_or_a_reason() -> None:
    data = _data()
    assert data["format"] == table.FORMAT
    assert [b["name"] for b in data["benches"]] == [b.name for b in table.BENCHES]
    for bench, spec in zip(data["benches"], table.BENCHES):
        assert [r["key"] for r in bench["figures"]] == [f.key for f in spec.figures]
        for r in bench["figures"]:
            assert ("value" in r) != ("error" in r), r


def test_the_block_between_the_markers_is_replaced_and_nothing_else(tmp_path: Path) -> None:
    f = tmp_path / "page.md"
    before, after = "# Title\n\nintro\n", "\n## Next\ntext\n"
    f.write_text(before + table.BEGIN + "\nold table\n" + table.END + after)
    rendered = table.render(_data())
    assert table.main(["--from-json", "--readme", str(f)]) in (0, 1)  # 1 only when a figure holds an error
    text = f.read_text()
    assert text == before + table.BEGIN + "\n" + rendered + table.END + after
    assert table.block_of(text) == rendered
    assert table.replace_block(text, rendered) == text  # idempotent
    assert table.main(["--check", str(f)]) == 0
    f.write_text(text.replace(rendered, "stale\n"))
    assert table.main(["--check", str(f)]) == 1


@pytest.mark.parametrize(
    "text, why",
    [
        ("no markers at all\n", "found 0 begin and 0 end"),
        (f"{table.END}\nx\n{table.BEGIN}\n", "wrong order"),
        (f"{table.BEGIN}\n{table.BEGIN}\n{table.END}\n", "found 2 begin and 1 end"),
    ],
)
def test_bad_markers_give_one_line_naming_the_file(text: str, why: str) -> None:
    with pytest.raises(table.MarkerError, match=why) as exc:
        table.replace_block(text, "t\n", "notes.md")
    assert str(exc.value).startswith("notes.md: ") and "\n" not in str(exc.value)


#: one line as each benchmark prints it (the f-strings of benchmarks/bench_*.py, with numbers filled in)
SAMPLES = {
    "streaming": (
        "    ratio fast / reference : 225,019x (identical cycles: 1,234)\n"
        "[2] fresh draft-u280 tokens (ctx spread over 0..4096): 1,234 tokens / host s (0.81 ms each)\n"
        "     4 KB requests, ctx  1024: modelled  13.20 ms, host  15.10 ms (host / modelled = 1.14)\n"
        "    16 KB requests, ctx  1024: modelled  13.20 ms, host  12.80 ms (host / modelled = 0.97)\n"
    ),
    "dse": "sweep: 288 points (0 screened out) on 2 worker processes in 1.2 s (...): 20,274 design points per minute\n",
    "functional": "decode, int8 products on numba (1 row): 72.5 ms median, minimum 70.1 ms per token, CPU ...\n",
    "system-a": "full reproduction (hwmodel reproduce heteroreason --jobs 2): 49.8 s wall, 88.0 s user + ...\n",
    "serving": (
        "a100+7xu280                     t=0      2000     1.52    0.40        5000     1234.5\n"
        "reference (one event per token), a100+7xu280, 200 requests: 2.00 s (100 req/s); fast path 0.020 s "
        "(10000 req/s): 100x, same end time\n"
    ),
    "instruction": (
        "small program (10 instructions, 1,000 cycles): fast 1.0 M cycles/s, reference 0.010 M cycles/s, ratio 100x "
        "(identical counters)\n"
        "LLaMA2-7B decode step, ctx 1793, k=1: 4,000,000 cycles in 12 ms (333 M cycles/s, 40.5 steps/s with "
        "patching); first compile 1.00 s\n"
    ),
    "kvmu": "kernel, run-length cycles (run_kernel)                 12,345,678     23,456,789    321.5x\n",
    "gpu": (
        "decode_s, fresh engine:                   4096 steps/s   (300 kernels per step)\n"
        "launch queue, kernel by kernel:              100 passes/s  -> closed form 250x\n"
    ),
}
EXPECTED = {
    "streaming.fast_vs_reference": 225019,
    "streaming.fresh_tokens_per_s": 1234,
    "streaming.llama_16k_host_per_modelled": 0.97,
    "streaming.llama_4k_host_per_modelled": 1.14,
    "dse.points_per_min": 20274,
    "functional.ms_per_token": 72.5,
    "system_a.full_reproduction_s": 49.8,
    "serving.requests_per_s": 5000,
    "serving.fast_vs_per_token": 100,
    "instruction.fast_vs_reference": 100,
    "instruction.llama_steps_per_s": 40.5,
    "kvmu.kernel_commands_per_s": 12345678,
    "kvmu.kernel_vs_face": 321.5,
    "gpu.decode_steps_per_s": 4096,
    "gpu.closed_form_vs_kernel_by_kernel": 250,
}


@pytest.mark.parametrize("bench", [b for b in table.BENCHES if not b.json_out], ids=lambda b: b.name)
def test_each_figure_is_read_from_its_printed_line(bench: table.Bench) -> None:
    rows = table.figures_from_output(bench, SAMPLES[bench.name])
    assert {r["key"]: r.get("value") for r in rows} == {f.key: EXPECTED[f.key] for f in bench.figures}
    missing = table.figures_from_output(bench, "the benchmark printed something else\n")
    assert all("value" not in r and bench.script in r["error"] for r in missing)
    assert "not measured" in table.render({**_data(), "benches": [{**_data()["benches"][0], "figures": missing}]})


def test_growth_figures_come_from_bench_growths_json() -> None:
    bench = next(b for b in table.BENCHES if b.json_out)
    data = {"simulators": {"streaming": {"per_unit_s": 0.002, "max_relative_residual": 0.03, "growth": "linear"}}}
    rows = {r["key"]: r for r in table.figures_from_growth(bench, data)}
    assert rows["growth.streaming"]["value"] == pytest.approx(2.0)  # ms per token
    assert rows["growth.streaming"]["note"] == "linear: largest residual of the linear fit 3 %"
    assert "value" not in rows["growth.dse"] and "dse" in rows["growth.dse"]["error"]


def test_the_header_names_the_machine_of_each_benchmark() -> None:
    data = _data()
    first, second = data["benches"][0], data["benches"][1]
    zen = {"cpus": 2, "cpu": "AMD EPYC (family 25, model 1)", "python": "3.11.7", "system": "Linux"}
    xeon = {**zen, "cpu": "Intel(R) Xeon(R) (family 6, model 106)"}
    one = table.render({**data, "benches": [{**first, "machine": zen}, {**second, "machine": zen}]})
    assert "(2 CPUs, AMD EPYC (family 25, model 1), Python 3.11.7, " in one.splitlines()[0]
    both = table.render({**data, "benches": [{**first, "machine": zen}, {**second, "machine": xeon}]}).splitlines()[0]
    assert "AMD EPYC (family 25, model 1)" in both and "Intel(R) Xeon(R)" in both and "each benchmark's" in both
    legacy = {k: v for k, v in first.items() if k != "machine"}  # written before entries recorded their machine
    old_machine = {"cpus": 2, "python": "3.11.7", "system": "Linux"}
    assert (
        "(2 CPUs, Python 3.11.7, "
        in table.render({**data, "machine": old_machine, "benches": [legacy]}).splitlines()[0]
    )
    # `--only` replaces the top-level machine with this one: a kept legacy entry keeps the machine it ran on
    kept = table.run([], {**data, "machine": old_machine, "benches": [legacy]})
    assert kept["machine"] == table.machine()
    assert next(b for b in kept["benches"] if b["name"] == legacy["name"])["machine"] == old_machine


def test_the_cpu_is_named_from_the_first_processor_of_cpuinfo() -> None:
    block = "processor\t: {n}\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\nmodel name\t: AMD EPYC\n"
    text = block.format(n=0) + "\n" + block.format(n=1).replace("EPYC", "other")
    assert table.cpu_model(text) == "AMD EPYC (family 25, model 1)"
    assert table.cpu_model("processor\t: 0\nmodel name\t: Apple M2\n") == "Apple M2"  # no family, no model
