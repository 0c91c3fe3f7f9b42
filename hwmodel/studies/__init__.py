"""Studies: sets of independent points (reproductions, validation, DSE sweeps, system B runs) run by one resumable
runner (:mod:`hwmodel.studies.runner`)."""
