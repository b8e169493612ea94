"""DOP853's coefficients under the names the first version of this package used.

The tableau lives in `.methods.dop853`; this module only re-exports it.
"""

from .methods.dop853 import A, B, C, D, E3, E5, N_STAGES  # noqa: F401

ERROR_ESTIMATOR_ORDER = 7
