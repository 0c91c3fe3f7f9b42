"""GPU board power per phase, and energy per token.

Model: ``P = P_idle + (TDP - P_idle) * u ** gamma`` where ``u`` is the utilisation of the resource that bounds the
phase, averaged over the phase: ``u = max(bytes / (t * peak bandwidth), ops / (t * peak ops))`` -- the DRAM for
decode, the tensor cores for long prefills, little of either when the host is the bottleneck. ``P_idle`` and TDP
come from the GPU spec; ``gamma`` (< 1: clocks and voltage ramp up as soon as work arrives, then power saturates)
is the one fitted coefficient, from the A100 HF LLaMA2-7B decode point (0.246 tokens/s/W at 24.26 ms/token, i.e.
about 168 W). ``P`` never exceeds TDP (``u <= 1``) and equals ``P_idle`` with no work.

Energy of an operation = power x time (:meth:`gpu.latency.GpuEngine.decode_energy_j` and friends).
"""

from __future__ import annotations

import numpy as np

from hwmodel.specs import GpuSpec


def utilisation(
    gpu: GpuSpec, n_bytes: np.ndarray | float, ops: np.ndarray | float, time_s: np.ndarray | float, weight_bits: int
) -> np.ndarray:
    """Fraction of the bounding resource in use, averaged over ``time_s`` (clipped to [0, 1])."""
    t = np.asarray(time_s, dtype=np.float64)
    u_mem = np.asarray(n_bytes) / (t * gpu.mem_bw_bytes_per_s)
    u_ops = np.asarray(ops) / (t * gpu.peak_ops_per_s(weight_bits))
    return np.clip(np.maximum(u_mem, u_ops), 0.0, 1.0)


def board_power_w(gpu: GpuSpec, u: np.ndarray | float, gamma: float) -> np.ndarray:
    """Board power at utilisation ``u``: idle power plus the dynamic range to TDP scaled by ``u ** gamma``."""
    u = np.clip(np.asarray(u, dtype=np.float64), 0.0, 1.0)
    return gpu.idle_power_w + (gpu.tdp_w - gpu.idle_power_w) * u**gamma
