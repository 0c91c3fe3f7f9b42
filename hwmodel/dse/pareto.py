"""Pareto fronts over two or three objectives (each minimised or maximised) and top-k tables.

Point a *dominates* point b when a is at least as good as b in every objective and strictly better in one. The
front is the set of points no other point dominates; points with equal objective vectors are all kept (neither
dominates the other). Points with a non-finite objective are left out.

Algorithm: turn every objective into one to minimise, sort the points lexicographically, and sweep: a point's
dominators all sort before it, and if some earlier point dominates it then so does a point already on the front
(dominance is transitive), so each point is checked against the front found so far only -- O(n log n + n f k) for
n points, a front of f points and k objectives.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _as_minimised(values: np.ndarray, senses: Sequence[str]) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    if v.ndim != 2 or v.shape[1] != len(senses):
        raise ValueError(f"values must be (n, {len(senses)}), got {v.shape}")
    sign = np.array([1.0 if s == "min" else -1.0 for s in senses])
    if any(s not in ("min", "max") for s in senses):
        raise ValueError(f"senses must be 'min' or 'max', got {list(senses)}")
    return v * sign


def dominates(a: np.ndarray, b: np.ndarray, senses: Sequence[str]) -> bool:
    """True when objective vector ``a`` dominates ``b``."""
    m = _as_minimised(np.vstack([a, b]), senses)
    return bool(np.all(m[0] <= m[1]) and np.any(m[0] < m[1]))


def pareto_front(values: np.ndarray, senses: Sequence[str]) -> np.ndarray:
    """Indices (ascending) of the non-dominated rows of ``values`` (n x k), k objectives with their senses."""
    m = _as_minimised(values, senses)
    finite = np.flatnonzero(np.all(np.isfinite(m), axis=1))
    if finite.size == 0:
        return np.zeros(0, dtype=np.int64)
    sub = m[finite]
    order = np.lexsort(sub.T[::-1])  # first objective primary
    front: list[int] = []
    front_vals = np.empty((0, m.shape[1]))
    for i in order:
        x = sub[i]
        if front_vals.shape[0]:
            le = np.all(front_vals <= x, axis=1)
            lt = np.any(front_vals < x, axis=1)
            if np.any(le & lt):
                continue
        front.append(int(finite[i]))
        front_vals = np.vstack([front_vals, x])
    return np.sort(np.array(front, dtype=np.int64))


def top_k(values: np.ndarray, senses: Sequence[str], k: int) -> np.ndarray:
    """Indices of the best ``k`` rows: by the first objective, ties broken by the next ones, then by row order."""
    m = _as_minimised(values, senses)
    finite = np.flatnonzero(np.all(np.isfinite(m), axis=1))
    sub = m[finite]
    keys = [finite] + [sub[:, j] for j in range(sub.shape[1] - 1, -1, -1)]
    order = np.lexsort(keys)
    return finite[order[:k]]
