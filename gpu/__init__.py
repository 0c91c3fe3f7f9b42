"""GPU side: device specs, per-phase latency and power models per serving framework."""

from hwmodel.numba_cache import install as _install_numba_cache

_install_numba_cache()  # the project's Numba kernel cache (hwmodel/numba_cache.py), before any kernel loads
