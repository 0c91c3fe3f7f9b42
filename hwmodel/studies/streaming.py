"""The streaming decode model's study: the built-in designs over contexts and the kernel-clock sweep of
draft-u280 with 512- and 256-bit ports (`hwmodel reproduce streaming`)."""

from __future__ import annotations

from typing import Any


def token_row(res: Any) -> dict[str, Any]:
    """The headline figures of one simulated token (a TokenResult of fpga/streaming/engine.py)."""
    return {
        "design": res.design,
        "ctx": res.ctx,
        "clock_mhz": res.clock_hz / 1e6,
        "cycles": res.cycles,
        "seconds": res.seconds,
        "tokens_per_s": res.tokens_per_s,
        "hbm_bytes": res.hbm_bytes,
        "achieved_bw_bytes_per_s": res.achieved_bw_bytes_per_s,
        "hbm_utilization": res.hbm_utilization,
        "ports_utilization": res.ports_utilization,
        "bandwidth_floor_s": res.bandwidth_floor_s,
    }


def freq_table(
    ctx: int = 512, freqs: tuple[int, ...] = (150, 200, 225, 250, 300, 350, 400, 450)
) -> list[dict[str, Any]]:
    """Decode time of draft-u280 (512-bit ports) and its 256-bit-port variant versus the kernel clock."""
    import dataclasses

    from fpga.streaming.engine import load_design, simulate_token

    d512 = load_design("draft-u280")
    d256 = d512.with_engine("linear", port_width_bits=256).with_engine("attn", port_width_bits=256)
    rows = []
    for f in freqs:
        r512 = simulate_token(d512, ctx, clock_hz=f * 1e6)
        r256 = simulate_token(dataclasses.replace(d256, name="draft-u280-256bit"), ctx, clock_hz=f * 1e6)
        rows.append(
            {
                "clock_mhz": f,
                "ctx": ctx,
                "t512_s": r512.seconds,
                "util512": r512.hbm_utilization,
                "t256_s": r256.seconds,
                "util256": r256.hbm_utilization,
            }
        )
    return rows
