"""The Python API of system B (:mod:`hwmodel.api`, re-exported as ``hw.*``): request streams, serving runs on a
cluster, offered loads as fractions of the saturation rate."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hwmodel.api.progress import ProgressBar
from hwmodel.errors import HwmodelError
from hwmodel.io import jsonable


@dataclasses.dataclass(frozen=True)
class Serving:
    """A cluster run: the metrics (throughput, TTFT/TPOT percentiles, energy, per-device use) and each request."""

    cluster: str
    scheduler: str
    metrics: Any
    result: Any

    def records(self) -> list[dict[str, Any]]:
        from hwmodel.serving.metrics import request_arrays

        arrays = request_arrays(self.result)
        keys = list(arrays)
        n = len(arrays[keys[0]]) if keys else 0
        return [{k: jsonable(arrays[k][i]) for k in keys} for i in range(n)]

    def to_dict(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "scheduler": self.scheduler, "metrics": jsonable(self.metrics)}


def requests(
    n: int, rate_per_s: float = math.inf, prompt: str = "1536", output: str = "512", seed: int = 0
) -> tuple[Any, ...]:
    """A Poisson request stream; lengths as the CLI writes them (``1536``, ``uniform:A:B``, ``lognormal:M:S:MAX``)."""
    from hwmodel.workload.requests import parse_length, poisson_stream

    return poisson_stream(n, rate_per_s, parse_length(prompt, "prompt"), parse_length(output, "output"), seed)


@dataclasses.dataclass(frozen=True)
class Load:
    """A request rate given as a fraction of the cluster's saturation rate (:func:`load`)."""

    fraction: float


def load(fraction: float) -> Load:
    """``rate_per_s=hw.load(0.8)``: 80 % of the saturation request rate of the cluster and request lengths the
    call serves (:func:`saturation`, computed once per setting)."""
    if not (0 < fraction and math.isfinite(fraction)):
        raise HwmodelError(f"load fraction must be a positive finite number, got {fraction}")
    return Load(float(fraction))


@dataclasses.dataclass(frozen=True)
class Saturation:
    """The most a cluster sustains with every request queued at t = 0 (``request_rate_per_s`` is the rate
    :func:`load` scales). Under an offered load below saturation the measured
    throughput is below ``fraction x throughput_tok_per_s`` too: the window includes the ramp-up and the drain of a
    finite stream (at 80 % load of ``a100+7xu280`` about 0.73x)."""

    cluster: str
    scheduler: str
    requests: int
    prompt: str
    output: str
    request_rate_per_s: float
    throughput_tok_per_s: float

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def saturation(
    cluster: Any = "a100+7xu280",
    *,
    n: int = 200,
    prompt: str = "1536",
    output: str = "512",
    scheduler: str = "fcfs",
    seed: int = 0,
) -> Saturation:
    """The saturation rate of ``cluster`` for these request lengths: ``n`` requests all queued at t = 0."""
    spec = _cluster_spec(cluster)
    key = (repr(spec), n, prompt, output, scheduler, seed)
    if key not in _SATURATION:
        s = serve(spec, n=n, rate_per_s=math.inf, prompt=prompt, output=output, scheduler=scheduler, seed=seed)
        m = s.metrics
        _SATURATION[key] = Saturation(
            spec.name, scheduler, m.requests, prompt, output, m.request_rate_per_s, m.throughput_tok_per_s
        )
    return _SATURATION[key]


_SATURATION: dict[tuple[Any, ...], Saturation] = {}


def _cluster_spec(cluster: Any) -> Any:
    from hwmodel.serving.cluster import load_cluster

    return load_cluster(cluster) if isinstance(cluster, (str, Path)) else cluster


def serve(
    cluster: Any = "a100+7xu280",
    reqs: Sequence[Any] | None = None,
    *,
    n: int = 200,
    rate_per_s: float | Load = math.inf,
    prompt: str = "1536",
    output: str = "512",
    seed: int = 0,
    scheduler: str = "fcfs",
    seeds: int | None = None,
    progress: bool | None = None,
) -> Any:
    """Run a request stream on a built-in cluster, a cluster TOML or a spec from :func:`cluster_spec`
    (``hwmodel serve run``). ``rate_per_s`` is requests/s or ``hw.load(f)`` (a fraction of :func:`saturation`).

    With ``seeds=N`` the stream is generated under seeds ``seed .. seed + N - 1`` and the result is a
    :class:`hwmodel.replicas.Replicas` (``summary["ttft_s.p90"]``: mean and 95 % interval; ``markdown``, ``plot``);
    otherwise a :class:`Serving`. ``progress`` shows a bar per seed (default: in a notebook only)."""
    from hwmodel.serving.cluster import resolve_cluster
    from hwmodel.serving.metrics import compute_metrics
    from hwmodel.serving.simulator import simulate

    spec = _cluster_spec(cluster)
    if isinstance(rate_per_s, Load):
        sat = saturation(spec, n=n, prompt=prompt, output=output, scheduler=scheduler)
        rate_per_s = rate_per_s.fraction * sat.request_rate_per_s
    if seeds is not None:
        from hwmodel.serving.replicas import run_seeds

        if reqs is not None:
            raise HwmodelError("serve(..., seeds=N) generates its streams: pass n/rate_per_s/prompt/output, not reqs")
        rate = float(rate_per_s)
        bar = ProgressBar(progress, seeds, f"serving {seeds} seeds on {spec.name}")
        try:
            return run_seeds(
                resolve_cluster(spec),
                lambda s: requests(n, rate, prompt, output, s),
                seeds,
                seed,
                scheduler,
                on_seed=lambda _s: bar.advance(),
            )
        finally:
            bar.close()
    reqs = tuple(reqs) if reqs is not None else requests(n, rate_per_s, prompt, output, seed)
    res = simulate(resolve_cluster(spec), reqs, scheduler)
    return Serving(spec.name, scheduler, compute_metrics(res), res)
