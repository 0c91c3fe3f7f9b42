"""Process-wide allocator policy for the cycle-level kernels (performance only: no result depends on it)."""

from __future__ import annotations

import sys

_done = False


def keep_freed_memory() -> None:
    """glibc: serve large allocations from the heap and keep freed memory for reuse instead of returning it to the
    kernel at once. Cycle-level kernels allocate and free large numpy temporaries per call; by default each one is
    a fresh mmap whose pages fault in one by one (measured: 0.43 s of system time per 128 streaming token
    simulations, 28 % on top of their 1.5 s of user time; with this, 0.01 s; a fresh LLaMA2-7B W4 token with
    4 KB requests: 3,500 page faults and 5-7 ms of system time on a loaded machine, 100 and ~0 with it).
    Idempotent; a no-op off Linux."""
    global _done
    if _done or not sys.platform.startswith("linux"):
        return
    _done = True
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        libc.mallopt(-3, 256 << 20)  # M_MMAP_THRESHOLD: allocations below 256 MiB come from the heap
        libc.mallopt(-1, 1 << 30)  # M_TRIM_THRESHOLD: return freed heap to the kernel only above 1 GiB
    except (OSError, AttributeError):  # pragma: no cover - not glibc
        pass
