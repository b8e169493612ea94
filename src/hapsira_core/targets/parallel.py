"""The ``parallel`` target: ``numba.njit`` code inside ``guvectorize(target="parallel")``."""

import numba
import numpy as np

from .. import settings
from ..kernels import kernel
from . import _host, _join
from ._join import stub  # noqa: F401
from ._host import (  # noqa: F401
    KEEP_STAGES,
    bucket_sort,
    compact_rows,
    declare_foreign,
    device_empty,
    device_memory,
    hjit,
    is_device_array,
    item_column,
    lane_code_options,
    lane_width,
    row_max,
    row_offsets,
    reciprocal,
    rsqrt,
    to_device,
    to_host,
)

NAME = "parallel"
#: numba compiles bounds checks into functions that ask for them (params read at
#: a computed index: `hapsira_core.ivp.checks.bounds_checked`).
BOUNDS_CHECKS = True
#: numba's parallel gufunc drops an exception raised outside a thread's first object:
#: the object's status is left as the core prefilled it (`hapsira_core.ivp.api`)
DROPS_EXCEPTIONS = True
XLA_PLATFORM = "cpu"
XLA_SIMULATED = False


def code_options():
    """The settings that change the generated code (part of every kernel's cache key)."""
    return (NAME, settings.DEBUG)


#: kernel id -> (kernel, its PrangeLoop): one loop per kernel and process, so that
#: a second XlaKernel of a kernel does not load the loop's code a second time
_LOOPS = {}


def xla_handler(xla):
    if isinstance(xla.kernel, _join.JoinedKernel):
        # the joined entry through the numpy call's trampoline (`JoinedKernel.native`):
        # a PrangeLoop would compile the whole body again
        return _host.xla_handler(xla, xla.kernel, parallel=True)
    entry = _LOOPS.get(id(xla.kernel))
    if entry is None or entry[0] is not xla.kernel:
        entry = _LOOPS[id(xla.kernel)] = (xla.kernel, _host.PrangeLoop(xla.kernel))
    return _host.xla_handler(xla, entry[1], parallel=True)


def xla_mismatch(what):
    return _host.xla_mismatch(NAME, what)


def local_dask_cluster(**options):
    """A Dask cluster on this machine for this target: one worker process,
    whose kernels use every core already."""
    return _host.local_dask_cluster(1, **options)


class ObjectKernel(kernel.ObjectKernel):
    TARGET = NAME
    code_options = staticmethod(code_options)

    def _source(self):
        names = ", ".join(a.name for a in self.args)
        # IEEE subnormals on every worker thread (hapsira_core.targets._floats:
        # a worker started from a JAX call inherits XLA's flush-to-zero)
        return (f"{_host.FLOATS_IMPORT}\n\n"
                f"def kernel({names}, unused):\n"
                f"    mode = ieee_floats()\n"
                f"    body({names})\n"
                f"    restore_floats(mode)\n")

    def _layout(self):
        # Every array is a gufunc input (outputs marked writable: numba wants
        # output dimensions defined by inputs); "->()" is a throwaway output.
        return ",".join("(" + ",".join(a.core) + ")" for a in self.args) + "->()"

    def _compile(self, function, cached):
        signature = numba.void(*(a.numba_type() for a in self.args), numba.types.int8[:])
        writable = tuple(a.name for a in self.args if a.output)
        return numba.guvectorize([signature], self._layout(), target="parallel",
                                 writable_args=writable, cache=cached)(function)

    def _eager(self, compiled):
        pass  # a gufunc with a signature is compiled (or loaded) when it is made

    def _run(self, compiled, arrays):
        if arrays[self.n_inputs].shape[0] > 0:
            # A failing object's NaNs are its own status, not a ufunc warning.
            with np.errstate(all="ignore"):
                compiled(*arrays)


class JoinedKernel(_join.JoinedKernel):
    """The per-object loop joined to the user's functions, as on cpu, run once per
    object on all cores (a ``prange`` over the objects, each call on its rows)."""
    TARGET = NAME
    LOOP = _join.ObjectLoop
    code_options = staticmethod(_host.joined_code_options)

    def _caller(self):
        return _join.trampoline(self._signature(), self.args)

    def native(self):
        """The trampoline that the numpy call runs, by its symbol: the JAX front's
        handler runs the entry as the numpy call does, once per object on all cores,
        the entry's address its first argument."""
        caller = self.compile()[1]
        signature = (numba.types.int64,) + tuple(self._signature())
        overload = caller.overloads[signature]
        return overload.fndesc.mangled_name, tuple(overload.signature.args)[1:], self.entry


class LaneKernel(_host.LaneKernel):
    """The lane loop on chunks of objects on all cores."""
    TARGET = NAME
    PARALLEL = True
    code_options = staticmethod(code_options)


class JoinedLaneKernel(_join.JoinedLaneKernel):
    """The lane loop joined to the user's functions, as on cpu, run on chunks of objects
    on all cores (the chunks of `LaneKernel`)."""
    TARGET = NAME
    PARALLEL = True
    code_options = staticmethod(_host.joined_code_options)
