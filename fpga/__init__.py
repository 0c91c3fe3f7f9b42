"""FPGA side: board specs, HBM model, accelerator models (streaming, instruction-driven), KVMU, functional model."""
