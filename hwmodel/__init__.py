"""hwmodel: cycle-level performance and functional model of heterogeneous FPGA-GPU LLM inference systems.

``import hwmodel as hw`` gives the Python API (:mod:`hwmodel.api`, docs/api.md): specs, engines for every
back-end, decode/prefill timing, physical bounds, system-A replays, system-B serving runs, sweeps, the frequency
study, the validation table and the reproductions. Heavy modules load on first use.
"""

from hwmodel import numba_cache as _numba_cache
from hwmodel.errors import HwmodelError, SpecError

_numba_cache.install()  # every kernel caches in the project cache directory (or runs uncached): before any loads

__version__ = "0.1.0"

_API = (
    "Load",
    "OpTiming",
    "Replay",
    "Saturation",
    "Serving",
    "cluster_spec",
    "load",
    "saturation",
    "system",
    "with_fields",
    "board",
    "physical_bounds",
    "capabilities",
    "decode",
    "decode_curve",
    "decode_window",
    "make_engine",
    "freq_study",
    "generate_trace",
    "gpu",
    "gpu_engine",
    "import_hf_config",
    "instruction_engine",
    "llm",
    "prefill",
    "read_trace",
    "replay",
    "reproduce",
    "requests",
    "serve",
    "spec_library",
    "streaming_engine",
    "sweep",
    "use_spec_dirs",
    "validation_table",
)

__all__ = ["HwmodelError", "SpecError", "__version__", *_API]


def __getattr__(name: str):  # noqa: ANN202  (PEP 562: the API module loads on first use, the CLI stays fast)
    if name in _API:
        from hwmodel import api

        return getattr(api, name)
    raise AttributeError(f"module 'hwmodel' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
