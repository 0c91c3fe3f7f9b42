"""hwmodel: cycle-level performance and functional model of heterogeneous FPGA-GPU LLM inference systems."""
from hwmodel.errors import HwmodelError, SpecError

__all__ = ["HwmodelError", "SpecError", "__version__"]
__version__ = "0.1.0"
