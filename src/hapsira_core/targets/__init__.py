"""The compilation targets, one module or folder each; `active` is the one ``HAPSIRA_TARGET`` names.

This folder is the only place that imports numba-cuda or knows a target by
its name: the rest of the library asks `active` (the target's module) what
it needs. A target provides

=======================  ===================================================
``NAME``                 its name, as ``HAPSIRA_TARGET`` spells it
``hjit``                 compile a helper (device) function
``rsqrt``                ``1 / sqrt(x)``, the target's fastest form
``reciprocal``           (optional, default ``1.0 / x``) ``1 / x`` correctly
                         rounded, the target's fastest form (the error
                         norm's weights)
``KEEP_STAGES``          whether the dense output may reuse a step's stages
``ObjectKernel``         runs a per-object body over N objects (a subclass of
                         `hapsira_core.kernels.kernel.ObjectKernel`)
``code_options()``       the settings that change its generated code (a tuple
                         of values, part of every kernel's cache key)
``BOUNDS_CHECKS``        whether ``hjit(boundscheck=True)`` checks indices
``GUARDED_READS``        (optional) where it does not: whether params reads
                         at a computed index are rewritten to give NaN past
                         the row (`hapsira_core.kernels.guard`)
``DROPS_EXCEPTIONS``     (optional, default False) whether an exception raised
                         in a kernel can be lost (numba's parallel gufunc):
                         then the core prefills each status and checks it after
``HOST_WAITS``           (optional, default False) whether a kernel call leaves
                         the calling thread mostly waiting on a device: host-side
                         checks may then run beside it (a front's ``UnitsCheck``)
``kernels_started()``    (optional, with ``HOST_WAITS``) a context manager giving
                         an object whose ``then(callback)`` runs ``callback()``
                         once a kernel call inside has queued its first kernel
                         (or at the block's end): host work started so leaves
                         that kernel's inputs' copies alone
``is_device_array(x)``   whether ``x`` lives in the target's own memory
``device_empty(s, t)``   an array of shape ``s`` and dtype ``t`` in the
                         target's own memory, not initialised (numpy on the
                         host targets; on cuda a device array, the
                         simulator's too)
``to_device(x)``,        ``x`` moved into the target's memory and a numpy
``to_host(x)``           array of it (each the array itself where it is there
                         already: the host targets never copy). An
                         `ObjectKernel` reads an input and writes an output
                         that is in the target's memory in place (cuda: never
                         copied in or back), so that kernels called one after
                         another keep their arrays there
``device_memory()``      ``(free, total)`` bytes of the target's own memory,
                         or None (the host targets: none of their own)
``compact_rows(p, c)``   the entries of bounded rows, gathered where the rows
                         are: row ``r`` of ``c`` ``(R, k)`` counts ``c[r, 0]``
                         entries, the first ``cap`` written to ``p[r]``
                         ``(R, cap, 2)``. Returns on the host, int64:
                         ``(p[r, m, 0], p[r, m, 1], r)`` of the rows with
                         ``c[r, 0] <= cap``, ``(r, c[r, 0])`` of the others (to
                         run again with room), both in row order, and the
                         column sums of ``c``; on cuda the rows never cross
                         to the host (numpy on the host targets)
``item_column(k)``        ``(k, 1)`` int32 ``0, 1, ...`` in the target's memory
                         (made there: on cuda nothing crosses from the host)
``row_max(v)``            the largest entry of each row of ``v`` ``(R, C)``
                         float64: ``(R,)``, where ``v`` is
``row_offsets(c)``       each row of ``c`` ``(R, C)`` (non-negative ints) as
                         running sums before each entry: ``offsets`` ``(R, C +
                         1)`` int32 (0 first, the row's total last), where ``c``
                         is, and the largest row total (an int, on the host)
``bucket_sort(b, size)`` each row of ``b`` ``(R, C)`` (ints in ``0 .. size -
                         1``) sorted by bucket: ``order`` ``(R, C)`` int32,
                         entry indices grouped by bucket (within a bucket in
                         the target's own order), and ``starts`` ``(R, size +
                         1)`` int32, where each bucket begins; both where
                         ``b`` is (on cuda a block per row and atomics;
                         numpy on the host targets)
``declare_foreign(d)``   a C function of `hapsira_core.foreign` for this target
``XLA_PLATFORM``         the XLA platform its kernels run on inside JAX
                         (``"cpu"``, ``"CUDA"``, or None: none)
``xla_handler(x)``       the XLA FFI handler of an `XlaKernel` ``x``
``xla_mismatch(what)``   the message for a call from the other platform
``local_dask_cluster``  a Dask cluster on this machine suited to the target
``progress_min_chunk()`` (optional) the fewest objects per kernel call when
                         ``progress=True`` runs the objects in chunks
``LaneKernel``,          (optional) the lane loop's kernel (`hapsira_core.ivp.lanes`),
``lane_width()``,        the objects per core it steps at once (0: off) and
``lane_code_options(w)`` what its code depends on (CPU features); a target
                         without them runs ``HAPSIRA_LANES=auto`` per object
                         and refuses a width
=======================  ===================================================

A new target is one module (or folder) here, or in a folder named by
``HAPSIRA_TARGETS_PATH``; `hapsira_core.settings.TARGETS` lists them by name.
"""

import importlib
import os

from .. import settings

# Targets found through HAPSIRA_TARGETS_PATH are modules of this package too.
__path__ = list(__path__) + [os.path.abspath(p) for p in settings.TARGETS_PATH]


def load(name):
    """The module of the target ``name`` (imported once; cuda checks its GPU here)."""
    return importlib.import_module(f"{__name__}.{name}")


#: The module of ``settings.TARGET``.
active = load(settings.TARGET)

__all__ = ["active", "load"]
