"""`hwmodel validate`: the rows, their roles and bounds, the guards on every prediction, the README block."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from hwmodel.cli import main
from hwmodel.errors import HwmodelError
from hwmodel.validate import guards, providers, readme
from hwmodel.validate.rows import ROLES, band_position, error, row
from hwmodel.validate.table import Validation, build, markdown, summary, write


@pytest.fixture(scope="module")
def validation() -> Validation:
    opts = guards.load_guards().get("options") or {}
    return build(
        cv=True,
        system_a_limit=opts.get("system_a_limit", 40),
        jobs=1,
        system_b_requests=opts.get("system_b_requests", 1000),
    )


def test_every_area_is_in_the_table_with_roles_and_sources(validation: Validation) -> None:
    areas = {r["area"] for r in validation.rows}
    assert {"GPU", "edge", "HBM", "FPGA instruction", "system A", "system B"} <= areas
    for r in validation.rows:
        assert r["role"] in ROLES and r["source"] and r["unit"]
        assert (r["published"] is None) != (r["band"] is None)
        assert isinstance(r["free_params"], int) and r["families"], r["id"]


def test_the_table_holds_every_row_the_providers_emit_each_with_its_own_id(validation: Validation) -> None:
    assert len(validation.rows) == sum(validation.emitted.values())
    assert len({r["id"] for r in validation.rows}) == len(validation.rows)
    b = [r for r in validation.rows if r["area"] == "system B" and r["name"].endswith("(GLITCHES's best)")]
    assert len({r["workload"] for r in b}) == 2  # the 1,536 + 512 pair and the workload-grid mean, both kept


def test_free_parameters_are_counted_from_the_families(validation: Validation) -> None:
    from hwmodel.validate import dof

    acc = {a["family"]: a["free_params"] for a in validation.accounting}
    for r in validation.rows:
        assert r["free_params"] == dof.free_params(r["families"]), r["id"]
    (flex,) = [r for r in validation.rows if r["name"] == "FlexLLM mem_opt decode rate / A100 HF BF16"]
    # the A100 side is the GPU family; the U280 side runs on the HBM model, whose one fitted parameter counts too
    assert flex["free_params"] == acc["gpu"] + len(dof.family_params()["hbm"])
    cards = [r for r in validation.rows if r["area"] == "system B" and "8 x A100" in r["name"]]
    assert cards and all(r["free_params"] == acc["gpu"] + acc["fpga-instruction"] for r in cards)


def test_a_fitted_value_against_another_figure_is_fitted_and_a_frozen_loo_is_identity(validation: Validation) -> None:
    opt = [r for r in validation.rows if r["name"].startswith("accuracy gain of backtracking with")]
    assert opt and all(r["role"] == "fitted" for r in opt)
    (best,) = [r for r in validation.rows if r["name"] == "glitches-u280-best-ratio" and r["role"] != "fitted"]
    assert best["role"] == "identity"
    assert not any(
        s["role"] == "leave-one-out" and s["area"] == "FPGA instruction" and s["rows"] != 2
        for s in summary(validation.rows)
    )


def test_every_family_prediction_carries_a_band_and_the_report_counts_inside_and_outside(
    validation: Validation,
) -> None:
    banded = [
        r
        for r in validation.rows
        if r["role"] == "predicted" and r["area"] in ("GPU", "edge", "FPGA instruction", "FPGA streaming")
    ]
    assert banded
    for r in banded:
        lo, hi = r["model_band"]
        assert lo < r["model"] < hi and r["band_sources"], r["id"]
    s = next(x for x in summary(validation.rows) if x["area"] == "GPU" and x["role"] == "predicted")
    assert s["published_inside_model_band"] + s["published_outside_model_band"] == s["rows"]
    assert "published inside / outside the model's band" in markdown(validation)


def test_every_prediction_in_the_json_has_a_band_and_the_counts_add_up(validation: Validation) -> None:
    from hwmodel.validate import perturb

    doc = json.loads(json.dumps(validation.as_dict(), default=str))  # what `hwmodel validate --json` prints
    pred = [r for r in doc["rows"] if r["role"] == "predicted"]
    assert pred
    recorded = set((perturb.load() or {"areas": {}})["areas"])
    unrecorded = [a for a in perturb.AREAS if a not in recorded]  # `hwmodel validate --record-bands` not yet run
    for r in pred:
        if r["model_band"] is None and r["area"] in unrecorded:
            continue
        lo, hi = r["model_band"]
        assert lo <= r["model"] * (1 + 1e-12) and r["model"] <= hi * (1 + 1e-12) and r["band_sources"], r["id"]
    for r in doc["rows"]:
        if r["role"] != "predicted" and r["model_band"] is None:
            assert r["band_sources"].startswith("none: "), r["id"]  # said, not left empty
    c = doc["band_counts"]
    waiting = sum(r["model_band"] is None for r in pred)
    assert c["predicted"] == len(pred) and c["without_band"] == waiting
    assert c["inside"] + c["outside"] + waiting == len(pred)
    assert sum(a["predicted"] for a in c["per_area"].values()) == len(pred)
    assert all(a["inside"] + a["outside"] + a["without_band"] == a["predicted"] for a in c["per_area"].values())
    line = f"{c['inside']} / {c['outside']}"
    assert line in markdown(validation) and line in readme.block(validation)
    quick = [r for r in doc["rows"] if r["setting"]]
    assert quick and all(r["full_model"] is not None for r in quick)  # the full study's value beside the quick one
    if waiting:  # only rows of an area whose perturbation bands were never recorded may lack one: said, not hidden
        pytest.skip(
            f"{waiting} predictions of {', '.join(unrecorded)} without a band: run `hwmodel validate --record-bands`"
        )


def test_perturbation_bands_combine_quadrature_and_worst_case_ends() -> None:
    import math

    from hwmodel.validate.perturb import End, Knob, combine, edit_toml_value

    a1 = Knob("a1", "a", (End("+"),))
    a2 = Knob("a2", "a", (End("+"),))
    c = Knob("c", "bc", (End("low"), End("high")))
    screened = Knob("s", "a", (End("+"),), proxy_dev=0.001)
    nominal = {"r": 2.0}
    runs = [(a1, [{"r": 2.0 * math.exp(0.03)}]), (a2, [{"r": 2.0 * math.exp(-0.04)}]), (c, [{"r": 1.9}, {"r": 2.1}])]
    lo, hi = combine(nominal, [*runs, (screened, [])])["r"]
    s = math.sqrt(0.03**2 + 0.04**2 + 0.001**2)
    assert lo == pytest.approx(math.exp(-s + math.log(1.9 / 2.0)))
    assert hi == pytest.approx(math.exp(s + math.log(2.1 / 2.0)))
    text = '[hbm]\nlateral_hop_cycles = { value = 4, source = "x [estimate]" }\n[ddr]\nlateral_hop_cycles = { value = 9 }\n'
    out = edit_toml_value(text, "hbm.lateral_hop_cycles", 8)
    assert "value = 8, source" in out and "value = 9" in out
    with pytest.raises(HwmodelError, match="not found"):
        edit_toml_value(text, "hbm.nothing", 1)


def test_families_show_their_degrees_of_freedom(validation: Validation) -> None:
    acc = {a["family"]: a for a in validation.accounting}
    assert acc["fpga-instruction"]["free_params"] == 4 and acc["fpga-instruction"]["degrees_of_freedom"] == 0
    assert acc["gpu"]["points_fitted"] == acc["gpu"]["free_params"]


def test_hbm_utilization_is_fitted_derived_not_predicted(validation: Validation) -> None:
    (r,) = [r for r in validation.rows if r["name"] == "glitches-u280-hbm-util"]
    assert r["role"] == "fitted-derived"


def test_instruction_family_has_leave_one_out_rows(validation: Validation) -> None:
    loo = {r["name"] for r in validation.rows if r["role"] == "leave-one-out"}
    assert {"glitches-u280-decode", "glitches-u280-prefetch4"} <= loo
    assert "glitches-u280-best-ratio" not in loo  # an identity: it rests on a value chosen on that very point
    assert "glitches-u280-prefill" not in loo  # the only point of mpe.mm_efficiency cannot be left out


def test_no_model_value_and_no_published_value_beats_its_physical_bound(validation: Validation) -> None:
    bounded = [r for r in validation.rows if r["bound"] is not None]
    assert len(bounded) > 30
    for r in bounded:
        for what in ("model", "published"):
            v = r[what]
            if v is None:
                continue
            ok = v >= r["bound"] * (1 - 1e-9) if r["bound_kind"] == "floor" else v <= r["bound"] * (1 + 1e-9)
            assert ok, f"{r['name']}: {what} {v:.4g} beats the {r['bound_kind']} {r['bound']:.4g}"


def test_guards_hold(validation: Validation) -> None:
    bad = guards.violations(validation.rows)
    assert not bad, "predictions worse than their guards:\n" + "\n".join(bad)


def test_a_perturbed_parameter_breaks_the_guards_naming_the_points(tmp_path: Path) -> None:
    from calibration.params import params_path

    doc = json.loads(params_path("gpu").read_text())
    doc["params"]["eta_bw"]["value"] *= 1.08  # 8 % more sustained bandwidth than the fit found
    perturbed = tmp_path / "gpu.json"
    perturbed.write_text(json.dumps(doc))
    rows = providers.gpu_rows(cv=False, params_file=perturbed, with_bands=False)
    for r in rows:
        r["error"] = error(r)
    bad = guards.violations(rows, partial=True)
    assert bad and all("|error|" in b for b in bad)
    assert any(b.startswith("GPU | qwen-a100-vllm-14b-in6144 |") and "| predicted:" in b for b in bad)
    # and the committed parameters pass the same partial check
    ok = providers.gpu_rows(cv=False, with_bands=False)
    for r in ok:
        r["error"] = error(r)
    assert guards.violations(ok, partial=True) == []


def test_guard_limits_and_missing_rows() -> None:
    r = row("GPU", "p", 1.2, "s", "predicted", "src", published=1.0)
    r["error"] = error(r)
    g = {"points": {r["id"]: {"error": 0.2, "reason": ""}, "GPU | q |  |  |  | predicted": 0.1}, "groups": {}}
    assert guards.violations([r], g, partial=True) == []
    assert guards.violations([r], g) == ["GPU | q |  |  |  | predicted: guarded row is missing"]
    r2 = {**r, "model": 1.3}
    r2["error"] = error(r2)
    (msg,) = guards.violations([r2], g, partial=True)
    assert msg.startswith(f"{r['id']}: |error| 30.00 % > guard")


def test_a_guard_grows_only_with_its_reason_beside_it(tmp_path: Path) -> None:
    r = row("GPU", "p", 1.1, "s", "predicted", "src", published=1.0, families=["gpu"])
    r["error"] = error(r)
    path = guards.write_guards([r], {}, path=tmp_path / "g.json", first_reason="new")
    assert guards.load_guards(path)["points"][r["id"]] == {"error": pytest.approx(0.1), "reason": "new"}
    worse = {**r, "model": 1.3}
    worse["error"] = error(worse)
    with pytest.raises(HwmodelError, match="would grow without a reason"):
        guards.write_guards([worse], {}, path=path)
    guards.write_guards([worse], {}, path=path, reasons={r["id"]: "host cost refitted", "GPU|predicted": "same"})
    entry = guards.load_guards(path)["points"][r["id"]]
    assert entry["reason"] == "host cost refitted" and entry["error"] == pytest.approx(0.3)
    better = {**r, "model": 1.05}
    better["error"] = error(better)
    guards.write_guards([better], {}, path=path)  # falling needs no reason and keeps the last one
    assert guards.load_guards(path)["points"][r["id"]]["reason"] == "host cost refitted"


def test_every_committed_guard_above_its_first_value_says_why() -> None:
    for rid, entry in guards.load_guards()["points"].items():
        assert isinstance(entry, dict) and "reason" in entry, rid


def test_rows_with_one_name_and_different_workloads_are_both_kept_and_a_shared_id_is_refused() -> None:
    from hwmodel.validate.table import finish

    a = row("system B", "ratio", 1.2, "x", "predicted", "s", published=1.28, workload="pair", families=["gpu"])
    b = row("system B", "ratio", 1.3, "x", "predicted", "s", published=1.28, workload="grid", families=["gpu"])
    assert len(finish([a, b])) == 2
    with pytest.raises(HwmodelError, match="two rows share the id"):
        finish([a, dict(a)])


def test_readme_lines_carry_every_qualifier(validation: Validation) -> None:
    text = readme.block(validation)
    assert "config1-graphs" in text and "published-like draft at 200 MHz" in text
    assert "published-like draft at 300 MHz projection" in text
    assert text.count("A100 + 7 x U280 vs 8 x A100 throughput, prefetch ratio 4") == 2  # pair and grid mean
    quick = [ln for ln in text.splitlines() if "quick:" in ln]
    assert quick and all("full study" in ln for ln in quick)


def test_readme_block_is_current(validation: Validation) -> None:
    text = readme.README.read_text(encoding="utf-8")
    assert readme.current_block(text) == readme.block(validation), (
        "README.md's table is stale: run `hwmodel validate --readme`"
    )


def test_outputs_are_written(validation: Validation, tmp_path: Path) -> None:
    paths = write(validation, tmp_path)
    assert [p.name for p in paths] == ["validation.md", "validation.csv", "validation.json"]
    doc = json.loads(paths[2].read_text())
    assert len(doc["rows"]) == len(validation.rows) and doc["accounting"]
    assert paths[1].read_text().count("\n") == 1 + len(validation.rows)
    assert "degrees of freedom" in markdown(validation)


def test_band_rows() -> None:
    r = row("system A", "x", 1.4, "x", "predicted", "src", band=[1.25, 1.33])
    assert band_position(r) == "above" and error(r) == pytest.approx(1.4 / 1.33 - 1)
    r = row("system A", "x", 1.3, "x", "predicted", "src", band=[1.25, 1.33])
    assert band_position(r) == "inside" and error(r) == 0.0


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"model": float("nan")}, "field 'model': expected a finite number"),
        ({"role": "guessed"}, "field 'role': expected one of"),
        ({"band": [1.0, 2.0]}, "expected exactly one of 'published'"),
        ({"source": ""}, "field 'source': expected a non-empty string"),
    ],
)
def test_malformed_rows_are_one_line_errors(bad: dict, message: str) -> None:
    from hwmodel.validate.rows import check

    base = {"area": "GPU", "name": "p", "model": 1.0, "published": 1.0, "unit": "s", "role": "predicted", "source": "s"}
    with pytest.raises(HwmodelError, match=message):
        check({**base, **bad})


def test_contributed_rows_are_the_registered_area_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    from hwmodel.registry import Registry

    rows_of = lambda s: [  # noqa: E731
        {
            "area": "FPGA streaming",
            "name": "flexllm decode",
            "model": 100.0,  # noqa: E731
            "published": 90.0,
            "band": None,
            "unit": "tokens/s",
            "role": "predicted",
            "free_params": 1,
            "workload": "w",
            "source": "s",
            "note": "",
        }
    ]
    only: Registry[providers.Provider] = Registry("validation provider")
    only.register(
        "hwmodel.validate.streaming", providers.Provider("hwmodel.validate.streaming", rows_of, area_module=True)
    )
    monkeypatch.setattr(providers, "REGISTRY", only)
    rows, found = providers.contributed_rows(providers.Settings())
    assert "hwmodel.validate.streaming" in found
    assert [r["name"] for r in rows if r["area"] == "FPGA streaming"] == ["flexllm decode"]


def test_validate_help() -> None:
    res = CliRunner().invoke(main, ["validate", "--help"])
    assert res.exit_code == 0 and "--out" in res.output and "--json" in res.output and "--readme" in res.output


def test_engine_tables_are_keyed_by_the_parameter_files_a_band_run_points_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    from types import SimpleNamespace

    from hwmodel.params import PARAMS_DIR
    from hwmodel.serving import devices

    gpu, fpga = SimpleNamespace(cache_key=("gpu",)), SimpleNamespace(cache_key=("instruction",))
    assert devices._params_key(gpu) == "" == devices._params_key(fpga)  # the committed files: the code hash's
    for f in PARAMS_DIR.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    monkeypatch.setenv("HWMODEL_PARAMS_DIR", str(tmp_path))
    g0, f0 = devices._params_key(gpu), devices._params_key(fpga)
    doc = json.loads((tmp_path / "gpu.json").read_text())
    doc["params"]["eta_bw"]["value"] *= 1.01
    (tmp_path / "gpu.json").write_text(json.dumps(doc))
    assert devices._params_key(gpu) != g0 and devices._params_key(fpga) == f0  # only the GPU's tables move
