"""FPGA side: board specs, HBM model, accelerator models (streaming, instruction-driven), KVMU, functional model.

Numba kernels here are compiled with ``cache=True``. Numba invalidates a cached kernel only when *its own* source
file changes, not when a function it calls from another module does (``instruction_sim`` and ``streaming`` inline
``hbm``'s channel model), so after an update a stale cache could run the old channel model or crash. The cache
therefore lives in a directory named by a hash of every source file of this package
(``$XDG_CACHE_HOME/hwmodel/numba/<hash>``, or ``NUMBA_CACHE_DIR`` when the user sets it): any change to any kernel
source starts a fresh cache.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path


def _kernel_cache_dir() -> None:
    if os.environ.get("NUMBA_CACHE_DIR"):
        return
    h = hashlib.sha256()
    for p in sorted(Path(__file__).resolve().parent.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    try:
        import numba

        numba.config.CACHE_DIR = str(base / "hwmodel" / "numba" / h.hexdigest()[:16])
    except ImportError:  # numba missing: the kernels' own import reports it
        pass


_kernel_cache_dir()
