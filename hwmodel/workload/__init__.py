"""Workloads: reasoning traces (system A) and serving request streams (system B, :mod:`.requests`)."""
