"""What the host targets (cpu, parallel) share: ``numba.njit`` functions, C called
by symbol, and XLA handlers that are numba ``cfunc``s."""

import math

import numba
import numpy as np

from .. import settings, xla_ffi as ffi
from ._foreign import declare_host as declare_foreign  # noqa: F401

#: On the host the dense output reuses the step's stages: an output time costs
#: what it costs in scipy (3 evaluations of f for DOP853, none for RK45/RK23).
KEEP_STAGES = True


def hjit(func=None, **options):
    """``numba.njit`` with IEEE floating-point errors (a division by zero gives
    inf or NaN, never a Python exception) and, with ``HAPSIRA_DEBUG``, bounds
    checks and debug info."""
    if func is None:
        return lambda f: hjit(f, **options)
    options.setdefault("cache", False)
    options.setdefault("error_model", "numpy")
    if settings.DEBUG:
        options.setdefault("boundscheck", True)
        options.setdefault("debug", True)
    return numba.njit(**options)(func)


def rsqrt(x):
    """``1 / sqrt(x)``: on the host a square root and a division."""
    return 1.0 / math.sqrt(x)


def cores():
    """The cores this process may run on."""
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else (os.cpu_count() or 1)


def local_dask_cluster(workers, **options):
    import distributed
    return distributed.LocalCluster(n_workers=workers, **options)


def is_device_array(value):
    """The host targets have no memory of their own."""
    return False


def xla_mismatch(name, what):
    return (f"hapsira: the {what} was built for HAPSIRA_TARGET={name} and runs "
            "on JAX's CPU platform, but this program runs on a GPU; put its inputs "
            "on the CPU (jax.device_put(x, jax.devices('cpu')[0])) or start Python "
            "with HAPSIRA_TARGET=cuda")


#: One parallel region at a time: XLA may run two of our calls at once on
#: two of its threads, and numba's workqueue threading layer aborts on
#: concurrent parallel regions (omp and tbb would oversubscribe the cores).
_PARALLEL_LOCK = np.zeros(1, dtype=np.int64)


def xla_handler(xla, parallel):
    """A cfunc that wraps XLA's buffers as arrays and runs the per-object loop."""
    loop = xla_loop(xla, parallel)
    wrong_frame = ffi._Message(
        f"hapsira: the {xla.what} was called with a call frame it does not expect "
        f"(expected the execute stage, {xla.n_inputs} arguments and "
        f"{len(xla.outputs)} results)", ffi._ERROR_INTERNAL)
    wrong_buffer = ffi._Message(
        f"hapsira: the {xla.what} got buffers whose dtypes, ranks or shapes do not "
        "agree with its declared arguments", ffi._ERROR_INTERNAL)
    # numba cannot raise out of a cfunc: an exception in the loop (a bounds check
    # of `checks.bounds_checked`) was printed and the outputs left as garbage
    raised = ffi._Message(
        f"hapsira: the {xla.what} raised inside the kernel: params: a read past the "
        "end of a params row, at an index computed at run time (bounds check); no "
        "result is returned", ffi._ERROR_INTERNAL)
    xla._messages += [wrong_frame, wrong_buffer, raised]
    lines = ["def handler(frame_pointer):",
             "    frame = _address(frame_pointer)",
             "    extension = _i64(frame + F_EXTENSION)",
             "    if extension != 0 and _i32(extension + E_TYPE) == EXTENSION_METADATA:",
             "        return _metadata(frame, extension, VERSION_ERROR)",
             "    if (_i32(frame + F_STAGE) != STAGE_EXECUTE",
             f"            or _i64(frame + F_NARGS) != {xla.n_inputs}",
             f"            or _i64(frame + F_NRETS) != {len(xla.outputs)}):",
             "        return _error(frame, WRONG_FRAME)",
             "    arguments = _i64(frame + F_ARGS)",
             "    results = _i64(frame + F_RETS)"]
    names = []
    for index, arg in enumerate(xla.args):
        table, slot = ("results", index - xla.n_inputs) if arg.output \
            else ("arguments", index)
        rank = len(arg.core) + (1 if arg.per_object else 0)
        code = ffi._DTYPE_CODES[arg.dtype]
        name = f"a{index}"
        shape = ", ".join(f"_dim(b, {axis})" for axis in range(rank)) + ","
        lines += [f"    b = _i64({table} + {8 * slot})",
                  f"    if _i32(b + B_DTYPE) != {code} or _i64(b + B_RANK) != {rank}:",
                  "        return _error(frame, WRONG_BUFFER)",
                  f"    _set_i64(POINTERS + {8 * index}, _i64(b + B_DATA))",
                  f"    {name} = numba.carray(_pointer(_i64(b + B_DATA)), ({shape}), "
                  f"np.{arg.dtype.name})"]
        names.append(name)
    same, n_or_one = xla._shape_rules()
    checks = [f"a{i}.shape[{d}] != a{j}.shape[{e}]" for (i, d), (j, e) in same] + \
             [f"(a{i}.shape[0] != a{xla.n_inputs}.shape[0] and a{i}.shape[0] != 1)"
              for i in n_or_one]
    if checks:
        lines += [f"    if {' or '.join(checks)}:",
                  "        return _error(frame, WRONG_BUFFER)"]
    call = ["        failed = False",
            "        try:",
            f"            loop({', '.join(names)})",
            "        except Exception:",
            "            failed = True"]
    if parallel:
        call = ["        while not _try_lock(LOCK):",
                "            _yield_thread()"] + call + ["        _unlock(LOCK)"]
    call += ["        if failed:",
             "            return _error(frame, RAISED)"]
    lines += [f"    if a{xla.n_inputs}.shape[0] > 0:"] + call + ["    return _pointer(0)"]
    namespace = ffi._frame_namespace()
    namespace.update(loop=loop, WRONG_FRAME=wrong_frame.address,
                     WRONG_BUFFER=wrong_buffer.address, RAISED=raised.address,
                     POINTERS=xla.pointers.ctypes.data,
                     LOCK=_PARALLEL_LOCK.ctypes.data, _try_lock=ffi._try_lock,
                     _unlock=ffi._unlock, _yield_thread=ffi._yield_thread)
    exec(compile("\n".join(lines), f"<hapsira xla handler {xla.name}>", "exec"), namespace)
    return numba.cfunc(ffi._HANDLER_SIGNATURE, error_model="numpy")(namespace["handler"])


def xla_loop(xla, parallel):
    """``for i in prange(n): body(rows of i)``, compiled for cpu or parallel.

    The same per-object body as the numpy call, so the same numbers; a
    per-object input with one row is shared by every object.
    """
    rows = []
    for arg in xla.args:
        if not arg.per_object:
            rows.append(arg.name)
        elif arg.output:
            rows.append(f"{arg.name}[i]")
        else:
            rows.append(f"{arg.name}[i if {arg.name}.shape[0] != 1 else 0]")
    first_out = xla.outputs[0].name
    # prange's index is unsigned; as int64 it unifies with the 0 of a
    # shared row (uint64 with int64 would give a float index).
    source = (f"def loop({', '.join(a.name for a in xla.args)}):\n"
              f"    for j in prange({first_out}.shape[0]):\n"
              f"        i = np.int64(j)\n"
              f"        body({', '.join(rows)})\n")
    namespace = {"body": xla.kernel.body, "prange": numba.prange, "np": np}
    exec(compile(source, f"<hapsira xla loop {xla.name}>", "exec"), namespace)
    return numba.njit(error_model="numpy", parallel=parallel)(
        namespace["loop"])

