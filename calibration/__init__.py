"""Measurements with their sources, fits of a few physical parameters, and reports of fitted vs predicted points."""
