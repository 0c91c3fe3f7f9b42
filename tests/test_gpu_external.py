"""Out-of-source GPU validation rows (hwmodel/validate/gpu_external.py): produced, labelled predicted, never fitted."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.gpu import FAMILY
from calibration.measurements import MeasurementError, load_measurements
from hwmodel.validate import gpu_external
from hwmodel.validate.providers import REGISTRY


@pytest.mark.slow  # --quick leaves it out (docs/testing.md)
def test_rows_are_produced_predicted_with_the_family_free_parameters() -> None:
    rows = gpu_external.rows()
    points = load_measurements(gpu_external.MEASUREMENTS)
    assert len(rows) == len(points) >= 1
    for r in rows:
        assert r["area"] == gpu_external.AREA and r["role"] == "predicted"
        assert r["free_params"] == FAMILY.free_params and r["family"] == "gpu"
        assert r["model"] > 0 and r["published"] > 0 and "http" in r["source"]
    # wired into `hwmodel validate`: its area has its own mean and max error in the summary
    assert REGISTRY.get("hwmodel.validate.gpu_external").area_module


def _csv(tmp_path: Path, role: str, quantity: str = "batch_speedup", unit: str = "x") -> Path:
    p = tmp_path / "ext.csv"
    p.write_text(
        "id,subject,quantity,value,unit,role,source,notes,llm,framework,weight_bits,kv_bits,input_tokens,"
        "output_tokens,batch,decoding\n"
        f"x,a100-80gb,{quantity},2,{unit},{role},a page,,qwen2.5-0.5b,vllm,16,16,64,8,2,greedy\n"
    )
    return p


def test_an_out_of_source_point_is_never_fitted(tmp_path: Path) -> None:
    with pytest.raises(MeasurementError, match="never fitted"):
        gpu_external.rows(_csv(tmp_path, "fitted"))


def test_a_small_point_is_predicted_and_bad_quantities_are_one_line_errors(tmp_path: Path) -> None:
    (r,) = gpu_external.rows(_csv(tmp_path, "predicted"))
    assert 1.0 < r["model"] <= 2.0  # two requests at once: faster than one, never more than twice
    with pytest.raises(MeasurementError, match="column 'quantity'"):
        gpu_external.rows(_csv(tmp_path, "predicted", "latency"))
    with pytest.raises(MeasurementError, match="column 'unit'"):
        gpu_external.rows(_csv(tmp_path, "predicted", "batch_speedup", "s"))
    assert gpu_external.rows(tmp_path / "absent.csv") == []
