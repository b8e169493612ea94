"""Settings read once from ``HAPSIRA_*`` environment variables at import.

=================  ==================================  =========
variable           meaning                             default
=================  ==================================  =========
``HAPSIRA_TARGET`` ``cpu``, ``parallel`` or ``cuda``   ``cpu``
``HAPSIRA_CACHE``  kernels cached on disk (``0``/``1``)  ``1``
``HAPSIRA_CACHE_DIR``  where cached kernels live       ``~/.cache/hapsira-cowell``
``HAPSIRA_CACHE_MAX_MB``  cache size before pruning    ``1024``
``HAPSIRA_DEBUG``  numba debug info, bounds checks     ``0``
``HAPSIRA_CUDA_BLOCK``  threads per block (cuda)       ``128``
``HAPSIRA_CUDA_CHUNK``  objects per launch (cuda)      ``131072``
``HAPSIRA_CUDA_MAX_REGISTERS``  register cap per thread  ``0`` (numba's choice)
=================  ==================================  =========

A bad value raises `ValueError` naming the variable, the value and
what is valid. Settings cannot change after import: compiled code depends on
them, so change the environment and start a new process instead. Those that
change the generated code (the target, ``HAPSIRA_DEBUG``,
``HAPSIRA_CUDA_MAX_REGISTERS``) are part of the kernel cache key
(`hapsira_core.cache.code_settings`), so a warm cache never serves a kernel
built under other values. An unusable ``HAPSIRA_CACHE_DIR`` gives one
``CacheWarning`` and in-memory kernels.
"""

import os

TARGETS = ("cpu", "parallel", "cuda")
_BOOLEANS = {"0": False, "false": False, "no": False, "off": False,
             "1": True, "true": True, "yes": True, "on": True}


def _choice(name, default, options):
    value = os.environ.get(name, default).strip().lower()
    if value not in options:
        raise ValueError(
            f"{name}={os.environ.get(name)!r} is not valid; "
            f"expected one of {', '.join(repr(o) for o in options)}"
        )
    return value


def _boolean(name, default):
    value = os.environ.get(name, default).strip().lower()
    if value not in _BOOLEANS:
        raise ValueError(
            f"{name}={os.environ.get(name)!r} is not valid; "
            "expected 0/1, true/false, yes/no or on/off"
        )
    return _BOOLEANS[value]


def _integer(name, default, minimum=1):
    raw = os.environ.get(name, str(default)).strip()
    try:
        value = int(raw)
    except ValueError:
        value = minimum - 1
    if value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name}={raw!r} is not valid; expected {kind}")
    return value


def cuda_simulator_enabled():
    """True when numba's CUDA simulator is switched on (``NUMBA_ENABLE_CUDASIM``)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0")


def _check_cuda_usable():
    if cuda_simulator_enabled():
        return
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


TARGET = _choice("HAPSIRA_TARGET", "cpu", TARGETS)
CACHE = _boolean("HAPSIRA_CACHE", "1")
CACHE_DIR = os.path.expanduser(os.environ.get(
    "HAPSIRA_CACHE_DIR",
    os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "hapsira-cowell")))
CACHE_MAX_MB = _integer("HAPSIRA_CACHE_MAX_MB", 1024)
DEBUG = _boolean("HAPSIRA_DEBUG", "0")
CUDA_BLOCK = _integer("HAPSIRA_CUDA_BLOCK", 128)
# 2^17 against 2^18 on an H100, reference workload at 10^6: 75 against 79 ms in
# three paired runs (smaller chunks pace the copies better; 2^16 and below cost
# kernel time): benchmarks/results/h100_launch_sweep.json
CUDA_CHUNK = _integer("HAPSIRA_CUDA_CHUNK", 1 << 17)
CUDA_MAX_REGISTERS = _integer("HAPSIRA_CUDA_MAX_REGISTERS", 0, minimum=0)  # 0: numba decides

if TARGET == "cuda":
    _check_cuda_usable()
