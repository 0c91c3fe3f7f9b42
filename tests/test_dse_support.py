"""A small analytic evaluator for the DSE tests (a toy decode accelerator), loaded by specs as
``<this file>:TOY``. Not a model of anything real: it only needs metrics that trade off against each other.

Extra parameters drive failure tests: ``sleep_s`` slows each point, ``kill_marker`` makes the worker process
SIGKILL itself once (at ``kill_lanes``; the marker file records that it already happened), ``invalid_lanes``
makes the evaluator refuse a point (HwmodelError) and ``crash_lanes`` makes it raise a bug (ValueError).
``gate_file`` holds every point at ``gate_lanes`` until that file exists: an event the interruption tests set
themselves, so a sweep provably cannot finish before they interrupt it, however loaded the machine is.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from hwmodel.dse.evaluators import Evaluator, Metric, Param, Screen
from hwmodel.errors import HwmodelError

TOY_FILE = Path(__file__).resolve()
TOY_REF = f"{TOY_FILE}:TOY"
DSP = 9024
LUT = 1_300_000


def _resources(p: dict) -> tuple[float, float]:
    macs_per_dsp = {4: 4, 8: 2, 16: 0.5}[p["bits"]]
    dsp = p["lanes"] * 64 / macs_per_dsp
    lut = p["lanes"] * 3000 + p["ports"] * 6000
    return dsp / DSP, lut / LUT


def _screen(p: dict) -> Screen:
    dsp_util, lut_util = _resources(p)
    floor_s = 1e9 * p["bits"] / 8 / (p["ports"] * 14.4e9)
    return Screen(exact={"dsp_util": dsp_util, "lut_util": lut_util}, bounds={"latency_s": (floor_s, float("inf"))})


def _evaluate(p: dict) -> dict[str, float]:
    if p["gate_file"] and p["lanes"] == p["gate_lanes"]:
        gate = Path(p["gate_file"])
        while not gate.exists():  # the worker waits for the test's event (it is killed if the sweep is stopped)
            time.sleep(0.005)
    if p["sleep_s"] > 0:
        time.sleep(p["sleep_s"])
    if p["kill_marker"] and p["lanes"] == p["kill_lanes"]:
        marker = Path(p["kill_marker"])
        if not marker.exists():
            marker.write_text("killed once\n")
            os.kill(os.getpid(), signal.SIGKILL)
    if p["lanes"] == p["invalid_lanes"]:
        raise HwmodelError(f"lanes = {p['lanes']} is not a legal design")
    if p["lanes"] == p["crash_lanes"]:
        raise ValueError("toy evaluator bug")
    f_hz = p["clock_mhz"] * 1e6
    bytes_ = 1e9 * p["bits"] / 8
    bw = p["ports"] * min(14.4e9, 64 * f_hz)
    compute = p["lanes"] * 64 * f_hz
    latency = max(bytes_ / bw, 1e9 / compute) + 2e-4
    dsp_util, lut_util = _resources(p)
    power = 20 + 40 * dsp_util * f_hz / 300e6 + 0.5 * p["ports"]
    return {
        "latency_s": latency,
        "tokens_per_s": 1 / latency,
        "energy_per_token_j": power * latency,
        "dsp_util": dsp_util,
        "lut_util": lut_util,
        "power_w": power,
    }


TOY = Evaluator(
    name="toy",
    version="1",
    doc="toy decode accelerator for tests",
    params=(
        Param("lanes", int, low=1),
        Param("ports", int, low=1, high=32),
        Param("clock_mhz", float, low=50, high=500),
        Param("bits", int, choices=(4, 8, 16), default=8),
        Param("sleep_s", float, default=0.0),
        Param("kill_marker", str, default=""),
        Param("kill_lanes", int, default=-1),
        Param("invalid_lanes", int, default=-1),
        Param("crash_lanes", int, default=-1),
        Param("gate_file", str, default=""),
        Param("gate_lanes", int, default=-1),
    ),
    metrics=(
        Metric("latency_s", "s", low=0.0),
        Metric("tokens_per_s", "1/s", low=0.0),
        Metric("energy_per_token_j", "J", low=0.0),
        Metric("dsp_util", low=0.0),
        Metric("lut_util", low=0.0),
        Metric("power_w", "W", low=0.0),
    ),
    evaluate=_evaluate,
    screen=_screen,
    constraints={"dsp_util": (None, 1.0), "lut_util": (None, 1.0)},
)


# ---- an evaluator with parameters named after the parts of a design (like `<engine>.lanes`)
ENGINES = {"a": ("x", "y"), "b": ("x",)}
ENGINES_REF = f"{TOY_FILE}:TOY_ENGINES"


def _engine_param(name: str) -> Param | None:
    engine, _, field = name.partition(".")
    if field in ("lanes", "ports") and engine:
        return Param(name, int, low=1)
    return None


def _engine_space(values: dict) -> list[tuple[str, str]]:
    problems = []
    for name in values:
        engine, _, field = name.partition(".")
        if field:
            for design in values.get("design", ("a",)):
                if engine not in ENGINES[design]:
                    problems.append((name, f"an engine of design '{design}' ({', '.join(ENGINES[design])})"))
    return problems


def _engine_eval(p: dict) -> dict[str, float]:
    lanes = sum(v for k, v in p.items() if k.endswith(".lanes"))
    return {"latency_s": 1.0 / max(lanes, 1), "area": float(lanes)}


TOY_ENGINES = Evaluator(
    name="toy-engines",
    version="1",
    doc="parameters named after engines",
    params=(Param("design", str, choices=("a", "b"), default="a"),),
    metrics=(Metric("latency_s", "s", low=0.0), Metric("area", low=0.0)),
    evaluate=_engine_eval,
    extra_param=_engine_param,
    check_space=_engine_space,
)


def spec_file(tmp_path: Path, params: str, constraints: str = "", name: str = "spec.toml", extra: str = "") -> Path:
    """A sweep spec over the toy evaluator with three objectives (latency, energy, DSP use)."""
    path = tmp_path / name
    path.write_text(
        f'[sweep]\nname = "t"\nevaluator = "{TOY_REF}"\n{extra}\n[parameters]\n{params}\n'
        '[objectives]\nlatency_s = "min"\nenergy_per_token_j = "min"\ndsp_util = "min"\n'
        f"[constraints]\n{constraints}\n"
    )
    return path
