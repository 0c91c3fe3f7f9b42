"""Fitted parameter files (``calibration/params/*.json``): written here by the fitter, read by device models through
the neutral :mod:`hwmodel.params` (which this module re-exports, so the fitter and its tests keep their names)."""

from __future__ import annotations

from hwmodel.params import (  # noqa: F401 - re-exported
    PARAMS_DIR,
    ParamsFileError,
    load_values,
    params_path,
    read_params_file,
    write_params_file,
)
