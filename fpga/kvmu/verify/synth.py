"""LUT / FF counts of the reference KVMU RTL from yosys (``synth_xilinx -family xcup``, AMD UltraScale+), and the
recorded counts the resource model uses (fpga/data/kvmu_rtl_resources.toml).

The KVMU is a block inside a larger design, so synthesis runs without I/O pads or a clock buffer (``-noiopad
-noclkbuf``). LUTs count every LUT1..LUT6 cell plus every INV cell (yosys emits inverters as INV, which Vivado
implements as a LUT1 or absorbs into a neighbour, so this is an upper bound); FFs count FDRE, FDSE, FDCE and FDPE.
Carry chains (CARRY4 / CARRY8) and wide muxes (MUXF7 / MUXF8) sit beside the LUTs in a CLB and are recorded
separately. Refresh the record after changing fpga/kvmu/rtl/kvmu.v with ``hwmodel kvmu synth --write``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from fpga.kvmu.verify.mutants import REFERENCE_RTL
from hwmodel.errors import HwmodelError

RECORD = Path(__file__).resolve().parents[2] / "data" / "kvmu_rtl_resources.toml"
FAMILY = "xcup"
LUT_CELLS = ("LUT1", "LUT2", "LUT3", "LUT4", "LUT5", "LUT6", "INV")
FF_CELLS = ("FDRE", "FDSE", "FDCE", "FDPE")
OTHER_CELLS = ("CARRY4", "CARRY8", "MUXF7", "MUXF8", "MUXF9", "SRL16E", "SRLC32E", "RAMB18E2", "RAMB36E2", "DSP48E2")


def yosys_script(rtl: Path, top: str, stat_json: Path) -> str:
    return (
        f"read_verilog {rtl}; synth_xilinx -family {FAMILY} -top {top} -flatten -noiopad -noclkbuf; "
        f"tee -q -o {stat_json} stat -json"
    )


def command_text(top: str = "kvmu") -> str:
    """The yosys command as recorded (with the RTL path relative to the repository)."""
    return f"yosys -p '{yosys_script(Path('fpga/kvmu/rtl/kvmu.v'), top, Path('stat.json'))}'"


def rtl_sha256(rtl: Path = REFERENCE_RTL) -> str:
    return hashlib.sha256(Path(rtl).read_bytes()).hexdigest()


def yosys_version() -> str:
    exe = shutil.which("yosys")
    if exe is None:
        raise HwmodelError("kvmu synth needs yosys on PATH: apt-get install yosys")
    out = subprocess.run([exe, "-V"], capture_output=True, text=True, check=True).stdout.strip()
    m = re.search(r"Yosys\s+(\S+)", out)
    return m.group(1) if m else out


def synthesize(rtl: Path = REFERENCE_RTL, top: str = "kvmu") -> dict[str, Any]:
    """Run yosys on ``rtl`` and return {lut, ff, cells: {type: count}, yosys, command, rtl_sha256}."""
    version = yosys_version()
    with tempfile.TemporaryDirectory(prefix="kvmu_synth_") as tmp:
        stat = Path(tmp) / "stat.json"
        proc = subprocess.run(
            ["yosys", "-q", "-p", yosys_script(Path(rtl).resolve(), top, stat)], capture_output=True, text=True
        )
        if proc.returncode != 0 or not stat.is_file():
            lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
            raise HwmodelError(f"{rtl}: yosys synth_xilinx failed: {lines[-1] if lines else 'no output'}")
        data = json.loads(stat.read_text())
    modules = data.get("modules", {})
    mod = modules.get(f"\\{top}") or next(iter(modules.values()))
    cells = {k: int(v) for k, v in mod.get("num_cells_by_type", {}).items()}
    return {
        "lut": sum(cells.get(c, 0) for c in LUT_CELLS),
        "ff": sum(cells.get(c, 0) for c in FF_CELLS),
        "cells": dict(sorted(cells.items())),
        "yosys": version,
        "command": command_text(top),
        "rtl_sha256": rtl_sha256(rtl),
    }


def record_text(result: dict[str, Any]) -> str:
    cells = ", ".join(f"{k} = {v}" for k, v in result["cells"].items())
    src = f"yosys {result['yosys']}: {result['command']}"
    return f"""# LUT / FF counts of the reference KVMU RTL (fpga/kvmu/rtl/kvmu.v), synthesized by yosys for AMD UltraScale+.
# Written by `hwmodel kvmu synth --write` (fpga/kvmu/verify/synth.py); fpga/streaming/resources.py reads it for the KVMU line.
# lut = LUT1..LUT6 + INV cells (an upper bound: Vivado absorbs many inverters); ff = FDRE/FDSE/FDCE/FDPE cells.
rtl = "fpga/kvmu/rtl/kvmu.v"
rtl_sha256 = "{result["rtl_sha256"]}"
family = "{FAMILY}"
lut = {{ value = {result["lut"]}, source = "{src}" }}
ff = {{ value = {result["ff"]}, source = "{src}" }}
yosys = "{result["yosys"]}"
command = "{result["command"]}"
cells = {{ {cells} }}
"""


def write_record(result: dict[str, Any], path: Path = RECORD) -> Path:
    path.write_text(record_text(result))
    return path


def recorded(path: Path = RECORD) -> dict[str, Any]:
    """The recorded counts: {lut, ff, source, yosys, command, rtl_sha256, cells}."""
    with open(path, "rb") as f:
        data = tomllib.load(f)
    return {
        "lut": int(data["lut"]["value"]),
        "ff": int(data["ff"]["value"]),
        "source": data["lut"]["source"],
        "yosys": data["yosys"],
        "command": data["command"],
        "rtl_sha256": data["rtl_sha256"],
        "cells": dict(data["cells"]),
    }
