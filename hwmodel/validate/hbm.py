"""Validation rows of the HBM channel model (shared format of `hwmodel validate`): AMD's Vitis example logs
(shared/research/measurements.md s1: H1, H3, H4, H5) and Shuhai (FCCM 2020; hardware.md s2).

Nothing in the HBM model is fitted: timings come from JEDEC-derived tables (gem5's HBM2 interface), PG276 and the
HBM IP configuration Shuhai ships, and the page-hit latency is Shuhai's measurement used as an input (that row is
marked ``fitted``: the model reproduces its own input). Every other row is a prediction with 0 free parameters.
U50 rows use the U280's HBM (same HBM2 stacks, controller and switch; the U50 has the same 32 pseudo-channels at
the same per-channel peak) - an assumption stated in each row's note.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from fpga.hbm import channel as hbm
from fpga.hbm import profile as hbm_profile
from hwmodel.specs import library
from hwmodel.validate.providers import Provider, register

_SRC_VITIS = "Xilinx/Vitis_Accel_Examples performance/"
_SHUHAI = "Shuhai, Wang et al., FCCM 2020 (arXiv 2005.04324)"


def _row(
    name: str,
    model: float,
    published: float | None,
    unit: str,
    role: str,
    workload: str,
    source: str,
    note: str,
    band: list[float] | None = None,
    free: int = 0,
) -> dict[str, Any]:
    return {
        "area": "HBM",
        "name": name,
        "model": float(model),
        "published": published,
        "band": band,
        "unit": unit,
        "role": role,
        "free_params": free,
        "workload": workload,
        "source": source,
        "note": note,
    }


def rows(board_fields: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per published HBM figure, with what the bank-level model gives under the same set-up
    (``board_fields``: U280 HBM fields moved, for a band: :mod:`hwmodel.validate.perturb`)."""
    b = library().board("u280")
    if board_fields:
        b = dataclasses.replace(b, hbm=dataclasses.replace(b.hbm, **board_fields))
    h = b.hbm
    out = []
    # ---- Shuhai: sequential throughput of every channel, idle latencies
    seq = hbm_profile.sustained_channel_bw(b)
    out.append(
        _row(
            "Shuhai U280 aggregate sequential, 32 channels",
            32 * seq / 1e9,
            425.0,
            "GB/s",
            "predicted",
            "32 ports, each on its own pseudo-channel, sequential 4 KB reads, 450 MHz 256-bit engine",
            _SHUHAI + " abstract",
            "refresh (tREFI/tRFC), activations and the PG276 command rate; the "
            "aggregate is 32 independent channels (no switch crossing)",
        )
    )
    p = hbm.hbm_params(b, h.axi_clock_hz)
    out.append(
        _row(
            "Shuhai U280 idle latency, page closed",
            h.latency_page_hit_cycles + p[hbm.HP_RCD],
            float(h.latency_page_closed_cycles),
            "AXI cycles",
            "predicted",
            "isolated 32-B read, bank closed",
            _SHUHAI + " (latency figure) [M]",
            "page-hit latency + tRCD (12 ns -> 6 cycles)",
        )
    )
    out.append(
        _row(
            "Shuhai U280 idle latency, page miss",
            h.latency_page_hit_cycles + p[hbm.HP_RCD] + p[hbm.HP_RP],
            float(h.latency_page_miss_cycles),
            "AXI cycles",
            "predicted",
            "isolated 32-B read, other row open",
            _SHUHAI + " (latency figure) [M]",
            "page-hit latency + tRP + tRCD (14 + 12 ns -> 13 cycles)",
        )
    )
    out.append(
        _row(
            "Shuhai U280 idle latency, page hit",
            float(h.latency_page_hit_cycles),
            float(h.latency_page_hit_cycles),
            "AXI cycles",
            "fitted",
            "isolated 32-B read, row open",
            _SHUHAI + " [M]",
            "input of the model (latency_page_hit_cycles), reproduced by construction",
            free=1,
        )
    )
    r64 = hbm_profile.profile_bandwidth(b, h.axi_clock_hz, 64, outstanding=64, port_width_bits=256, total_bytes=8 << 20)
    out.append(
        _row(
            "Shuhai U280 64-B bursts vs long bursts",
            r64["channel_bw_bytes_per_s"] / seq,
            None,
            "ratio",
            "predicted",
            "sequential 64-B reads, 64 outstanding, 450 MHz",
            _SHUHAI + " [M]",
            "Shuhai: throughput saturates once bursts are >= 64 B (recalled, no exact value)",
            band=[0.95, 1.0],
        )
    )
    # ---- H1: U280 hbm_bandwidth example, 8 CUs x (2 read + 2 write) ports, each on its own pseudo-channel
    rd = hbm_profile.profile_bandwidth(b, 300e6, 4096, outstanding=16, port_width_bits=512, total_bytes=8 << 20)
    wr = hbm_profile.profile_bandwidth(
        b, 300e6, 4096, outstanding=16, port_width_bits=512, total_bytes=8 << 20, write=True
    )
    agg = 16 * rd["bw_bytes_per_s"] + 16 * wr["bw_bytes_per_s"]
    out.append(
        _row(
            "H1 U280 hbm_bandwidth aggregate",
            agg / 1e9,
            421.3,
            "GB/s",
            "predicted",
            "8 CUs x 4 ports (2 read, 2 write), 512-bit at 300 MHz, sequential 4 KB bursts, 16 outstanding",
            _SRC_VITIS + "hbm_bandwidth/README.rst",
            "16 read and 16 write channels, each port on its own "
            "pseudo-channel; the example's burst length and outstanding count are assumed (Vitis defaults)",
        )
    )
    # ---- H3: U50 same example, 3 CUs on 12 pseudo-channels (per channel as H1)
    out.append(
        _row(
            "H3 U50 hbm_bandwidth per pseudo-channel",
            agg / 32 / 1e9,
            13.19,
            "GB/s",
            "predicted",
            "as H1 on 12 pseudo-channels",
            _SRC_VITIS + "hbm_bandwidth/README.rst (U50 log)",
            "U50 modelled with the U280 HBM channel (same HBM2 stacks and controller) [assumption]",
        )
    )
    # ---- H4: U50 pseudo-random 128-B accesses, 64 outstanding
    r128 = hbm_profile.profile_bandwidth(
        b, 300e6, 128, outstanding=64, port_width_bits=1024, pattern="random", total_bytes=2 << 20
    )
    out.append(
        _row(
            "H4 U50 pseudo-random 128-B reads per channel",
            r128["bw_bytes_per_s"] / 1e9,
            11.50,
            "GB/s",
            "predicted",
            "random 128-B reads over a pseudo-channel, 64 outstanding, 1024-bit at 300 MHz",
            _SRC_VITIS + "hbm_bandwidth_pseudo_random/README.rst",
            "activation-bound: two ACTs per 128 B (RGBCG puts BG0 at the lowest bit), tRRD_S / tFAW; the "
            "controller's 64-entry reorder queue (PG276, IP default on) picks the access whose column "
            "command can issue first; one AXI ID (HLS m_axi), data back in request order. Not modelled "
            "(docs/hbm.md): PG276's look-ahead PRE/ACT works over the 12-entry memory-controller queue, the "
            "model lets any of the 64 queued accesses open its row early; the reorder age limit",
        )
    )
    # ---- H5: U50 random accesses spanning 4 pseudo-channels through the switch, without and with RAMA.
    # The set-up is the example's own code (Vitis_Accel_Examples host/hbm_rama_ip before its 2023.2 clean-up):
    # v_dt is 32 x uint32 aligned(128) -> one 128-B (1024-bit) access per port per loop iteration; in1/in2 are
    # m_axi reads with num_read_outstanding = 64 (latency = 300), out_add/out_mul m_axi writes with the HLS
    # defaults (num_write_outstanding 16); every buffer is 1 GB on its own group of 4 PCs (HBM[0:3], [4:7], ...),
    # an LFSR index uniform over it; "CHANNEL THROUGHPUT" = overall / 8 = bytes of one port over the run. The
    # loop body moves 128 B on each of the CU's four ports per iteration, so each port runs at the rate of the
    # slowest of them: the per-port figure is min(read port, write port), each port simulated on its own PCs.
    for rama, published in ((False, 1.03), (True, 12.13)):
        ids = 64 if rama else 1
        kw: dict[str, Any] = {
            "port_width_bits": 1024,
            "pattern": "random",
            "channels": (0, 1, 2, 3),
            "port": 0,
            "total_bytes": 1 << 20,
            "axi_ids": ids,
        }
        rd5 = hbm_profile.profile_bandwidth(b, 300e6, 128, outstanding=64, **kw)["bw_bytes_per_s"]
        wr5 = hbm_profile.profile_bandwidth(b, 300e6, 128, outstanding=16, write=True, **kw)["bw_bytes_per_s"]
        which = "with RAMA" if rama else "no RAMA"
        out.append(
            _row(
                f"H5 U50 random over 4 pseudo-channels, {which}, per port",
                min(rd5, wr5) / 1e9,
                published,
                "GB/s",
                "predicted",
                "random 128-B accesses over a 1 GB buffer on 4 pseudo-channels, "
                "1024-bit m_axi at 300 MHz: reads 64 outstanding, writes 16 (HLS default); "
                f"{ids} AXI ID{'s' if ids > 1 else ''}; per port = min(read {rd5 / 1e9:.2f}, "
                f"write {wr5 / 1e9:.2f} GB/s)",
                "AMD Vitis_Accel_Examples host/hbm_rama_ip README (measurements.md H5)",
                (
                    "RAMA modelled as 64 AXI IDs (PG276's most per port; PG310: it substitutes IDs and "
                    "reorders responses); its own latency is not modelled"
                    if rama
                    else "PG310: the switch lets a master with one AXI ID have outstanding transactions with only "
                    "one slave, so a request to another PC waits for the port's outstanding ones"
                ),
            )
        )
    # ---- a simulator peer (not a measurement): Ramulator 2 on the same traces (hwmodel/validate/hbm_peer.py)
    from hwmodel.validate import hbm_peer

    out.extend(hbm_peer.rows("full", b))
    return out


register(Provider(__name__, lambda s: rows(), rank=12, area_module=True))  # a row provider of `hwmodel validate`
