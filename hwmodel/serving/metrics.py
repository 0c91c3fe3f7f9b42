"""Serving metrics from a simulation run: throughput, latency distributions, SLO goodput, energy, cost, utilization.

Definitions (the window is from the first arrival to the last completion):

* throughput: output tokens / window (``throughput_tok_per_s``); prompt + output tokens / window as well;
* TTFT: first token time - arrival (queueing + prefill + logits to host + sampling);
* TPOT: (completion - first token) / (output tokens - 1), for requests with more than one output token;
* SLO goodput: requests meeting both the TTFT and the TPOT SLO, per second of window (DistServe's definition,
  shared/research/workload.md);
* energy: every device's power integrated over the window, idle included (``power_w`` of each phase from the
  engine; an FPGA receiving a KV cache is in the ``transfer`` phase); host CPUs and NICs are not counted;
* cost efficiency: output tokens/s per US dollar of accelerators (``price_usd`` of the GPU and board specs);
* utilization: compute-busy time (prefill + decode) / window, per device.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from operator import attrgetter
from typing import Any

import numpy as np

from hwmodel.engine import Phase
from hwmodel.serving.state import SimResult

PERCENTILES = (50, 90, 99)


@dataclasses.dataclass(frozen=True)
class Dist:
    """Summary of a latency distribution (seconds)."""

    mean: float
    p50: float
    p90: float
    p99: float
    max: float

    @classmethod
    def of(cls, x: np.ndarray) -> Dist:
        if x.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan, math.nan)
        p = np.percentile(x, PERCENTILES)
        return cls(float(x.mean()), float(p[0]), float(p[1]), float(p[2]), float(x.max()))


@dataclasses.dataclass(frozen=True)
class DeviceUse:
    name: str
    role: str  # prefill or decode pool
    model: str
    utilization: float
    prefill_s: float
    decode_s: float
    transfer_s: float
    energy_j: float
    peak_memory_bytes: int
    memory_bytes: int


@dataclasses.dataclass(frozen=True)
class Metrics:
    cluster: str
    scheduler: str
    requests: int
    window_s: float
    output_tokens: int
    prompt_tokens: int
    throughput_tok_per_s: float
    total_throughput_tok_per_s: float
    request_rate_per_s: float
    ttft_s: Dist
    tpot_s: Dist
    e2e_s: Dist
    slo_ttft_s: float
    slo_tpot_s: float
    slo_attainment: float
    goodput_req_per_s: float
    energy_j: float
    energy_per_token_j: float
    cost_usd: float
    tok_per_s_per_usd: float
    decode_tokens_prefill_pool: int
    decode_tokens_decode_pool: int
    kv_migrations: dict[str, int]
    kv_exposed_s: Dist
    devices: tuple[DeviceUse, ...]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def mean_utilization(self) -> dict[str, float]:
        out: dict[str, list[float]] = {}
        for d in self.devices:
            out.setdefault(d.role, []).append(d.utilization)
        return {k: float(np.mean(v)) for k, v in out.items()}


def request_arrays(result: SimResult) -> dict[str, np.ndarray]:
    """Per-request columns (arrival, prompt, output, milestones, devices, path) as numpy arrays."""
    rs = result.requests
    n = len(rs)
    fields = {
        "id": ("id", np.int64),
        "arrival_s": ("arrival_s", float),
        "prompt_tokens": ("prompt_tokens", np.int64),
        "output_tokens": ("output_tokens", np.int64),
        "prefill_device": ("prefill_dev", np.int64),
        "decode_device": ("decode_dev", np.int64),
        "path": ("path_kind", None),
        "t_prefill_start_s": ("t_prefill_start", float),
        "t_prefill_end_s": ("t_prefill_end", float),
        "t_first_token_s": ("t_first_token", float),
        "t_kv_ready_s": ("t_kv_ready", float),
        "t_decode_start_s": ("t_decode_start", float),
        "t_finish_s": ("t_finish", float),
        "decode_steps_prefill_pool": ("steps_prefill_pool", np.int64),
        "decode_steps_decode_pool": ("steps_decode_pool", np.int64),
        "kv_bytes_moved": ("kv_bytes_moved", np.int64),
    }
    return {
        k: np.asarray(list(map(attrgetter(a), rs))) if dt is None else np.fromiter(map(attrgetter(a), rs), dt, n)
        for k, (a, dt) in fields.items()
    }


def compute_metrics(result: SimResult) -> Metrics:
    """All metrics of a run (definitions in the module docstring)."""
    a = request_arrays(result)
    start = float(a["arrival_s"].min())
    window = float(a["t_finish_s"].max()) - start
    out = a["output_tokens"]
    ttft = a["t_first_token_s"] - a["arrival_s"]
    multi = out > 1
    tpot = np.full(len(out), np.nan)
    tpot[multi] = (a["t_finish_s"][multi] - a["t_first_token_s"][multi]) / (out[multi] - 1)
    e2e = a["t_finish_s"] - a["arrival_s"]
    slo = result.slo
    good = (ttft <= slo.ttft_s) & (~multi | (tpot <= slo.tpot_s))
    devices = []
    energy = 0.0
    cost = 0.0
    for d in result.devices:
        m = d.model
        busy = d.phase_s[Phase.PREFILL] + d.phase_s[Phase.DECODE]
        idle = max(0.0, window - busy - d.phase_s[Phase.TRANSFER])
        e = sum(d.phase_s[p] * m.power_w(p) for p in Phase if p is not Phase.IDLE) + idle * m.power_w(Phase.IDLE)
        energy += e
        cost += m.price_usd
        devices.append(
            DeviceUse(
                d.name,
                d.role,
                m.label,
                busy / window if window > 0 else 0.0,
                d.phase_s[Phase.PREFILL],
                d.phase_s[Phase.DECODE],
                d.phase_s[Phase.TRANSFER],
                e,
                d.mem_peak,
                m.memory_bytes,
            )
        )
    tokens = int(out.sum())
    thr = tokens / window if window > 0 else math.inf
    moved = a["path"] != "local"
    exposed = (a["t_kv_ready_s"] - a["t_prefill_end_s"])[moved & (a["path"] != "")]
    return Metrics(
        cluster=result.cluster,
        scheduler=result.scheduler,
        requests=len(out),
        window_s=window,
        output_tokens=tokens,
        prompt_tokens=int(a["prompt_tokens"].sum()),
        throughput_tok_per_s=thr,
        total_throughput_tok_per_s=(tokens + int(a["prompt_tokens"].sum())) / window if window > 0 else math.inf,
        request_rate_per_s=len(out) / window if window > 0 else math.inf,
        ttft_s=Dist.of(ttft),
        tpot_s=Dist.of(tpot[multi]),
        e2e_s=Dist.of(e2e),
        slo_ttft_s=slo.ttft_s,
        slo_tpot_s=slo.tpot_s,
        slo_attainment=float(good.mean()),
        goodput_req_per_s=float(good.sum()) / window if window > 0 else math.inf,
        energy_j=energy,
        energy_per_token_j=energy / tokens,
        cost_usd=cost,
        tok_per_s_per_usd=thr / cost,
        decode_tokens_prefill_pool=int(a["decode_steps_prefill_pool"].sum()),
        decode_tokens_decode_pool=int(a["decode_steps_decode_pool"].sum()),
        kv_migrations=dict(sorted(Counter(str(p) for p in a["path"][moved]).items())),
        kv_exposed_s=Dist.of(exposed),
        devices=tuple(devices),
    )
