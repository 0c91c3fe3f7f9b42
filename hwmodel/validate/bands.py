"""The band of a predicted value: how far it moves with what the model does not know.

Two sources are propagated to an interval on every predicted value of a calibration family (and on any value
computed from one family's parameters, e.g. FlexLLM's FPGA/A100 ratio):

(a) **fitted parameters' uncertainty** -- the linearised least-squares covariance
    ``C = (J^T J / sigma^2 + diag(1 / prior^2))^-1``, with ``J`` the relative sensitivities of the fitted points to
    the least-squares parameters (finite differences at the committed values), ``sigma`` =
    :data:`MEASUREMENT_SIGMA` the relative 1-sigma uncertainty of a published figure [estimate: run-to-run spread
    of public latency benchmarks, a few per cent], and ``prior`` a quarter of each parameter's declared range (so a
    parameter no fitted point constrains is as uncertain as its bounds say, not silently exact). A value with
    sensitivity ``g`` gets ``sd = sqrt(g C g^T)`` and the interval ``value x exp(+-Z sd)`` (:data:`Z`: 95 %);
(b) **host-dependent parameters over the measured hosts** -- a parameter that belongs to one measured host
    (:data:`HOST_GROUPS`: the eager-issue cost of the default x86 server and of the Qwen benchmark server) is also
    evaluated at every other measured host's fitted value, and the band is widened to cover those values.

(c) **fixed ``[estimate]`` values** a value depends on (:data:`ESTIMATES`: the GPU family's per-sequence vLLM host
    cost, halved and doubled): each end evaluated one at a time, and its worst deviation down and up added to the
    band (all together, linearised in log space).

Not propagated here, and said so in the row's ``band_sources``: values a family *chose* outside least squares
(``choices``) and the GPU specs' ``[estimate]`` fields (measured bandwidth, idle power, price: none enters a
latency). The rows of system A, system B and the HBM model get their bands by reruns instead
(:mod:`hwmodel.validate.perturb`).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

MEASUREMENT_SIGMA = 0.03  # [estimate] relative 1-sigma uncertainty of one published latency/throughput figure
Z = 1.96  # two-sided 95 % of a normal
PROBE_STEP = 0.02  # relative parameter step of the finite differences (as calibration.cv)
#: parameters fitted per measured host: each is also evaluated at the others' values (source (b))
HOST_GROUPS: tuple[tuple[str, ...], ...] = (("c_op_host_s", "c_op_host_qwen_s"),)
#: fixed [estimate] values varied (source (c)): name -> (low, high) as multiples of the value (halve / double, the
#: rule of hwmodel.studies.sensitivity.field_range)
ESTIMATES: dict[str, tuple[float, float]] = {"c_seq_vllm_s": (0.5, 2.0)}

Fn = Callable[[Mapping[str, float]], float]


def _step(par: Any, v: float) -> float:
    h = PROBE_STEP * max(abs(v), 0.05 * (par.upper - par.lower))
    return h if v + h <= par.upper else -h


def gradient(fn: Fn, params: Sequence[Any], values: Mapping[str, float]) -> np.ndarray:
    """d ln(fn) / d p for every least-squares parameter (one-sided finite differences inside the bounds)."""
    base = fn(values)
    g = np.zeros(len(params))
    for i, par in enumerate(params):
        h = _step(par, values[par.name])
        g[i] = (math.log(fn({**values, par.name: values[par.name] + h})) - math.log(base)) / h
    return g


def covariance(fam: Any, fitted: Sequence[Any], values: Mapping[str, float]) -> np.ndarray:
    """The linearised covariance of ``fam``'s least-squares parameters (module docstring, source (a))."""
    params = fam.params
    jac = np.array([gradient(lambda v, p=pt: fam.predict(v, p), params, values) for pt in fitted])
    prior = np.array([(p.upper - p.lower) / 4.0 for p in params])
    fisher = jac.T @ jac / MEASUREMENT_SIGMA**2 + np.diag(1.0 / prior**2)
    return np.linalg.inv(fisher)


@functools.lru_cache(maxsize=8)
def committed_covariance(family: str) -> tuple[Any, dict[str, float], np.ndarray]:
    """(family, its committed parameter values, their covariance) -- computed once per process (every banded
    provider of one ``hwmodel validate`` run shares it)."""
    from calibration.family import get_family
    from calibration.measurements import load_measurements
    from calibration.params import load_values

    fam = get_family(family)
    values = load_values(fam.params_path)
    return fam, values, covariance(fam, [p for p in load_measurements(fam.measurements_path) if p.fitted], values)


def band(fn: Fn, params: Sequence[Any], values: Mapping[str, float], cov: np.ndarray) -> tuple[list[float], str]:
    """([lo, hi], what it covers) of ``fn`` at ``values``: sources (a) and (b) of the module docstring."""
    y = fn(values)
    g = gradient(fn, params, values)
    sd = float(math.sqrt(max(g @ cov @ g, 0.0)))
    lo, hi = y * math.exp(-Z * sd), y * math.exp(Z * sd)
    hosts = []
    for group in HOST_GROUPS:
        for name in group:
            if name not in values or abs(g[[p.name for p in params].index(name)]) < 1e-12:
                continue
            for other in group:
                if other != name and other in values:
                    swapped = fn({**values, name: values[other]})
                    lo, hi = min(lo, swapped), max(hi, swapped)
                    hosts.append(f"{name} at {other}'s value gives {swapped:.4g}")
    what = f"fitted-parameter covariance (sigma {MEASUREMENT_SIGMA:.0%} per published point, 95 %)"
    if hosts:
        what += "; measured hosts: " + ", ".join(hosts)
    down = up = 0.0
    moved = []
    for name, (f_lo, f_hi) in ESTIMATES.items():
        if name not in values:
            continue
        ends = [math.log(fn({**values, name: values[name] * f}) / y) for f in (f_lo, f_hi)]
        down, up = down + min(0.0, *ends), up + max(0.0, *ends)
        if max(map(abs, ends)) > 1e-9:
            moved.append(f"{name} x{f_lo:g}..x{f_hi:g} moves it {100 * min(ends):+.2f} / {100 * max(ends):+.2f} %")
    lo, hi = lo * math.exp(down), hi * math.exp(up)
    what += "; [estimate] " + (", ".join(moved) if moved else ", ".join(ESTIMATES) + " (no effect here)")
    return [lo, hi], what + "; chosen values and GPU-spec [estimate] fields (none enters a latency) not varied"


def family_bands(fam: Any, points: Sequence[Any], values: Mapping[str, float]) -> dict[str, tuple[list[float], str]]:
    """The band of every predicted point of ``fam`` (point id -> ([lo, hi], sources))."""
    fitted = [p for p in points if p.fitted]
    cov = covariance(fam, fitted, values)
    return {
        p.id: band(lambda v, pt=p: fam.predict(v, pt), fam.params, values, cov) for p in points if p.role == "predicted"
    }
