"""System B: a multi-request GPU-prefill / FPGA-decode serving cluster (GLITCHES-style), discrete-event on SimPy.

Public API: :func:`load_cluster` / :func:`resolve_cluster` (cluster TOML specs), :func:`simulate` (a run),
:func:`compute_metrics` (throughput, TTFT/TPOT, goodput, energy, cost efficiency, utilization), the schedulers
(:data:`SCHEDULERS`, one file each in schedulers/) and :class:`Slo`.
"""

from hwmodel.serving.cluster import ClusterSpec, ResolvedCluster, builtin_cluster_names, load_cluster, resolve_cluster
from hwmodel.serving.schedulers import SCHEDULERS, Slo, make_scheduler
from hwmodel.serving.simulator import SimResult, Simulation, simulate

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
