"""The size check: a call whose outputs would not fit in memory is refused before allocating.

Without it, 1e6 objects x 1440 output times (70 GB of states) end in numpy's
``MemoryError`` after a long wait, or, where Linux overcommits memory, in the
process being killed halfway through the propagation.

The rule: the arrays one call allocates (outputs plus per-object working
memory, `hapsira_core.ivp.Problem.output_shapes`) must not exceed the
*limit*, which is

1. `LIMIT` when set (bytes; for tests and programs),
2. else ``HAPSIRA_MEMORY_LIMIT`` (``8GB``, ``512MiB``, ``2e9``, or ``off``),
   read at each call, so that it can be changed at run time,
3. else the memory available now (what the OS can hand out without swapping:
   free plus reclaimable cache; psutil's ``available``, ``MemAvailable`` of
   ``/proc/meminfo``), lowered to what a cgroup (container) limit still allows.

A result is a view of those arrays (no copy), so the limit applies once. Reading the
available memory costs time at each call, so a reading under `RECENT_S` old decides
a call that needs at most a tenth of it without reading again.
"""

import math
import os
import re
import time

__all__ = ["OutputTooLargeError", "LIMIT", "ENV", "limit", "available", "check", "nbytes",
           "format_bytes", "parse_size"]

#: The environment variable of the limit.
ENV = "HAPSIRA_MEMORY_LIMIT"
#: Bytes; when not None it wins over the environment and the available memory.
LIMIT = None

#: Seconds for which a reading of the available memory decides calls that need at most
#: a tenth of it (`check`, through `recent`).
RECENT_S = 1.0
_READINGS = {}  # (`recent`) of the available memory
_AVAILABLE_NOW = "the memory available now"

_UNITS = {"": 1, "b": 1, "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
          "kib": 2 ** 10, "mib": 2 ** 20, "gib": 2 ** 30, "tib": 2 ** 40}


class OutputTooLargeError(MemoryError):
    """The outputs of a call would not fit in memory; nothing was allocated."""


def parse_size(text, name=ENV):
    """``"8GB"``, ``"512MiB"``, ``"2e9"`` -> bytes; ``"off"``/``"none"`` -> inf."""
    raw = str(text).strip()
    if raw.lower() in ("off", "none", "inf", "unlimited"):
        return math.inf
    match = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)", raw)
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise ValueError(f"{name}={text!r} is not valid; expected a size such as 8GB, "
                         "512MiB or 2e9 (bytes), or off")
    return float(match.group(1)) * _UNITS[unit]


def _meminfo_available():
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _cgroup_room():
    """Bytes a cgroup v2 memory limit still allows (None without one)."""
    try:
        with open("/sys/fs/cgroup/memory.max") as limit_file:
            raw = limit_file.read().strip()
        if raw == "max":
            return None
        with open("/sys/fs/cgroup/memory.current") as current:
            return max(int(raw) - int(current.read().strip()), 0)
    except (OSError, ValueError):
        return None


def available():
    """Bytes of memory available to this process now (inf if it cannot be told)."""
    try:
        import psutil
        free = psutil.virtual_memory().available
    except ImportError:
        free = _meminfo_available()
        if free is None:
            try:
                free = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            except (ValueError, OSError, AttributeError):
                return math.inf
    room = _cgroup_room()
    return float(free if room is None else min(free, room))


def limit():
    """``(bytes, where the number comes from)`` of the current limit."""
    if LIMIT is not None:
        return float(LIMIT), "hapsira_core.memory.LIMIT"
    raw = os.environ.get(ENV, "").strip()
    if raw:
        return parse_size(raw), ENV
    return available(), _AVAILABLE_NOW


def recent(readings, owner, needed, seconds, read):
    """Free bytes of ``owner``'s memory: ``read()``, or the last reading kept in
    ``readings`` (a dict) where it is under ``seconds`` old and at least ten times
    ``needed``, so that a call that small is decided by it whatever changed since; a
    new reading is kept. The host's available memory (`check`) and the cuda target's
    free GPU memory (its chunk size) are read so."""
    kept = readings.get(id(owner))
    if (kept is not None and kept[0] is owner and time.monotonic() - kept[1] < seconds
            and 10 * needed <= kept[2]):
        return kept[2]
    value = read()
    readings[id(owner)] = (owner, time.monotonic(), value)  # (owner: its id stays its)
    return value


def format_bytes(count):
    """``6.9 GB``: decimal units, three significant digits."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.3g} {unit}"
    return f"{int(count)} B"


def nbytes(shapes):
    """Bytes of ``{name: (shape, dtype)}`` arrays."""
    import numpy as np
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in shapes.values())


def check(shapes, n_objects, n_times, what=None, way_out=None):
    """Refuse (`OutputTooLargeError`) arrays ``{name: (shape, dtype)}`` over the limit.

    ``n_objects``, ``n_times``: told in the message, with the size and the way
    out (Dask arrays in, Zarr out); ``what``: the outputs' description instead
    (step records: ``"N objects x S steps (...)"``); ``way_out``: the way out
    instead, for arrays that are not a propagation's.
    """
    needed = nbytes(shapes)
    if LIMIT is None and not os.environ.get(ENV, "").strip():
        allowed, source = recent(_READINGS, None, needed, RECENT_S, available), _AVAILABLE_NOW
    else:
        allowed, source = limit()
    if needed <= allowed:
        return
    if what is None:
        what = f"{n_objects} objects x {n_times} output times"
    if way_out is None:
        way_out = ("Pass the initial states as Dask arrays chunked along the object axis and "
                   "write the result to Zarr chunk by chunk (res.to_zarr(path)), see "
                   "docs/dask.md; or propagate fewer objects or output times per call")
    raise OutputTooLargeError(
        f"the outputs of {what} need "
        f"{format_bytes(needed)}, more than the {format_bytes(allowed)} allowed ({source}); "
        f"nothing was allocated. {way_out}")
