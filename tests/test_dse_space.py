"""Parameter axes, grids, seeded sampling and the stable identity of design points."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwmodel.dse.space import Axis, grid_points, parse_axis, point_id, sampled_points
from hwmodel.errors import SpecError


@pytest.mark.parametrize(
    "raw, values",
    [
        ([16, 32, 64], (16, 32, 64)),
        ({"values": ["u280", "v80"]}, ("u280", "v80")),
        (300, (300,)),
        ({"min": 200, "max": 400, "step": 50}, (200, 250, 300, 350, 400)),
        ({"min": 0.1, "max": 0.5, "step": 0.1}, (0.1, 0.2, 0.3, 0.4, 0.5)),  # exact decimals, no 0.30000000000000004
        ({"min": 128, "max": 1024, "factor": 2}, (128, 256, 512, 1024)),
        ({"min": 1.0, "max": 100.0, "num": 3, "scale": "log"}, (1.0, 10.0, 100.0)),
        ({"min": 0, "max": 10, "num": 3}, (0, 5, 10)),
    ],
)
def test_axis_forms(raw: object, values: tuple) -> None:
    axis = parse_axis("p", raw, "spec.toml")
    assert axis.values == values  # bit-exact (floats included), not just close
    assert [type(v) for v in axis.values] == [type(v) for v in values]


@pytest.mark.parametrize(
    "raw, message",
    [
        ([], "this range is empty"),
        ({"values": []}, "this range is empty"),
        ({"min": 5, "max": 3, "step": 1}, "this range is empty: min 5 > max 3"),
        ({"min": 1, "max": 3, "step": 0}, "field 'parameters.p.step': expected a positive number"),
        ({"min": 1, "max": 3, "stride": 1}, "field 'parameters.p.stride': expected one of the range keys"),
        ({"min": 1, "step": 1}, "expected a 'max' in the range table"),
        ({"min": 1, "max": 8, "step": 1, "num": 3}, "at most one of step, num, factor"),
        ([1, 1, 2], "without repeated values"),
        ([1, "a"], "values of one type"),
        ({"min": 0, "max": 8, "factor": 2}, "a positive number for a geometric range"),
    ],
)
def test_bad_axes_are_refused(raw: object, message: str) -> None:
    with pytest.raises(SpecError, match=None) as exc:
        parse_axis("p", raw, "spec.toml")
    assert message in str(exc.value)
    assert str(exc.value).startswith("spec.toml: field 'parameters.p")


def test_grid_is_cartesian_last_axis_fastest() -> None:
    axes = [Axis("a", values=(1, 2)), Axis("b", values=("x", "y", "z"))]
    pts = list(grid_points(axes))
    assert len(pts) == 6
    assert pts[:3] == [{"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "z"}]


@pytest.mark.parametrize("sampling", ["random", "lhs"])
def test_sampling_is_seeded_and_stays_in_range(sampling: str) -> None:
    axes = [
        Axis("lanes", values=(8, 16, 32, 64)),
        Axis("clock", low=100.0, high=400.0),
        Axis("n", low=1.0, high=1000.0, integer=True, log=True),
    ]
    a = sampled_points(axes, sampling, 200, seed=7)
    b = sampled_points(axes, sampling, 200, seed=7)
    c = sampled_points(axes, sampling, 200, seed=8)
    assert a == b and a != c
    for p in a:
        assert p["lanes"] in (8, 16, 32, 64) and 100.0 <= p["clock"] <= 400.0
        assert isinstance(p["n"], int) and 1 <= p["n"] <= 1000


def test_lhs_fills_every_stratum() -> None:
    """A Latin hypercube of n points puts exactly one point in each of n equal strata of every axis."""
    n = 50
    pts = sampled_points([Axis("x", low=0.0, high=1.0), Axis("y", low=0.0, high=1.0)], "lhs", n, seed=3)
    for name in ("x", "y"):
        strata = sorted(int(p[name] * n) for p in pts)
        assert strata == list(range(n))


def test_point_id_is_stable_and_canonical() -> None:
    p = {"lanes": 32, "clock_mhz": 300.0, "board": "u280"}
    # the digest is part of the results-file format: a change here breaks resuming old sweeps
    text = '{"evaluator":"toy","params":{"board":"u280","clock_mhz":300.0,"lanes":32},"version":"1"}'
    assert point_id("toy", "1", p) == hashlib.sha256(text.encode()).hexdigest()[:16] == "827bf08130739b04"
    assert point_id("toy", "1", dict(reversed(list(p.items())))) == point_id("toy", "1", p)
    assert point_id("toy", "2", p) != point_id("toy", "1", p)
    assert point_id("toy", "1", {**p, "clock_mhz": 300.0000001}) != point_id("toy", "1", p)


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.one_of(st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5), st.booleans()),
        max_size=6,
    )
)
def test_point_id_depends_only_on_content(params: dict) -> None:
    assert point_id("e", "v", params) == point_id("e", "v", dict(sorted(params.items())))
