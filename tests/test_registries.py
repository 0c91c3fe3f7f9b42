"""One registry mechanism for every extension kind (:mod:`hwmodel.registry`): a DSE evaluator, a calibration
family and a validation provider each added by one temporary file, found the same way as the built-ins; and no
literal table of them is left in the code."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from hwmodel.registry import Registry, load_plugin

ROOT = Path(__file__).resolve().parents[1]


def test_an_evaluator_is_one_new_file(tmp_path: Path) -> None:
    from hwmodel.dse import evaluators
    from hwmodel.dse.spec import load_plan

    f = tmp_path / "affine_eval.py"
    f.write_text(
        textwrap.dedent("""
        from hwmodel.dse.evaluators import Evaluator, Metric, Param, register

        EVALUATOR = register(Evaluator(
            name="test-affine", version="1", doc="latency = 1 / lanes (a test evaluator)",
            params=(Param("lanes", int, low=1, high=64),), metrics=(Metric("latency_s", "s", low=0.0),),
            evaluate=lambda p: {"latency_s": 1.0 / p["lanes"]}))
    """)
    )
    load_plugin(f)
    try:
        assert "test-affine" in evaluators.names() and "streaming-decode" in evaluators.names()
        by_name = evaluators.resolve(evaluators.canonical_ref("test-affine"))
        assert by_name.run({"lanes": 4}) == {"latency_s": 0.25}
        # the same file named as `file.py:ATTRIBUTE` in a spec is loaded once, the same way (load_plugin)
        assert evaluators.resolve(evaluators.canonical_ref(f"{f}:EVALUATOR")) is by_name
        spec = tmp_path / "spec.toml"
        spec.write_text(
            '[sweep]\nname = "t"\nevaluator = "test-affine"\n[parameters]\nlanes = [1, 2, 4]\n'
            '[objectives]\nlatency_s = "min"\n'
        )
        plan = load_plan(spec)
        assert plan.evaluator is by_name and [p.params["lanes"] for p in plan.points] == [1, 2, 4]
        spec.write_text(spec.read_text().replace("lanes = [1, 2, 4]", "lanes = [0, 2]"))
        with pytest.raises(Exception, match="lanes"):
            load_plan(spec)
    finally:
        evaluators.EVALUATORS.unregister("test-affine")


def test_a_calibration_family_is_one_new_file(tmp_path: Path) -> None:
    from calibration import family
    from calibration.measurements import load_measurements

    builtin = family.names()
    assert builtin[:3] == ["gpu", "fpga-instruction", "fpga-power"]  # the report order (rank)
    f = tmp_path / "line_family.py"
    f.write_text(
        textwrap.dedent("""
        from calibration.family import Family, register
        from calibration.fit import Param

        FAMILY = register(Family(
            name="test-line", description="y = a x + b (a test family)",
            params=(Param("a", 1.0, 0.0, 10.0), Param("b", 0.0, -5.0, 5.0)), fixed={}, fixed_docs={},
            conditions=("x",), predict=lambda v, pt: v["a"] * pt.number("x") + v["b"]))
    """)
    )
    load_plugin(f)
    try:
        assert family.names() == builtin + ["test-line"]  # no rank: after the built-ins
        fam = family.get_family("test-line")
        csv = tmp_path / "m.csv"
        csv.write_text(
            "id,subject,quantity,value,unit,role,source,notes,x\n"
            + "".join(f"p{x},dev,y,{3 * x + 2},s,fitted,synthetic,,{x}\n" for x in range(1, 5))
        )
        res = family.fit_family(fam, load_measurements(csv))
        assert res.values["a"] == pytest.approx(3.0, rel=1e-6) and res.values["b"] == pytest.approx(2.0, abs=1e-6)
    finally:
        family.REGISTRY.unregister("test-line")


def test_a_validation_provider_is_one_new_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hwmodel.validate import providers

    f = tmp_path / "my_rows.py"
    f.write_text(
        textwrap.dedent("""
        from hwmodel.validate.providers import Provider, register
        from hwmodel.validate.rows import row

        def rows(settings):
            return [row("GPU", "test decode", 2.0, "s", "predicted", "a test", published=2.5, family="gpu")]

        PROVIDER = register(Provider("test-provider", rows, area_module=True))
    """)
    )
    module = load_plugin(f)
    real = providers.REGISTRY
    try:
        names = providers.REGISTRY.names()
        assert names[-1] == "test-provider" and names.index("calibration gpu") == 0  # built-ins keep their rank
        # run on a registry holding only the new provider (the built-ins replay whole studies)
        only: Registry[providers.Provider] = Registry("validation provider")
        only.register("test-provider", module.PROVIDER)  # type: ignore[attr-defined]
        monkeypatch.setattr(providers, "REGISTRY", only)
        rows, found = providers.contributed_rows(providers.Settings())
        assert found == ["test-provider"]
        assert [(r["name"], r["provider"]) for r in rows] == [("test decode", "test-provider")]
    finally:
        real.unregister("test-provider")


def test_no_literal_tables_of_extensions_remain() -> None:
    pat = re.compile(r"\bFAMILIES: dict|\bCONTRIBUTED =|\b_REGISTRY: dict|BUILTIN_POLICIES")
    hits = [
        f"{p.relative_to(ROOT)}:{i}"
        for d in ("hwmodel", "calibration", "fpga", "gpu")
        for p in sorted((ROOT / d).rglob("*.py"))
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if pat.search(line)
    ]
    assert hits == []
