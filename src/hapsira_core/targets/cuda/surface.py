"""The one choice between a real GPU and numba's CUDA simulator, made at import.

Everything that differs between the two is in `.gpu` or `.simulator`; the
rest of the cuda target imports it from here and never asks again.
"""

from ... import settings

#: Kernels run under numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``).
SIMULATOR = settings.cuda_simulator_enabled()


def _check_usable():
    hint = (
        "HAPSIRA_TARGET=cuda needs a CUDA GPU with a working driver and "
        "numba-cuda (pip install 'hapsira-cowell[cuda]'); to run the cuda "
        "target without a GPU, set NUMBA_ENABLE_CUDASIM=1 (the simulator, "
        "slow, for testing)"
    )
    try:
        from numba import cuda
    except ImportError as error:  # pragma: no cover - depends on the install
        raise RuntimeError(f"{hint}. numba.cuda failed to import: {error}") from error
    try:
        usable = cuda.is_available()
    except Exception as error:  # pragma: no cover - driver specific
        raise RuntimeError(f"{hint}. Probing the GPU failed: {error}") from error
    if not usable:
        raise RuntimeError(f"{hint}. No usable GPU was found.")


if SIMULATOR:
    from .simulator import (NRT_LIBRARY, declare_foreign, is_simulated_array,  # noqa: F401
                            reciprocal, rsqrt)
else:
    _check_usable()
    from .gpu import (NRT_LIBRARY, declare_foreign, is_simulated_array,  # noqa: F401
                      reciprocal, rsqrt)
