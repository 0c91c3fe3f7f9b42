"""Board memory specs: HBM seen from the fabric (:class:`HbmSpec`) and board DDR (:class:`DdrSpec`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from hwmodel.schema import fraction, non_negative, one_of, positive, sourced


@dataclasses.dataclass(frozen=True, kw_only=True)
class HbmSpec:
    """High-bandwidth memory of an FPGA board, seen from the fabric (AXI / NoC ports into pseudo-channels).

    The DRAM timing (``t*_s``) is JEDEC-style data in seconds, converted to memory-side AXI cycles by rounding up
    (fpga/hbm/channel.py); the address map is the HBM IP's ``ADDR_BIT`` list (PG276), most significant bit first."""

    stacks: int = sourced(check=positive)
    pseudo_channels: int = sourced(check=positive)
    capacity_bytes: int = sourced(check=positive, unit="B")
    pc_peak_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="theoretical, per pseudo-channel")
    pc_measured_bw_bytes_per_s: float = sourced(check=positive, unit="B/s", doc="sustained, per pseudo-channel")
    axi_ports: int = sourced(check=positive, doc="fabric-side ports into the memory")
    axi_port_width_bits: int = sourced(check=positive, unit="bit")
    axi_clock_hz: float = sourced(check=positive, unit="Hz", doc="the memory-side port clock domain")
    port_bw_cap_bytes_per_s: float = sourced(
        check=positive, unit="B/s", doc="most one port can move (AXI width x clock, or a NoC link cap)"
    )
    granule_bytes: int = sourced(check=positive, unit="B", doc="smallest access (AxSIZE), one column access")
    min_efficient_burst_bytes: int = sourced(
        check=positive, unit="B", doc="smallest burst at full linear rate: the AXI command rate"
    )
    latency_page_hit_cycles: int = sourced(check=positive, unit="axi cycles")
    latency_page_closed_cycles: int = sourced(check=positive, unit="axi cycles", doc="measured; validation only")
    latency_page_miss_cycles: int = sourced(check=positive, unit="axi cycles", doc="measured; validation only")
    misaligned_efficiency: float = sourced(check=fraction, doc="efficiency of a non-granule-aligned access")
    axi3_burst_beats: int = sourced(check=positive, doc="longest AXI3 burst the controller takes (AxLEN + 1)")
    # ---- DRAM organisation, address map and controller (fpga/hbm/channel.py)
    banks: int = sourced(check=positive, doc="banks per pseudo-channel")
    bank_groups: int = sourced(check=positive, doc="bank groups per pseudo-channel")
    address_map: str = sourced(doc="HBM IP ADDR_BIT list, MSB first: RA (all row bits), BGi, BAi, CAi")
    controller_policy: str = sourced(
        check=one_of("in-order", "lookahead"),
        doc="in-order: every command in arrival order; lookahead: PRE/ACT of queued "
        "accesses issue early (PG276 look-ahead precharge/activate); column "
        "commands in the order the controller picks (fpga/hbm/scheduler.py)",
    )
    # controller scheduling (fpga/hbm/scheduler.py); defaults are the HBM IP's (PG276 "HBM Reordering Options")
    request_reordering: bool = sourced(
        default=True,
        doc="PG276 Enable Request Reordering: the AXI command queue "
        "reorders requests (data returns in order per AXI ID)",
    )
    reorder_queue_depth: int = sourced(
        default=64, check=positive, doc="PG276: 64-entry AXI command (reorder) queue per pseudo-channel"
    )
    # ---- JEDEC timing (seconds)
    tcl_s: float = sourced(check=positive, unit="s", doc="column command -> data (read latency)")
    trcd_s: float = sourced(check=positive, unit="s", doc="ACT -> column command, same bank")
    trp_s: float = sourced(check=positive, unit="s", doc="PRE -> ACT, same bank")
    tras_s: float = sourced(check=positive, unit="s", doc="ACT -> PRE, same bank")
    trc_s: float = sourced(check=positive, unit="s", doc="ACT -> ACT, same bank (>= tRAS + tRP)")
    tccds_s: float = sourced(check=positive, unit="s", doc="column -> column, different bank group")
    tccdl_s: float = sourced(check=positive, unit="s", doc="column -> column, same bank group")
    trrds_s: float = sourced(check=positive, unit="s", doc="ACT -> ACT, different bank group")
    trrdl_s: float = sourced(check=positive, unit="s", doc="ACT -> ACT, same bank group")
    tfaw_s: float = sourced(check=positive, unit="s", doc="window holding at most four ACTs")
    twtrs_s: float = sourced(check=positive, unit="s", doc="write data end -> read, different bank group")
    twtrl_s: float = sourced(check=positive, unit="s", doc="write data end -> read, same bank group")
    trtw_s: float = sourced(check=positive, unit="s", doc="read column -> write column")
    twr_s: float = sourced(check=positive, unit="s", doc="write data end -> PRE, same bank")
    trtp_s: float = sourced(check=positive, unit="s", doc="read column -> PRE, same bank")
    refresh_interval_s: float = sourced(check=positive, unit="s", doc="tREFI: one refresh every this long")
    refresh_cycle_s: float = sourced(check=positive, unit="s", doc="tRFC: the channel is blocked this long")
    # ---- fabric side
    switch_latency_cycles: int = sourced(
        check=non_negative,
        unit="axi cycles",
        doc="AXI switch / interconnect pipeline from the fabric port to the controller",
    )
    switch_segment_ports: int = sourced(
        check=positive, doc="ports (and pseudo-channels) of one switch segment: local access"
    )
    lateral_hop_cycles: int = sourced(
        check=non_negative, unit="axi cycles", doc="extra latency per lateral switch segment crossed"
    )
    cdc_sync_cycles: int = sourced(
        check=non_negative,
        unit="cycles",
        doc="synchroniser stages of the asynchronous FIFO between kernel and AXI clocks",
    )
    ports_per_pc: int = sourced(check=positive, doc="fabric ports that share one pseudo-channel's data bus")

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.pc_measured_bw_bytes_per_s > self.pc_peak_bw_bytes_per_s:
            yield (
                "pc_measured_bw_bytes_per_s",
                f"at most pc_peak_bw_bytes_per_s ({self.pc_peak_bw_bytes_per_s:g})",
                self.pc_measured_bw_bytes_per_s,
            )
        if not (self.latency_page_hit_cycles <= self.latency_page_closed_cycles <= self.latency_page_miss_cycles):
            yield (
                "latency_page_closed_cycles",
                "page hit <= page closed <= page miss latency",
                self.latency_page_closed_cycles,
            )
        if self.capacity_bytes % self.pseudo_channels:
            yield "capacity_bytes", f"a multiple of pseudo_channels ({self.pseudo_channels})", self.capacity_bytes
        if self.refresh_cycle_s >= self.refresh_interval_s:
            yield "refresh_cycle_s", f"below refresh_interval_s ({self.refresh_interval_s:g})", self.refresh_cycle_s
        if self.axi_ports % self.ports_per_pc or self.axi_ports // self.ports_per_pc != self.pseudo_channels:
            yield (
                "ports_per_pc",
                f"axi_ports / pseudo_channels ({self.axi_ports} / {self.pseudo_channels})",
                self.ports_per_pc,
            )
        if not 6.25e6 <= self.axi_clock_hz <= 4e9:
            yield (
                "axi_clock_hz",
                "a memory-port clock in [6.25 MHz, 4 GHz] (MMCM floor; HBM AXI/NoC clocks are hundreds of MHz)",
                self.axi_clock_hz,
            )
        if self.min_efficient_burst_bytes % self.granule_bytes:
            yield (
                "min_efficient_burst_bytes",
                f"a multiple of granule_bytes ({self.granule_bytes})",
                self.min_efficient_burst_bytes,
            )
        if self.axi_port_width_bits != 8 * self.granule_bytes:
            yield (
                "axi_port_width_bits",
                f"8 x granule_bytes ({8 * self.granule_bytes}): one granule per AXI beat",
                self.axi_port_width_bits,
            )
        wire = self.axi_port_width_bits / 8 * self.axi_clock_hz
        if self.port_bw_cap_bytes_per_s > wire * 1.0001:
            yield (
                "port_bw_cap_bytes_per_s",
                f"at most axi_port_width_bits / 8 x axi_clock_hz ({wire:g})",
                self.port_bw_cap_bytes_per_s,
            )
        # JEDEC relations between declared timings (derived vs declared, as Ramulator 2 checks its presets)
        for big, small, why in (
            ("trc_s", None, "tRAS + tRP"),
            ("tras_s", "trcd_s", "tRCD"),
            ("tccdl_s", "tccds_s", "tCCD_S"),
            ("trrdl_s", "trrds_s", "tRRD_S"),
            ("twtrl_s", "twtrs_s", "tWTR_S"),
            ("tfaw_s", "trrds_s", "tRRD_S"),
            ("refresh_cycle_s", "trc_s", "tRC (a refresh outlasts every bank timer)"),
        ):
            lo = self.tras_s + self.trp_s if small is None else getattr(self, small)
            if getattr(self, big) < lo * (1 - 1e-9):
                yield big, f"at least {why} ({lo:g} s)", getattr(self, big)
        if self.refresh_cycle_s < self.tfaw_s:
            yield "refresh_cycle_s", f"at least tFAW ({self.tfaw_s:g} s)", self.refresh_cycle_s
        from hwmodel.hbm_map import parse_address_map

        try:
            m = parse_address_map(self.address_map)
        except ValueError as exc:
            yield "address_map", str(exc), self.address_map
            return
        if 2 ** (m.bank_bits + m.bg_bits) != self.banks:
            yield "banks", f"2^(bank + bank-group bits of address_map) = {2 ** (m.bank_bits + m.bg_bits)}", self.banks
        if 2**m.bg_bits != self.bank_groups:
            yield "bank_groups", f"2^(bank-group bits of address_map) = {2**m.bg_bits}", self.bank_groups
        pc = self.capacity_bytes // self.pseudo_channels // self.ports_per_pc
        rows = pc // (self.row_bytes * self.banks) if self.row_bytes * self.banks else 0
        if rows < 1 or rows & (rows - 1) or rows * self.row_bytes * self.banks != pc:
            yield (
                "address_map",
                (
                    f"column and bank bits that divide a port's {pc} B share of a pseudo-channel into "
                    f"a power of two of rows"
                ),
                self.address_map,
            )

    @property
    def row_bytes(self) -> int:
        """DRAM page per bank: 2^(column bits of the address map) granules."""
        from hwmodel.hbm_map import parse_address_map

        return self.granule_bytes << parse_address_map(self.address_map).col_bits

    @property
    def command_cycles(self) -> int:
        """Fewest AXI cycles between the first column commands of two AXI bursts (PG276 min efficient burst)."""
        return self.min_efficient_burst_bytes // self.granule_bytes

    @property
    def peak_bw_bytes_per_s(self) -> float:
        return self.pc_peak_bw_bytes_per_s * self.pseudo_channels

    @property
    def measured_bw_bytes_per_s(self) -> float:
        return self.pc_measured_bw_bytes_per_s * self.pseudo_channels

    @property
    def pc_capacity_bytes(self) -> int:
        return self.capacity_bytes // self.pseudo_channels

    @property
    def axi_clock_period_s(self) -> float:
        return 1.0 / self.axi_clock_hz


@dataclasses.dataclass(frozen=True, kw_only=True)
class DdrSpec:
    """Board DDR (slow, large; the device memory of a card without HBM)."""

    capacity_bytes: int = sourced(check=non_negative, unit="B")
    bw_bytes_per_s: float = sourced(check=non_negative, unit="B/s", doc="theoretical peak of all channels")
    channels: int = sourced(default=0, check=non_negative, doc="DDR channels (banks); 0 = not stated")
    measured_bw_bytes_per_s: float | None = sourced(
        default=None,
        check=non_negative,
        unit="B/s",
        doc="sustained bandwidth of all channels; absent = not measured (the bounds then use the peak for both floors)",
    )

    def _validate(self) -> Iterator[tuple[str, str, object]]:
        if self.measured_bw_bytes_per_s is not None and self.measured_bw_bytes_per_s > self.bw_bytes_per_s:
            yield (
                "measured_bw_bytes_per_s",
                f"at most bw_bytes_per_s ({self.bw_bytes_per_s:g})",
                self.measured_bw_bytes_per_s,
            )

    @property
    def sustained_bw_bytes_per_s(self) -> float:
        """The measured bandwidth, or the peak where none is declared."""
        return self.bw_bytes_per_s if self.measured_bw_bytes_per_s is None else self.measured_bw_bytes_per_s
