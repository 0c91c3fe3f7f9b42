"""FPGA side: board specs, HBM model, accelerator models (streaming, instruction-driven), KVMU, functional model.

Numba kernels here are compiled with ``cache=True``; :mod:`hwmodel.numba_cache` keeps them in the project's cache
directory under a key of every source file (a kernel that inlines another module's function is recompiled when
that module changes) and runs them uncached when no directory is writable.
"""

from hwmodel.numba_cache import install as _install_numba_cache

_install_numba_cache()
