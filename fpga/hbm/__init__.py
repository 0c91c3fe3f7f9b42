"""HBM pseudo-channels at bank level: the channel kernels, their cycle-stepped reference."""
