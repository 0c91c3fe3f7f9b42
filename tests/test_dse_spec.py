"""Sweep specs: every problem is refused with a one-line message naming the field, before any work starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwmodel.cli import main
from hwmodel.dse import load_plan
from hwmodel.errors import HwmodelError, SpecError
from tests.test_dse_support import TOY_REF

ROOT = Path(__file__).resolve().parent.parent

GOOD_PARAMS = """
[parameters]
lanes = [16, 32, 64]
ports = { min = 8, max = 32, step = 8 }
clock_mhz = [200, 300]
"""
GOOD_OBJECTIVES = """
[objectives]
latency_s = "min"
energy_per_token_j = "min"
"""


def write_spec(
    tmp_path: Path, body: str, *, params: str = GOOD_PARAMS, objectives: str = GOOD_OBJECTIVES, sweep: str = ""
) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(f'[sweep]\nevaluator = "{TOY_REF}"\n{sweep}\n{params}\n{objectives}\n{body}\n')
    return path


def test_good_spec_plans_points_with_defaults_and_stable_ids(tmp_path: Path) -> None:
    plan = load_plan(write_spec(tmp_path, ""))
    assert len(plan.points) == 3 * 4 * 2
    assert plan.points[0].params == {
        "lanes": 16,
        "ports": 8,
        "clock_mhz": 200.0,
        "bits": 8,
        "sleep_s": 0.0,
        "kill_marker": "",
        "kill_lanes": -1,
        "invalid_lanes": -1,
        "crash_lanes": -1,
        "gate_file": "",
        "gate_lanes": -1,
    }
    assert isinstance(plan.points[0].params["clock_mhz"], float)  # coerced to the parameter's type
    assert len({p.id for p in plan.points}) == len(plan.points)
    assert [p.id for p in load_plan(write_spec(tmp_path, "")).points] == [p.id for p in plan.points]
    assert plan.fronts == (("latency_s", "energy_per_token_j"),)
    assert plan.constraints == {"dsp_util": (None, 1.0), "lut_util": (None, 1.0)}


@pytest.mark.parametrize(
    "kwargs, field, message",
    [
        (
            dict(params=GOOD_PARAMS + "lanes_per_engine = [1]\n"),
            "parameters.lanes_per_engine",
            "a parameter of evaluator 'toy' (did you mean 'lanes'? known: lanes, ports",
        ),
        (dict(params=GOOD_PARAMS.replace("[16, 32, 64]", "[]")), "parameters.lanes", "this range is empty"),
        (dict(params=GOOD_PARAMS.replace("max = 32", "max = 4")), "parameters.ports", "this range is empty"),
        (dict(params=GOOD_PARAMS + "bits = [4, 5]\n"), "parameters.bits[1]", "expected one of 4, 8, 16, got 5"),
        (dict(params=GOOD_PARAMS.replace("[200, 300]", "[200, 900]")), "parameters.clock_mhz[1]", "at most 500"),
        (dict(params=GOOD_PARAMS.replace("[16, 32, 64]", "[16.5]")), "parameters.lanes", "an integer, got 16.5"),
        (
            dict(params="[parameters]\nlanes = [1]\nclock_mhz = [200]\n"),
            "parameters.ports",
            "a value for required parameter 'ports'",
        ),
        (
            dict(params=GOOD_PARAMS.replace("[200, 300]", "{ min = 200, max = 300 }")),
            "parameters.clock_mhz",
            'a continuous range needs sampling = "random" or "lhs"',
        ),
        (dict(sweep='sampling = "lhs"'), "sweep.samples", "a positive number of points to draw"),
        (dict(sweep="max_points = 10"), "parameters", "at most sweep.max_points = 10 points (this one has 24"),
        (dict(objectives='[objectives]\nlatency = "min"\n'), "objectives.latency", "did you mean 'latency_s'?"),
        (dict(objectives='[objectives]\nlatency_s = "lowest"\n'), "objectives.latency_s", '"min" or "max"'),
        (dict(objectives=""), "objectives", "a non-empty table"),
        (
            dict(body="[constraints]\nlut_utilisation = { max = 0.5 }\n"),
            "constraints.lut_utilisation",
            "did you mean 'lut_util'?",
        ),
        (
            dict(body="[constraints]\nlut_util = { min = 0.6, max = 0.5 }\n"),
            "constraints.lut_util",
            "min 0.6 > max 0.5: no value can satisfy it",
        ),
        (
            dict(body="[constraints]\nlut_util = { min = 1.5 }\n"),
            "constraints.lut_util",
            "together they leave no value",
        ),
        (
            dict(body="[constraints]\nlatency_s = { max = -1.0 }\n"),
            "constraints.latency_s",
            "it takes values in [0, inf], s; latency_s <= -1 is infeasible",
        ),
        (
            dict(body="[constraints]\nlut_util = { max = 0.001 }\n"),
            "constraints.lut_util",
            "lut_util <= 0.001 fails at all 24 points (closest value 0.07385), before any simulation",
        ),
        (
            dict(body="[constraints]\nlatency_s = { max = 1e-5 }\n"),
            "constraints.latency_s",
            "latency_s <= 1e-05 fails at all 24 points",
        ),
        (
            dict(body="[constraints]\nlut_util = { max = 0.1 }\ndsp_util = { min = 0.1 }\n"),
            "constraints",
            "together they exclude all 24 points (0.1 <= dsp_util <= 1 excludes 8, lut_util <= 0.1 excludes 22)",
        ),
        (dict(body="[constraints]\nlut_util = { below = 0.2 }\n"), "constraints.lut_util.below", "a known field name"),
        (dict(body='[report]\nfronts = [["latency_s"]]\n'), "report.fronts[0]", "2 or 3 different objectives"),
        (
            dict(body='[report]\nfronts = [["latency_s", "power_w"]]\n'),
            "report.fronts[0]",
            "objectives listed in [objectives]",
        ),
        (dict(body='[report]\ncolor_by = "dsp"\n'), "report.color_by", "did you mean 'dsp_util'?"),
        (dict(body="[sweeps]\n"), "sweeps", "did you mean 'sweep'?"),
    ],
)
def test_bad_specs_are_refused_before_any_work(tmp_path: Path, kwargs: dict, field: str, message: str) -> None:
    spec = write_spec(tmp_path, kwargs.pop("body", ""), **kwargs)
    with pytest.raises(SpecError) as exc:
        load_plan(spec)
    text = str(exc.value)
    assert f"spec.toml: field '{field}'" in text and message in text, text
    assert "\n" not in text
    # the same through the CLI: exit 2, one line, no traceback, nothing written
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(out)])
    assert r.exit_code == 2 and r.output.startswith("Error: ") and "Traceback" not in r.output, r.output
    assert not out.exists()


def test_unknown_evaluator_lists_choices(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('[sweep]\nevaluator = "streeming"\n[parameters]\n[objectives]\nlatency_s = "min"\n')
    with pytest.raises(HwmodelError, match="unknown evaluator 'streeming'; valid choices: .*streaming-decode"):
        load_plan(spec)
    spec.write_text('[sweep]\nevaluator = "missing.py:EV"\n[parameters]\n[objectives]\nlatency_s = "min"\n')
    with pytest.raises(HwmodelError, match="missing.py does not exist"):
        load_plan(spec)


def test_builtin_evaluators_resolve_from_their_own_module() -> None:
    import subprocess
    import sys

    from hwmodel.dse.evaluators import BUILTIN_MODULES, EVALUATORS, resolve

    builtins = {n: ev for n, ev in EVALUATORS.items() if ev.evaluate.__module__.startswith("hwmodel.dse.")}
    assert set(BUILTIN_MODULES) == set(builtins)  # the table names every built-in and nothing else
    for name, module in BUILTIN_MODULES.items():
        assert resolve(name) is builtins[name] and builtins[name].evaluate.__module__ == module
    code = (
        "import sys; from hwmodel.dse.evaluators import resolve; resolve('streaming-decode'); "
        "print(sorted(m for m in ('hwmodel.dse.replay_eval', 'hwmodel.reasoning.system') if m in sys.modules))"
    )
    env = {k: v for k, v in os.environ.items() if k != "HWMODEL_PLUGINS"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env, cwd=ROOT)
    assert out.stdout.strip() == "[]"  # naming the streaming evaluator imports neither the replay nor system A


def test_screen_drops_only_hopeless_points(tmp_path: Path) -> None:
    plan = load_plan(write_spec(tmp_path, "[constraints]\nlut_util = { max = 0.15 }\n"))
    for pt in plan.points:
        lut = (pt.params["lanes"] * 3000 + pt.params["ports"] * 6000) / 1_300_000
        assert (pt.id in plan.screened_out) == (lut > 0.15)
    assert 0 < len(plan.screened_out) < len(plan.points)


def test_dry_run_json_reports_plan(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "[constraints]\nlut_util = { max = 0.15 }\n")
    r = CliRunner().invoke(main, ["sweep", str(spec), "--out", str(tmp_path / "o"), "--dry-run", "--json"])
    assert r.exit_code == 0, r.output
    info = json.loads(r.stdout)
    assert info["points"] == 24 and info["to_evaluate"] + info["screened_out"] == 24
    assert info["constraints"] == ["dsp_util <= 1", "lut_util <= 0.15"]
    assert not (tmp_path / "o").exists()


def test_parameters_named_after_design_parts(tmp_path: Path) -> None:
    from tests.test_dse_support import ENGINES_REF

    spec = tmp_path / "e.toml"
    head = f'[sweep]\nevaluator = "{ENGINES_REF}"\n[objectives]\nlatency_s = "min"\narea = "min"\n'
    # a nested table and a quoted dotted key are the same thing
    spec.write_text(head + '[parameters]\ndesign = "a"\n"y.lanes" = [1, 2]\n[parameters.x]\nlanes = [4, 8]\n')
    plan = load_plan(spec)
    assert [p.params for p in plan.points][:2] == [
        {"design": "a", "y.lanes": 1, "x.lanes": 4},
        {"design": "a", "y.lanes": 1, "x.lanes": 8},
    ]
    spec.write_text(head + '[parameters]\ndesign = ["a", "b"]\n[parameters.y]\nlanes = [4]\n')
    with pytest.raises(SpecError, match=r"field 'parameters.y.lanes': expected an engine of design 'b' \(x\)"):
        load_plan(spec)
    spec.write_text(head + "[parameters]\n[parameters.x]\nlane = [4]\n")
    with pytest.raises(SpecError, match=r"field 'parameters.x.lane': expected a parameter of evaluator 'toy-engines'"):
        load_plan(spec)
    spec.write_text(head + "[parameters]\n[parameters.x]\nlanes = [0]\n")
    with pytest.raises(SpecError, match=r"field 'parameters.x.lanes': expected at least 1, got 0"):
        load_plan(spec)
