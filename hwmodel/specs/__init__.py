"""The spec library: FPGA boards, GPUs, links and LLM architectures as validated, frozen dataclasses.

Built-in specs are TOML files inside the packages (``fpga/boards``, ``gpu/devices``, ``interconnect/links``,
``hwmodel/llms``). Users add their own with ``--spec-dir DIR`` (repeatable) or the ``HWMODEL_SPEC_PATH``
environment variable (directories separated by ``os.pathsep``); a user spec with the name of a built-in one
replaces it. Every numeric field carries its source (see :mod:`hwmodel.schema`); every file is validated when
the library is first used, so a broken spec fails at load with the file, the field and what was expected.

One module a job: :mod:`~hwmodel.specs.base` (what every spec has), :mod:`~hwmodel.specs.llm`,
:mod:`~hwmodel.specs.board` with :mod:`~hwmodel.specs.memory` (HBM, DDR), :mod:`~hwmodel.specs.gpu`,
:mod:`~hwmodel.specs.link`, and :mod:`~hwmodel.specs.library` (loading, validation across files, look-ups).
The spec layer sits below the operator graph and imports nothing of it: counts that need the graph (parameters)
are :func:`hwmodel.graph.params_of`.
"""

from hwmodel.specs.base import Spec
from hwmodel.specs.board import BoardSpec, DspPacking, FpgaResources, MissingMemory
from hwmodel.specs.gpu import GpuSpec
from hwmodel.specs.library import (
    BUILTIN_DIRS,
    KIND_WORDS,
    SPEC_KINDS,
    SpecLibrary,
    extra_spec_dirs,
    library,
    load_spec_file,
    set_extra_spec_dirs,
)
from hwmodel.specs.link import LinkSpec
from hwmodel.specs.llm import ARCHITECTURES, LlmSpec, kv_cache_bytes
from hwmodel.specs.memory import DdrSpec, HbmSpec

__all__ = [
    "ARCHITECTURES",
    "BUILTIN_DIRS",
    "KIND_WORDS",
    "SPEC_KINDS",
    "BoardSpec",
    "DdrSpec",
    "DspPacking",
    "FpgaResources",
    "GpuSpec",
    "HbmSpec",
    "LinkSpec",
    "LlmSpec",
    "MissingMemory",
    "Spec",
    "SpecLibrary",
    "extra_spec_dirs",
    "kv_cache_bytes",
    "library",
    "load_spec_file",
    "set_extra_spec_dirs",
]
