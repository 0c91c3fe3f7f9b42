"""The fully-streaming dataflow decoder: designs, the lowering to token programs, the fast engine, its cycle-stepped reference, resources and power."""
