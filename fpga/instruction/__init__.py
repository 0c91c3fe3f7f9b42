"""The instruction-driven (GLITCHES-style) accelerator: ISA, compiler, designs, simulator and engine, reference, power."""
