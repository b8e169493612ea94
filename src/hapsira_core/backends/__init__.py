"""One module per target; `backend` is the active one.

A backend provides ``hjit`` (compile a helper function), ``rsqrt``,
``vectorize``/``guvectorize`` targets, ``KEEP_STAGES`` (whether the dense
output may reuse a step's stages) and an ``ObjectKernel`` class that runs a
per-object body over N objects. Everything specific to one target lives in
its module, so that a new backend (say numba-cuda-mlir) is one new file.
"""

import importlib

from .. import settings

#: The backend of ``settings.TARGET``.
backend = importlib.import_module(f"{__name__}.{settings.TARGET}")
