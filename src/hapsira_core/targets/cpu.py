"""The ``cpu`` target: ``numba.njit`` code and a loop over objects on one core."""

import numba

from .. import settings
from . import _host
from ._join import stub  # noqa: F401
from . import _join
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

NAME = "cpu"
#: numba compiles bounds checks into functions that ask for them (params read at
#: a computed index: `hapsira_core.ivp.checks.bounds_checked`).
BOUNDS_CHECKS = True
XLA_PLATFORM = "cpu"
XLA_SIMULATED = False


def code_options():
    """The settings that change the generated code (part of every kernel's cache key)."""
    return (NAME, settings.DEBUG)


def xla_handler(xla):
    return _host.xla_handler(xla, xla.kernel, parallel=False)


def xla_mismatch(what):
    return _host.xla_mismatch(NAME, what)


def local_dask_cluster(**options):
    """A Dask cluster on this machine for this target: one single-threaded
    worker process per core, each running its own objects."""
    return _host.local_dask_cluster(_host.cores(), **options)


class ObjectKernel(_host.ObjectLoop):
    TARGET = NAME
    code_options = staticmethod(code_options)


class JoinedKernel(_join.JoinedKernel):
    TARGET = NAME
    LOOP = _join.ObjectLoop
    code_options = staticmethod(_host.joined_code_options)


class LaneKernel(_host.LaneKernel):
    """The lane loop over all objects on one core."""
    TARGET = NAME
    PARALLEL = False
    code_options = staticmethod(code_options)


class JoinedLaneKernel(_join.JoinedLaneKernel):
    """The lane loop joined to the user's functions, over all objects on one core."""
    TARGET = NAME
    PARALLEL = False
    code_options = staticmethod(_host.joined_code_options)
