"""Pareto fronts and top-k: properties over random point sets (2 and 3 objectives, min and max)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwmodel.dse.pareto import dominates, pareto_front, top_k

# small integer grids make ties and duplicate points frequent, the cases a front algorithm gets wrong
values_2_3 = st.integers(2, 3).flatmap(
    lambda k: st.tuples(
        st.lists(st.lists(st.integers(0, 6).map(float), min_size=k, max_size=k), min_size=0, max_size=60),
        st.lists(st.sampled_from(["min", "max"]), min_size=k, max_size=k),
    )
)


def _brute_dominated(v: np.ndarray, senses: list[str]) -> np.ndarray:
    return np.array(
        [any(dominates(v[j], v[i], senses) for j in range(len(v)) if j != i) for i in range(len(v))], dtype=bool
    )


@given(values_2_3)
def test_front_is_exactly_the_non_dominated_set(case: tuple[list[list[float]], list[str]]) -> None:
    rows, senses = case
    v = np.array(rows, dtype=float).reshape(len(rows), len(senses))
    front = pareto_front(v, senses)
    dominated = _brute_dominated(v, senses)
    # no front point is dominated by any evaluated point ...
    assert not dominated[front].any()
    # ... and every point off the front is dominated by a point on it
    off = np.setdiff1d(np.arange(len(v)), front)
    assert dominated[off].all()
    for i in off:
        assert any(dominates(v[j], v[i], senses) for j in front)
    assert list(front) == sorted(set(front.tolist()))


@given(values_2_3)
def test_front_does_not_depend_on_point_order(case: tuple[list[list[float]], list[str]]) -> None:
    rows, senses = case
    v = np.array(rows, dtype=float).reshape(len(rows), len(senses))
    perm = np.random.default_rng(len(rows)).permutation(len(rows))
    assert sorted(perm[pareto_front(v[perm], senses)].tolist()) == pareto_front(v, senses).tolist()


def test_front_two_objectives_example_and_nan() -> None:
    # latency (min) vs tokens/s (max): (1, 10) dominates (2, 5); (3, 30) trades off; NaN rows are ignored
    v = np.array([[1.0, 10.0], [2.0, 5.0], [3.0, 30.0], [np.nan, 100.0], [1.0, 10.0]])
    assert pareto_front(v, ["min", "max"]).tolist() == [0, 2, 4]
    assert pareto_front(v, ["max", "min"]).tolist() == [1, 2]


def test_top_k_orders_by_first_objective_then_the_next() -> None:
    v = np.array([[3.0, 1.0], [1.0, 5.0], [1.0, 2.0], [2.0, 0.0], [np.inf, 0.0]])
    assert top_k(v, ["min", "min"], 3).tolist() == [2, 1, 3]
    assert top_k(v, ["max", "min"], 2).tolist() == [0, 3]
    with pytest.raises(ValueError):
        pareto_front(v, ["min"])
