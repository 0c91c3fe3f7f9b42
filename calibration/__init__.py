"""Measurements with their sources, fits of a few physical parameters, and reports of fitted vs predicted points."""

from hwmodel.numba_cache import install as _install_numba_cache

_install_numba_cache()  # the project's Numba kernel cache (hwmodel/numba_cache.py), before any kernel loads
