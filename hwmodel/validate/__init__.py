"""`hwmodel validate`: one table of every published or measured figure the project knows, beside the model's value.

Each row says what the figure is (area, name, workload, unit), the model's value, the published value (a point)
or band (a range), the row's *role* -- ``fitted`` (a parameter was matched to it), ``fitted-derived`` (it follows
from fitted points by identity), ``predicted`` (nothing was matched to it) or ``leave-one-out`` (a fitted point
predicted by a refit without it) -- the number of free parameters of the family behind it, the error (or inside /
outside the band), the physical bound of the figure where one applies (:mod:`hwmodel.bounds`), and its source.

Rows come from *providers* (:mod:`hwmodel.validate.providers`): the calibration families (GPU, edge GPU, FPGA
instruction), the HBM channel fit, system A and system B; other areas contribute their own ``rows()`` functions
(``hwmodel.reasoning.validation``, ``hwmodel.serving.validation``, ``hwmodel.validate.hbm``,
``hwmodel.validate.streaming``), each registered in :data:`hwmodel.validate.providers.REGISTRY`. :mod:`hwmodel.validate.guards` holds every predicted and
leave-one-out error to its committed value plus a margin (the CI guard); :mod:`hwmodel.validate.readme` writes the
README's "beside the published numbers" table from the rows. Documentation: docs/validation.md.
"""
