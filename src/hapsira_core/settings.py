"""Settings read once from ``HAPSIRA_*`` environment variables at import.

=================  ==================================  =========
variable           meaning                             default
=================  ==================================  =========
``HAPSIRA_TARGET`` ``cpu``, ``parallel`` or ``cuda``   ``cpu``
``HAPSIRA_TARGETS_PATH``  more folders of targets      (none)
``HAPSIRA_CACHE``  kernels cached on disk (``0``/``1``)  ``1``
``HAPSIRA_CACHE_DIR``  where cached kernels live       ``~/.cache/hapsira-cowell``
``HAPSIRA_CACHE_MAX_MB``  cache size before pruning    ``1024``
``HAPSIRA_DEBUG``  numba debug info, bounds checks     ``0``
``HAPSIRA_FASTMATH``  shared reciprocals in user f   ``auto`` (cuda only)
``HAPSIRA_CUDA_BLOCK``  threads per block (cuda)       ``128``
``HAPSIRA_CUDA_CHUNK``  objects per launch (cuda)      ``131072``
``HAPSIRA_CUDA_MAX_REGISTERS``  register cap per thread  ``168`` (``0``: ptxas's choice)
``HAPSIRA_CUDA_FETCH``  resident threads fetch objects  ``1``
                   from a counter (cuda, ``0``/``1``)
``HAPSIRA_CUDA_INTERLEAVE``  explicit methods' working  ``auto``
                   rows interleaved across objects (cuda):
                   ``auto`` (``stm=True``), ``on``, ``off``
``HAPSIRA_LANES``  objects per core at once, in SIMD   ``auto`` (cpu, parallel)
                   lanes: ``auto``, ``on``, ``off`` or
                   a width
``HAPSIRA_LANES_BACKGROUND``  under ``auto``, a lane   ``1`` (cpu, parallel)
                   kernel not compiled yet compiled in
                   a background worker process while
                   calls run per object (``0``/``1``)
``HAPSIRA_JOIN``   the solve loop compiled once and     ``on`` (cpu, parallel)
                   joined to each user function
                   (``on``/``off``)
=================  ==================================  =========

A bad value raises `ValueError` naming the variable, the value and
what is valid. Settings cannot change after import: compiled code depends on
them, so change the environment and start a new process instead. Those that
change the generated code (the target, ``HAPSIRA_DEBUG``,
``HAPSIRA_CUDA_MAX_REGISTERS``, ``HAPSIRA_CUDA_FETCH``, ``HAPSIRA_CUDA_INTERLEAVE``) are
part of the kernel cache key (`hapsira_core.kernels.cache.code_settings`), so a warm
cache never serves a kernel built under other values. An unusable ``HAPSIRA_CACHE_DIR`` gives one
``CacheWarning`` and in-memory kernels.
"""

import os

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


def _target_names(folders):
    """The targets: every module or package in these folders whose name does not
    start with an underscore (``_host.py`` is code that targets share)."""
    names = set()
    for folder in folders:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(folder, entry)
            name, suffix = os.path.splitext(entry)
            if entry.startswith(("_", ".")):
                continue
            if suffix == ".py" or (not suffix and os.path.isfile(os.path.join(path, "__init__.py"))):
                names.add(name)
    return tuple(sorted(names))


#: Further folders searched for targets (``os.pathsep``-separated): a target is
#: one module or package there, as in ``hapsira_core/targets/``.
TARGETS_PATH = tuple(p for p in os.environ.get("HAPSIRA_TARGETS_PATH", "").split(os.pathsep) if p)
#: The names of the targets: the modules of ``hapsira_core/targets/`` (and of
#: ``HAPSIRA_TARGETS_PATH``). There is no other list of them.
TARGETS = _target_names((os.path.join(os.path.dirname(__file__), "targets"),) + TARGETS_PATH)
TARGET = _choice("HAPSIRA_TARGET", "cpu", TARGETS)
CACHE = _boolean("HAPSIRA_CACHE", "1")
CACHE_DIR = os.path.expanduser(os.environ.get(
    "HAPSIRA_CACHE_DIR",
    os.path.join(os.environ.get("XDG_CACHE_HOME", "~/.cache"), "hapsira-cowell")))
CACHE_MAX_MB = _integer("HAPSIRA_CACHE_MAX_MB", 1024)
DEBUG = _boolean("HAPSIRA_DEBUG", "0")
#: ``on`` or ``off``: whether the host targets compile the solve loop once per method and
#: state form and join it to each user function in LLVM
#: (`hapsira_core.targets._join`), instead of compiling the loop for every function.
JOIN = "on" if _boolean("HAPSIRA_JOIN", "1") else "off"
#: ``auto``, ``on`` or ``off``: whether a user's function is compiled with its
#: divisions rewritten into shared reciprocals (`hapsira_core.kernels.reciprocals`);
#: ``auto`` where the target asks for it (cuda: a float64 division costs tens of
#: instructions there), never on the host targets.
FASTMATH = {"auto": "auto", **{k: ("on" if v else "off") for k, v in _BOOLEANS.items()}}.get(
    _choice("HAPSIRA_FASTMATH", "auto", ("auto",) + tuple(_BOOLEANS)))
CUDA_BLOCK = _integer("HAPSIRA_CUDA_BLOCK", 128)
# 2^17: smaller chunks pace the copies better, and smaller still cost kernel time
CUDA_CHUNK = _integer("HAPSIRA_CUDA_CHUNK", 1 << 17)
#: Registers per thread the cuda target's kernels may use (0: as many as ptxas wants, up
#: to 255). 168 leaves 12 warps per SM (65,536 registers each on sm_70 to sm_90) where
#: the solver kernels of small states, uncapped, leave 8: most workloads run faster
#: with the extra warps, with the same bits.
CUDA_MAX_REGISTERS = _integer("HAPSIRA_CUDA_MAX_REGISTERS", 168, minimum=0)
#: Whether a cuda kernel launches only the threads that can be resident at once, each
#: taking its next object from an atomic counter until none is left
#: (`hapsira_core.targets.cuda.launch`), instead of one thread per object: a lane whose
#: object ends early takes another instead of idling while its warp's longest object runs
CUDA_FETCH = _boolean("HAPSIRA_CUDA_FETCH", "1")
#: Where the cuda target lays an explicit method's ``work`` rows out with the object axis
#: last (`hapsira_core.ivp.build.interleaves_work`): ``auto`` for the variational equations
#: of ``stm=True`` (measured faster there, slower for a loop-based array-form ``fun``),
#: ``on`` for every array-form kernel, ``off`` for none (each object's rows contiguous)
CUDA_INTERLEAVE = {"auto": "auto", **{k: ("on" if v else "off") for k, v in _BOOLEANS.items()}}.get(
    _choice("HAPSIRA_CUDA_INTERLEAVE", "auto", ("auto",) + tuple(_BOOLEANS)))


def _lanes(name, default):
    """``"auto"``, ``"on"`` (the host's width, always), ``0`` (off) or a lane width
    from 2 to 64."""
    raw = os.environ.get(name, default).strip().lower()
    if raw == "auto":
        return "auto"
    if raw in ("on", "true", "yes"):
        return "on"
    if raw in ("off", "0", "1", "false", "no"):
        return 0
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 2 <= value <= 64:
        raise ValueError(f"{name}={os.environ.get(name)!r} is not valid; expected 'auto', "
                         "'on', 'off' or a lane width from 2 to 64 (objects stepped at once "
                         "per core)")
    return value


#: ``"auto"``, ``"on"``, 0 (off) or a width: how many objects a core steps at once in the
#: SIMD lanes of the host targets (`hapsira_core.ivp.lanes`); ``on``: the width of the
#: host's vectors in float64 wherever the lane loop applies; ``auto``: that width where
#: it pays (`hapsira_core.targets._host.LaneKernel.runs_lanes`), else per object.
LANES = _lanes("HAPSIRA_LANES", "auto")
#: Whether, under ``HAPSIRA_LANES=auto``, a call of at least
#: `hapsira_core.targets._host.AUTO_LANES_MIN_OBJECTS` objects whose lane kernel is not
#: compiled yet (it runs per object) starts that compile in a background worker process
#: that fills the disk cache (`hapsira_core.ivp.compile_worker.in_background`), so that later
#: calls run lanes; never without a usable disk cache or for a kernel a new process
#: cannot import. The test suite turns it off (tests/conftest.py): a compile per call.
LANES_BACKGROUND = _boolean("HAPSIRA_LANES_BACKGROUND", "1")
