"""Fitted parameters as data: the reader of ``calibration/params/*.json`` that device models use at run time.

Device modules (``gpu/``, ``fpga/``) read their fitted parameters here and never import ``calibration/`` (the fitter
sits beside the studies and writes these files; ARCHITECTURE.md, "The picture in one paragraph"). A file holds,
for one model family (``"gpu"``, ``"fpga-instruction"``...), the fitted parameters with their unit, bounds and
meaning, the fixed (not fitted) constants, and a record of the fit (points used, residuals, the command that
reproduces it). Floats are written with ``repr`` precision, so loading returns exactly what the fit produced.

``HWMODEL_PARAMS_DIR`` points the readers at another directory of parameter files (a re-fit under study).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hwmodel.errors import HwmodelError

#: the committed parameter files (written by ``hwmodel calibrate --fit``)
PARAMS_DIR = Path(__file__).resolve().parent.parent / "calibration" / "params"


class ParamsFileError(HwmodelError):
    """A parameter file is missing, unreadable or lacks a parameter a model needs."""


def params_dir() -> Path:
    """Where parameter files are read from (``HWMODEL_PARAMS_DIR`` or the committed directory)."""
    env = os.environ.get("HWMODEL_PARAMS_DIR")
    return Path(env) if env else PARAMS_DIR


def params_path(model: str) -> Path:
    """The parameter file of model family ``model``."""
    return params_dir() / f"{model}.json"


def read_params_file(path: Path | str) -> dict[str, Any]:
    """The whole JSON document of a parameter file (one-line error when missing or malformed)."""
    path = Path(path)
    from hwmodel.io import errors_as, read_json

    if not path.exists():
        raise ParamsFileError(f"{path}: parameter file not found (run `hwmodel calibrate --fit`)")
    with errors_as(ParamsFileError):
        doc = read_json(path, "parameter file (JSON)")
    if not isinstance(doc, dict) or not isinstance(doc.get("params"), dict):
        raise ParamsFileError(f"{path}: expected a JSON object with a 'params' table")
    return doc


def load_values(path: Path | str) -> dict[str, float]:
    """Fitted and fixed parameter values by name (floats)."""
    doc = read_params_file(path)
    out: dict[str, float] = {}
    for section in ("params", "fixed"):
        for name, entry in doc.get(section, {}).items():
            value = entry.get("value") if isinstance(entry, dict) else None
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise ParamsFileError(f"{path}: {section}.{name}.value: expected a finite number, got {value!r}")
            out[name] = float(value)
    return out


def write_params_file(
    path: Path | str,
    model: str,
    params: Mapping[str, Mapping[str, Any]],
    fixed: Mapping[str, Mapping[str, Any]],
    fit: Mapping[str, Any],
    description: str,
) -> None:
    """Write a parameter file (sorted keys, a trailing newline, so re-fits diff cleanly)."""
    doc = {"model": model, "description": description, "params": dict(params), "fixed": dict(fixed), "fit": dict(fit)}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
