"""The ``cuda`` target: numba-cuda device functions, one GPU thread per object.

This folder is the only place that imports numba-cuda, so that a change of GPU
code generator (numba-cuda-mlir, say) is one folder. Its modules:

* `.surface`: the one choice between a real GPU (`.gpu`) and numba's CUDA
  simulator (`.simulator`), and the check that a GPU is usable;
* `.launch`: the kernel of an `ObjectKernel` and its chunked two-stream launch;
* `.compact`: `compact_rows`, bounded rows of a kernel's entries gathered on the GPU;
* `.segments`: `item_column`, `row_max`, `row_offsets` and `bucket_sort`, per-row work spread over a
  block per row;
* `.xla`: the same kernel launched on XLA's stream inside JAX.
"""

from numba import cuda

from ... import settings
from .compact import compact_rows  # noqa: F401
from .segments import bucket_sort, item_column, row_max, row_offsets  # noqa: F401
from .launch import (  # noqa: F401
    ObjectKernel,
    device_empty,
    device_join,
    device_memory,
    is_device_array,
    kernels_started,
    to_device,
    to_host,
)
from .surface import SIMULATOR, declare_foreign, reciprocal, rsqrt  # noqa: F401
from .xla import xla_handler  # noqa: F401

NAME = "cuda"
#: The dense output evaluates the stages again instead of keeping them: 13
#: stage states do not fit in a thread's registers, and only steps that hold
#: an output time or an event pay for it.
KEEP_STAGES = False
#: numba-cuda rejects ``boundscheck``. On a GPU, params reads at a computed index
#: are guarded instead (NaN past the row: the object fails alone,
#: `hapsira_core.kernels.guard`); the simulator checks every index through numpy
#: and raises, as the host targets do.
BOUNDS_CHECKS = False
GUARDED_READS = not SIMULATOR
#: A call waits on the GPU: the fronts' host-side checks of many objects run beside
#: the kernels (the simulator's too: the same code, slower).
HOST_WAITS = True
#: A float64 division is tens of instructions on a GPU: with HAPSIRA_FASTMATH=auto a
#: user's function shares reciprocals (`hapsira_core.kernels.reciprocals`).
SHARED_RECIPROCALS = True
#: The simulator has no XLA platform: its kernels cannot run inside JAX,
#: except on JAX's CPU platform as a testing aid (`XlaKernel`'s ``simulator_on_cpu``).


def code_options():
    """The settings that change the generated code (part of every kernel's cache key)."""
    return (NAME, SIMULATOR, settings.DEBUG, settings.CUDA_MAX_REGISTERS,
            settings.CUDA_INTERLEAVE, settings.CUDA_FETCH)


ObjectKernel.code_options = staticmethod(code_options)


def progress_min_chunk():
    """Objects per kernel call at least, when ``progress=True`` calls the kernel in
    chunks: a launch's worth (``HAPSIRA_CUDA_CHUNK``), so that the GPU stays full."""
    return settings.CUDA_CHUNK
XLA_PLATFORM = None if SIMULATOR else "CUDA"
XLA_SIMULATED = SIMULATOR


def hjit(func=None, **options):
    """``numba.cuda.jit(device=True)``; numba's floating point on the GPU is IEEE
    (no exceptions), so a bad object fails alone."""
    if func is None:
        return lambda f: hjit(f, **options)
    options.pop("cache", None)  # device functions are cached with their kernel
    options.pop("error_model", None)
    compiled = cuda.jit(device=True, **options)(func)
    if SIMULATOR:  # its functions keep no options: recorded for the kernel fingerprint
        compiled.targetoptions = dict(options, device=True)
    return compiled


def xla_mismatch(what):
    if SIMULATOR:
        return (f"hapsira: the {what} cannot run here: HAPSIRA_TARGET=cuda under "
                "the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) has no XLA platform; "
                "start Python with HAPSIRA_TARGET=cpu or parallel to call it from JAX "
                "on the CPU, or use a real GPU with HAPSIRA_TARGET=cuda")
    return (f"hapsira: the {what} was built for HAPSIRA_TARGET=cuda and runs "
            "on JAX's GPU platform, but this program runs on the CPU; put its "
            "inputs on a GPU (jax.device_put(x, jax.devices('gpu')[0])) or start "
            "Python with HAPSIRA_TARGET=cpu or parallel")


def local_dask_cluster(**options):
    """A Dask cluster on this machine for this target: one worker per GPU
    (dask-cuda); under the simulator one worker process."""
    import distributed
    if SIMULATOR:
        return distributed.LocalCluster(n_workers=1, **options)
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        raise ImportError("--scheduler local on the cuda target starts one worker per "
                          "GPU with dask-cuda, which is not installed (pip install "
                          "dask-cuda)") from None
    options.pop("processes", None)
    options.pop("silence_logs", None)
    return LocalCUDACluster(**options)
