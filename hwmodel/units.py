"""Human-readable formatting of quantities whose unit is in the variable name."""

from __future__ import annotations


def fmt_bytes(n_bytes: float) -> str:
    """Decimal units (GB = 1e9 B), as bandwidth and model sizes are quoted in the field."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(n_bytes) >= scale:
            return f"{n_bytes / scale:.2f} {unit}"
    return f"{n_bytes:.0f} B"


def fmt_bw(bytes_per_s: float) -> str:
    return f"{bytes_per_s / 1e9:.1f} GB/s"


def fmt_s(seconds: float) -> str:
    """Seconds with a unit that keeps three significant digits readable."""
    if seconds >= 1.0:
        return f"{seconds:.3g} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3g} ms"
    if seconds >= 1e-6:
        return f"{seconds * 1e6:.3g} us"
    return f"{seconds * 1e9:.3g} ns"


def fmt_hz(hz: float) -> str:
    return f"{hz / 1e6:.0f} MHz" if hz < 1e9 else f"{hz / 1e9:.2f} GHz"
