"""The W8A8 functional model of the FPGA draft: a bit-exact integer datapath in JAX (docs/w8a8.md is its spec,
docs/functional.md its user guide).

Public API: :class:`DraftModel` (``from_synthetic``, ``from_safetensors``, ``prefill``, ``decode``, ``ingest``,
``mark``/``accept``/``rollback``/``init`` through the KVMU, ``kvmu``), :class:`SyntheticWeights`,
:class:`SafetensorsWeights`, :func:`write_safetensors`, :func:`quantize_model`, :class:`QuantizedParams`.
Heavy imports (JAX) happen when :mod:`fpga.functional.model` is first used.
"""

from __future__ import annotations

from typing import Any

from fpga.functional.quantize import CheckpointError, QuantizedParams, quantize_model
from fpga.functional.weights import SafetensorsWeights, SyntheticWeights, write_safetensors


def __getattr__(name: str) -> Any:
    if name in ("DraftModel", "DraftModelError"):
        from fpga.functional import model

        return getattr(model, name)
    raise AttributeError(name)


__all__ = [
    "CheckpointError",
    "DraftModel",
    "DraftModelError",
    "QuantizedParams",
    "SafetensorsWeights",
    "SyntheticWeights",
    "quantize_model",
    "write_safetensors",
]
