"""The README's speed table, generated: run the benchmarks' quick modes, keep their figures in
``results/benchmarks.json`` and write a Markdown table between the markers of a file.

    python benchmarks/table.py                      # run every benchmark's quick mode, write the JSON, print the table
    python benchmarks/table.py --readme             # ... and put the table into README.md (between the markers)
    python benchmarks/table.py --readme FILE ...    # ... into these files instead
    python benchmarks/table.py --only streaming,dse --readme   # re-run two benchmarks, keep the others' figures
    python benchmarks/table.py --from-json --readme # no runs: the table from the JSON as it is
    python benchmarks/table.py --check README.md    # exit 1 when the file's table is not the JSON's

A file takes the table between the lines ``<!-- speed-table:begin -->`` and ``<!-- speed-table:end -->``; what is
outside them is left as it is. Each benchmark runs as its own process (``python benchmarks/NAME.py`` with the
quick arguments of :data:`BENCHES`), and each figure is read from the line the benchmark prints for it (the
pattern beside the figure): a benchmark that fails or no longer prints a figure gives a row that says so and a
non-zero exit, never an old number. The table is rendered from the JSON alone (:func:`render`), so
``tests/test_bench_table.py`` can check that the README shows what the JSON holds. Quick modes are smaller runs
than the benchmarks' defaults (start-up weighs more); the last column gives the command of the full figure.
Host times depend on the machine and its load: each benchmark's entry records its machine (cores, CPU model, Python)
and the load average before and after it; the header names every machine the figures come from.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JSON_PATH = ROOT / "results" / "benchmarks.json"
BEGIN, END = "<!-- speed-table:begin -->", "<!-- speed-table:end -->"
FORMAT = 1
NUM = r"([0-9][0-9,]*(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)"


@dataclasses.dataclass(frozen=True)
class Figure:
    """One row: ``pattern`` (``{n}`` stands for a number) finds the benchmark's printed line, ``group`` is the
    number it reports; ``fmt`` formats the value in the table."""

    key: str
    simulator: str
    label: str
    pattern: str
    unit: str
    fmt: str = "{:,.3g}"
    group: int = 1


@dataclasses.dataclass(frozen=True)
class Bench:
    name: str
    script: str
    quick: tuple[str, ...]
    full: str
    figures: tuple[Figure, ...]
    json_out: bool = False  # the script takes --json PATH and the figures are read from it (bench_growth.py)
    timeout_s: float = 900.0


BENCHES: tuple[Bench, ...] = (
    Bench(
        "streaming",
        "bench_streaming.py",
        ("--quick",),
        "python benchmarks/bench_streaming.py",
        (
            Figure(
                "streaming.fast_vs_reference",
                "FPGA streaming",
                "fast engine vs its cycle-stepped reference, same design",
                r"ratio fast / reference\s*:\s*{n}x",
                "x",
                "{:,.0f}",
            ),
            Figure(
                "streaming.fresh_tokens_per_s",
                "FPGA streaming",
                "fresh draft-u280 tokens (0.5B W8A8) per host second",
                r"fresh draft-u280 tokens[^:]*:\s*{n} tokens / host s",
                "tokens/s",
                "{:,.0f}",
            ),
            Figure(
                "streaming.llama_16k_host_per_modelled",
                "FPGA streaming",
                "LLaMA2-7B W4 token, 16 KB requests: host time / modelled FPGA time",
                r"16 KB requests, ctx\s+\d+:.*host / modelled = {n}",
                "x",
                "{:.2f}",
            ),
            Figure(
                "streaming.llama_4k_host_per_modelled",
                "FPGA streaming",
                "LLaMA2-7B W4 token, 4 KB requests: host time / modelled FPGA time",
                r" 4 KB requests, ctx\s+\d+:.*host / modelled = {n}",
                "x",
                "{:.2f}",
            ),
        ),
    ),
    Bench(
        "dse",
        "bench_dse.py",
        ("--workers", "2", "--clocks", "3", "--sample", "8"),
        "python benchmarks/bench_dse.py --workers 2",
        (
            Figure(
                "dse.points_per_min",
                "DSE",
                "design points per minute, 0.5B decode ctx 512, 2 workers (quick: 288 points, pool start-up included)",
                r"{n} design points per minute",
                "points/min",
                "{:,.0f}",
            ),
        ),
    ),
    Bench(
        "functional",
        "bench_functional.py",
        ("--steps", "8", "--prompt", "16"),
        "python benchmarks/bench_functional.py",
        (
            Figure(
                "functional.ms_per_token",
                "W8A8 functional",
                "Qwen2.5-0.5B W8A8 bit-exact decode, per token (median)",
                r"decode, int8 products on \w+\s*\(1 row\): {n} ms median",
                "ms",
                "{:.1f}",
            ),
        ),
    ),
    Bench(
        "system-a",
        "bench_reasoning.py",
        ("--only-full",),
        "python benchmarks/bench_reasoning.py --full",
        (
            Figure(
                "system_a.full_reproduction_s",
                "system A",
                "full reproduction (`hwmodel reproduce heteroreason`, 2 workers), host wall time",
                r"full reproduction .*?: {n} s wall",
                "s",
                "{:.1f}",
            ),
        ),
    ),
    Bench(
        "serving",
        "bench_serving.py",
        ("--requests", "2000", "--reference-requests", "200"),
        "python benchmarks/bench_serving.py",
        (
            Figure(
                "serving.requests_per_s",
                "system B serving",
                "A100 + 7 x U280 at saturation, simulated requests per host second (2,000 requests)",
                r"(?m)^a100\+7xu280\s+t=0\s+\d+\s+{n}\s+{n}\s+{n}",
                "requests/s",
                "{:,.0f}",
                group=3,
            ),
            Figure(
                "serving.fast_vs_per_token",
                "system B serving",
                "one event per decode vs one event per token (reference), same end time",
                r"fast path .*?: {n}x, same end time",
                "x",
                "{:,.0f}",
            ),
        ),
    ),
    Bench(
        "instruction",
        "bench_instruction.py",
        (),
        "python benchmarks/bench_instruction.py",
        (
            Figure(
                "instruction.fast_vs_reference",
                "FPGA instruction",
                "fast engine vs its cycle-stepped reference, same program",
                r"ratio {n}x \(identical counters\)",
                "x",
                "{:,.0f}",
            ),
            Figure(
                "instruction.llama_steps_per_s",
                "FPGA instruction",
                "LLaMA2-7B decode steps per host second on glitches-u280 (ctx 1793, k=1, patching included)",
                r"k=1: .*?cycles/s, {n} steps/s",
                "steps/s",
                "{:,.1f}",
            ),
        ),
    ),
    Bench(
        "kvmu",
        "bench_kvmu.py",
        ("--commands", "200000", "--face-commands", "20000"),
        "python benchmarks/bench_kvmu.py",
        (
            Figure(
                "kvmu.kernel_commands_per_s",
                "KVMU",
                "kernel (run-length cycles), KVMU commands per host second",
                r"kernel, run-length cycles \(run_kernel\)\s+{n}\s+{n}\s+{n}x",
                "commands/s",
                "{:,.0f}",
            ),
            Figure(
                "kvmu.kernel_vs_face",
                "KVMU",
                "kernel vs the Python face (reference), same commands",
                r"kernel, run-length cycles \(run_kernel\)\s+{n}\s+{n}\s+{n}x",
                "x",
                "{:,.0f}",
                group=3,
            ),
        ),
    ),
    Bench(
        "gpu",
        "bench_gpu_engine.py",
        ("--contexts", "1024"),
        "python benchmarks/bench_gpu_engine.py",
        (
            Figure(
                "gpu.decode_steps_per_s",
                "GPU",
                "A100 HF LLaMA2-7B decode_s, fresh engine, steps per host second",
                r"decode_s, fresh engine:\s+{n} steps/s",
                "steps/s",
                "{:,.0f}",
            ),
            Figure(
                "gpu.closed_form_vs_kernel_by_kernel",
                "GPU",
                "launch queue in closed form vs kernel by kernel (reference)",
                r"closed form {n}x",
                "x",
                "{:,.0f}",
            ),
        ),
    ),
    Bench(
        "growth",
        "bench_growth.py",
        ("--small", "--out", "{tmp}/growth.png"),
        "python benchmarks/bench_growth.py",
        (
            Figure(
                "growth.streaming",
                "FPGA streaming",
                "growth: host time per token (linear fit over tokens x context)",
                "streaming",
                "ms/token",
                "{:.2f}",
            ),
            Figure("growth.dse", "DSE", "growth: host time per design point (linear fit)", "dse", "ms/point", "{:.1f}"),
            Figure(
                "growth.serving",
                "system B serving",
                "growth: host time per request (linear fit over requests x nodes)",
                "serving",
                "us/request",
                "{:.0f}",
            ),
            Figure(
                "growth.system_a",
                "system A",
                "growth: host time per problem (linear fit, memos warm)",
                "system-a",
                "ms/problem",
                "{:.1f}",
            ),
        ),
        json_out=True,
    ),
)


def _parse_number(text: str) -> float:
    return float(text.replace(",", ""))


def figures_from_output(bench: Bench, stdout: str) -> list[dict]:
    """The figures of ``bench`` read from its printed output; a figure whose line is missing has ``error``."""
    rows = []
    for f in bench.figures:
        m = re.search(f.pattern.replace("{n}", NUM), stdout)
        row = _row(f)
        if m is None:
            row["error"] = f"no line matching {f.pattern!r} in the output of {bench.script}"
        else:
            row["value"] = _parse_number(m.group(f.group))
        rows.append(row)
    return rows


def figures_from_growth(bench: Bench, data: dict) -> list[dict]:
    """The per-unit costs of bench_growth.py's JSON (``pattern`` names the simulator), in the figure's unit."""
    scale = {"ms/token": 1e3, "ms/point": 1e3, "us/request": 1e6, "ms/problem": 1e3}
    rows = []
    for f in bench.figures:
        row = _row(f)
        sim = data.get("simulators", {}).get(f.pattern)
        if sim is None:
            row["error"] = f"bench_growth.py did not measure {f.pattern!r}"
        else:
            row["value"] = sim["per_unit_s"] * scale[f.unit]
            row["note"] = (
                f"{sim['growth']}: largest residual of the linear fit {100 * sim['max_relative_residual']:.0f} %"
            )
        rows.append(row)
    return rows


def _row(f: Figure) -> dict:
    return {"key": f.key, "simulator": f.simulator, "figure": f.label, "unit": f.unit, "fmt": f.fmt}


def _load() -> float:
    return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else float("nan")


def run_bench(bench: Bench) -> dict:
    """Run one benchmark's quick mode in its own process; its figures, host wall time and the load around it."""
    with tempfile.TemporaryDirectory() as tmp:
        argv = [a.format(tmp=tmp) for a in bench.quick]
        if bench.json_out:
            argv += ["--json", f"{tmp}/figures.json"]
        cmd = [sys.executable, str(ROOT / "benchmarks" / bench.script), *argv]
        load0, t0 = _load(), time.perf_counter()
        print(f"[table] {bench.name}: {' '.join(['python', 'benchmarks/' + bench.script, *bench.quick])}", flush=True)
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, capture_output=True, text=True, timeout=bench.timeout_s, env={**os.environ}
            )
            failed = None if proc.returncode == 0 else f"exit {proc.returncode}: " + _last_line(proc.stderr)
            stdout = proc.stdout
        except subprocess.TimeoutExpired:
            failed, stdout = f"ran past {bench.timeout_s:.0f} s", ""
        wall = time.perf_counter() - t0
        if failed is not None:  # no figure is read from a failed run (the rows below say why)
            rows = [_row(f) for f in bench.figures]
        elif bench.json_out:
            rows = figures_from_growth(bench, json.loads(Path(tmp, "figures.json").read_text()))
        else:
            rows = figures_from_output(bench, stdout)
    if failed:
        for r in rows:
            r.pop("value", None)
            r["error"] = f"{bench.script} failed ({failed})"
    return {
        "name": bench.name,
        "command": " ".join(["python", "benchmarks/" + bench.script, *bench.quick]),
        "full_command": bench.full,
        "wall_s": round(wall, 1),
        "load_average_before": load0,
        "load_average_after": _load(),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "machine": machine(),
        "figures": rows,
    }


def cpu_model(cpuinfo: str | None = None) -> str:
    """The host CPU as Linux names it in ``/proc/cpuinfo`` (or the text ``cpuinfo``): its ``model name`` with its
    family and model numbers, which tell apart the generations one marketing name covers (e.g. "AMD EPYC"); else
    what :mod:`platform` says, else "unknown"."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if fields:
                break  # the first processor's block is enough
            continue
        fields.setdefault(key.strip(), value.strip())
    name = fields.get("model name") or platform.processor() or "unknown"
    if "cpu family" in fields and "model" in fields:
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def machine() -> dict:
    """What a figure was measured on: each benchmark entry records its own, since the same code runs up to 2x apart
    on two VMs of the same size (CHANGELOG.md, round 17) and ``--only`` keeps older entries beside new ones."""
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu_model(),
        "python": platform.python_version(),
        "system": platform.system(),
    }


def _last_line(text: str) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "(no output)"


def _machine_text(m: dict) -> str:
    """A machine record as the table's header names it (entries written before the CPU was recorded lack it)."""
    return f"{m['cpus']} CPUs, " + (f"{m['cpu']}, " if m.get("cpu") else "") + f"Python {m['python']}"


def render(data: dict) -> str:
    """The Markdown table (with its one-line header) from the JSON alone."""
    benches = data["benches"]
    ran = [b for b in benches if b["date_utc"] is not None] or [{"date_utc": "-", "load_average_before": 0.0}]
    loads = [b[k] for b in ran for k in ("load_average_before", "load_average_after") if k in b]
    dates = sorted(b["date_utc"] for b in ran)
    machines = list(dict.fromkeys(_machine_text(b.get("machine") or data["machine"]) for b in ran))
    lines = [
        f"Generated by `{data['command']}` from `results/benchmarks.json` ({'; '.join(machines)}"
        + (" (each benchmark's in the JSON)" if len(machines) > 1 else "")
        + f", {dates[0]}"
        + (f" to {dates[-1]}" if dates[-1] != dates[0] else "")
        + f" UTC, load average {min(loads):.1f}–{max(loads):.1f}): each benchmark's quick mode, wall clock; "
        "the full figure is the command in the last column.",
        "",
        "| Simulator | Figure | Value | Benchmark (full figure) |",
        "|---|---|---:|---|",
    ]
    for b in benches:
        for r in b["figures"]:
            if "value" in r:
                value = r["fmt"].format(r["value"]) + ("x" if r["unit"] == "x" else f" {r['unit']}")
            else:
                value = "not measured"
            figure = r["figure"] + (f" ({r['note']})" if r.get("note") else "")
            figure += f" — {r['error']}" if r.get("error") else ""
            lines.append(f"| {r['simulator']} | {figure} | {value} | `{b['full_command']}` |")
    return "\n".join(lines) + "\n"


class MarkerError(ValueError):
    pass


def replace_block(text: str, table: str, where: str = "file") -> str:
    """``text`` with the lines between the markers replaced by ``table``."""
    lines = text.splitlines(keepends=True)
    begins = [i for i, ln in enumerate(lines) if ln.strip() == BEGIN]
    ends = [i for i, ln in enumerate(lines) if ln.strip() == END]
    if len(begins) != 1 or len(ends) != 1 or ends[0] < begins[0]:
        raise MarkerError(
            f"{where}: expected one line {BEGIN} followed by one line {END}; found {len(begins)} begin and "
            f"{len(ends)} end marker(s)" + (" in the wrong order" if begins and ends and ends[0] < begins[0] else "")
        )
    b, e = begins[0], ends[0]
    return "".join(lines[: b + 1]) + table + "".join(lines[e:])


def block_of(text: str, where: str = "file") -> str:
    """What a file holds between its markers."""
    lines = text.splitlines(keepends=True)
    try:
        b = next(i for i, ln in enumerate(lines) if ln.strip() == BEGIN)
        e = next(i for i, ln in enumerate(lines) if ln.strip() == END and i > b)
    except StopIteration:
        raise MarkerError(f"{where}: no {BEGIN} ... {END} block") from None
    return "".join(lines[b + 1 : e])


def run(names: Sequence[str], previous: dict | None) -> dict:
    """The JSON after running the benchmarks ``names``; the others keep their entries from ``previous``, each with
    its machine (an entry written before entries recorded their own takes the previous run's)."""
    old_machine = (previous or {}).get("machine")
    by_name = {
        b["name"]: {**b, "machine": b.get("machine") or old_machine} if b["date_utc"] and old_machine else b
        for b in (previous or {}).get("benches", [])
    }
    for bench in BENCHES:
        if bench.name in names:
            by_name[bench.name] = run_bench(bench)
    return {
        "format": FORMAT,
        "command": "python benchmarks/table.py --readme",
        "machine": machine(),
        "benches": [by_name.get(b.name) or _not_run(b) for b in BENCHES],
    }


def _not_run(bench: Bench) -> dict:
    """The entry of a benchmark not run yet: each figure says how to measure it."""
    rows = [
        {**_row(f), "error": f"not run yet (python benchmarks/table.py --only {bench.name})"} for f in bench.figures
    ]
    return {
        "name": bench.name,
        "command": " ".join(["python", "benchmarks/" + bench.script, *bench.quick]),
        "full_command": bench.full,
        "wall_s": None,
        "load_average_before": None,
        "load_average_after": None,
        "date_utc": None,
        "figures": rows,
    }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--readme", nargs="*", type=Path, default=None, metavar="FILE", help="files to write (README.md)")
    ap.add_argument("--json", type=Path, default=JSON_PATH, help="the figures (default results/benchmarks.json)")
    ap.add_argument("--only", default=None, help="comma-separated benchmarks: " + ", ".join(b.name for b in BENCHES))
    ap.add_argument("--from-json", action="store_true", help="run nothing; render the JSON as it is")
    ap.add_argument("--check", nargs="+", type=Path, default=None, metavar="FILE", help="compare, write nothing")
    args = ap.parse_args(argv)
    names = [b.name for b in BENCHES] if args.only is None else [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = sorted(set(names) - {b.name for b in BENCHES})
    if unknown:
        ap.error(f"--only: unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(b.name for b in BENCHES)}")
    previous = json.loads(args.json.read_text()) if args.json.is_file() else None
    if args.check or args.from_json:
        if previous is None:
            print(f"table.py: {args.json}: no such file (run without --from-json/--check first)", file=sys.stderr)
            return 2
        data = previous
    else:
        data = run(names, previous)
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        print(f"[table] wrote {args.json}")
    table = render(data)
    status = 0
    try:
        for path in args.check or []:
            if block_of(path.read_text(encoding="utf-8"), str(path)) != table:
                print(f"table.py: {path}: the speed table is not the one {args.json} gives; run --from-json --readme")
                status = 1
        for path in [ROOT / "README.md"] if args.readme == [] else args.readme or []:
            path.write_text(replace_block(path.read_text(encoding="utf-8"), table, str(path)), encoding="utf-8")
            print(f"[table] wrote the speed table into {path}")
    except MarkerError as exc:
        print(f"table.py: {exc}", file=sys.stderr)
        return 2
    if args.check:
        return status  # the comparison alone; a figure's error is the JSON's content, shown in the table
    print(table)
    errors = [r for b in data["benches"] for r in b["figures"] if r.get("error")]
    for r in errors:
        print(f"table.py: {r['key']}: {r['error']}", file=sys.stderr)
    return status or (1 if errors else 0)


if __name__ == "__main__":
    sys.exit(main())
