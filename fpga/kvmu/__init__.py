"""The KV-cache management unit: model, Numba kernel, command files, VCD, the reference RTL and its verifier."""
