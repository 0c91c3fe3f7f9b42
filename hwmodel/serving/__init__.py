"""System B: a multi-request GPU-prefill / FPGA-decode serving cluster (GLITCHES-style), discrete-event on SimPy.

Public API: :func:`load_cluster` / :func:`resolve_cluster` (cluster TOML specs), :func:`simulate` (a run),
:func:`compute_metrics` (throughput, TTFT/TPOT, goodput, energy, cost efficiency, utilization), the schedulers
(:data:`SCHEDULERS`, one file each in schedulers/) and :class:`Slo`.

The names are imported on first use (PEP 562): importing a light submodule (``hwmodel.serving.cluster``, which
the CLI's option definitions read) then costs no simulator import (Numba, SimPy), about 0.9 s of every
``hwmodel`` command's start-up.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hwmodel.serving.cluster import (
        ClusterSpec,
        ResolvedCluster,
        builtin_cluster_names,
        load_cluster,
        resolve_cluster,
    )
    from hwmodel.serving.schedulers import SCHEDULERS, Slo, make_scheduler
    from hwmodel.serving.simulator import SimResult, Simulation, simulate

#: public name -> the submodule that defines it
_LAZY = {
    "ClusterSpec": "cluster",
    "ResolvedCluster": "cluster",
    "builtin_cluster_names": "cluster",
    "load_cluster": "cluster",
    "resolve_cluster": "cluster",
    "SCHEDULERS": "schedulers",
    "Slo": "schedulers",
    "make_scheduler": "schedulers",
    "SimResult": "simulator",
    "Simulation": "simulator",
    "simulate": "simulator",
}

__all__ = [
    "SCHEDULERS",
    "ClusterSpec",
    "ResolvedCluster",
    "SimResult",
    "Simulation",
    "Slo",
    "builtin_cluster_names",
    "load_cluster",
    "make_scheduler",
    "resolve_cluster",
    "simulate",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value
