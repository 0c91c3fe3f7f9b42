"""A calibration family's report goes through the one runner (calibration.family.report_family): the same rows as
the direct evaluation, for the registered family (found by name) and for another family object."""

from __future__ import annotations

import dataclasses

from calibration.family import get_family, report_family
from calibration.measurements import load_measurements
from calibration.params import load_values
from calibration.report import build_report


def test_report_through_the_runner_is_the_direct_report() -> None:
    fam = get_family("fpga-power")
    values = fam.as_deployed(load_values(fam.params_path))
    direct = build_report(load_measurements(fam.measurements_path), lambda pt: fam.predict(values, pt), fam.conditions)
    assert report_family(fam) == direct
    assert report_family(dataclasses.replace(fam, rank=fam.rank)) == direct  # not the registered object
