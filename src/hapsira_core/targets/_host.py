"""What the host targets (cpu, parallel) share: ``numba.njit`` functions, C called
by symbol, and XLA handlers that are numba ``cfunc``s."""

import math
import sys
import warnings

import numba
import numpy as np

from .. import settings, xla_ffi as ffi
from ..kernels import cache, kernel
from ..kernels.fingerprint import fingerprint
from . import _floats
from ._foreign import declare_host as declare_foreign  # noqa: F401

#: On the host the dense output reuses the step's stages: an output time costs
#: what it costs in scipy (3 evaluations of f for DOP853, none for RK45/RK23).
KEEP_STAGES = True


#: What numba would add to every function and a kernel never uses (it calls its
#: functions natively): a CPython wrapper and a C callback wrapper. Building them was
#: about a third of a kernel's compile time (DOP853, a 2-state f, 2-core machine: a
#: second kernel 13.7 s with them, 8.6 s without), and CI is mostly compilation.
_NO_WRAPPERS = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


class HostFunction(numba.core.registry.CPUDispatcher):
    """An `hjit` function on the host: compiled without numba's Python wrappers
    (`_NO_WRAPPERS`); called from Python, it calls a twin compiled with them (made on
    the first such call), so that it stays a plain callable for users and tests."""

    def __call__(self, *args, **kwargs):
        twin = self.__dict__.get("_python_twin")
        if twin is None:
            options = {name: value for name, value in self.targetoptions.items()
                       if name not in _NO_WRAPPERS and name != "nopython"}
            twin = self.__dict__["_python_twin"] = numba.njit(**options)(self.py_func)
        return twin(*args, **kwargs)


def hjit(func=None, **options):
    """``numba.njit`` with IEEE floating-point errors (a division by zero gives
    inf or NaN, never a Python exception) and, with ``HAPSIRA_DEBUG``, bounds
    checks and debug info; a `HostFunction`."""
    if func is None:
        return lambda f: hjit(f, **options)
    options.setdefault("cache", False)
    options.setdefault("error_model", "numpy")
    if settings.DEBUG:
        options.setdefault("boundscheck", True)
        options.setdefault("debug", True)
    for name, value in _NO_WRAPPERS.items():
        options.setdefault(name, value)
    compiled = numba.njit(**options)(func)
    if type(compiled) is numba.core.registry.CPUDispatcher:
        compiled.__class__ = HostFunction
    return compiled


def rsqrt(x):
    """``1 / sqrt(x)``: on the host a square root and a division."""
    return 1.0 / math.sqrt(x)


def reciprocal(x):
    """``1 / x``: on the host a division."""
    return 1.0 / x


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


def device_empty(shape, dtype=np.float64):
    """An array in the target's own memory, not initialised: on the host, numpy's."""
    return np.empty(shape, dtype)


def to_device(array):
    """``array`` in the target's own memory: on the host, the array itself (no copy)."""
    return np.asarray(array)


def to_host(array):
    """``array`` as a numpy array: on the host, the array itself (no copy)."""
    return np.asarray(array)


def device_memory():
    """``(free, total)`` bytes of the target's own memory: None (returned), the host
    targets have none."""


def compact_rows(pairs, counts):
    """The entries of bounded rows, gathered (`hapsira_core.targets`): numpy, on the host.

    ``pairs`` ``(R, cap, 2)`` and ``counts`` ``(R, k)`` integers: row ``r`` holds
    ``counts[r, 0]`` entries, of which only the first ``cap`` are written. Returns int64
    arrays: ``entries`` ``(K, 3)``, ``(pairs[r, m, 0], pairs[r, m, 1], r)`` for every
    ``m < counts[r, 0]`` of every row with ``counts[r, 0] <= cap``, in row order;
    ``overflow`` ``(V, 2)``, ``(r, counts[r, 0])`` of every row with more than ``cap``,
    in row order; ``sums`` ``(k,)``, the sums of the columns of ``counts``.
    """
    pairs, counts = np.asarray(pairs), np.asarray(counts)
    found = counts[:, 0]
    hit = np.flatnonzero(found)
    fits = hit[found[hit] <= pairs.shape[1]]
    kept = np.arange(pairs.shape[1])[None, :] < found[fits][:, None]
    entries = np.empty((int(np.count_nonzero(kept)), 3), np.int64)
    entries[:, 0] = pairs[fits, :, 0][kept]
    entries[:, 1] = pairs[fits, :, 1][kept]
    entries[:, 2] = np.broadcast_to(fits[:, None], kept.shape)[kept]
    over = hit[found[hit] > pairs.shape[1]]
    overflow = np.stack((over, found[over]), axis=1).astype(np.int64)
    return entries, overflow, counts.sum(axis=0, dtype=np.int64)


def row_max(values):
    """The largest entry of each row of ``values`` ``(R, C)``: ``(R,)`` (numpy, on the
    host; `hapsira_core.targets`)."""
    return np.asarray(values).max(axis=1, initial=-np.inf)


def item_column(count):
    """``(count, 1)`` int32 ``0, 1, ...`` (numpy, on the host; `hapsira_core.targets`)."""
    return np.arange(count, dtype=np.int32).reshape(-1, 1)


def row_offsets(counts):
    """Where each entry's share of its row begins (numpy, on the host;
    `hapsira_core.targets`): ``counts`` ``(R, C)`` non-negative ints; returns ``offsets``
    ``(R, C + 1)`` int32, each row's running sums before each entry (0 first, the row's
    total last), and the largest row total (an int, on the host)."""
    counts = np.asarray(counts)
    rows, columns = counts.shape
    offsets = np.zeros((rows, columns + 1), np.int32)
    np.cumsum(counts, axis=1, out=offsets[:, 1:])
    return offsets, int(offsets[:, columns].max()) if rows else 0


def bucket_sort(buckets, size):
    """Each row's entries sorted by bucket (numpy, on the host; `hapsira_core.targets`):
    ``buckets`` ``(R, C)`` ints in ``0 .. size - 1``; returns ``order`` ``(R, C)`` int32,
    each row's entry indices grouped by bucket in bucket order (stable here: the
    target's order within a bucket is its own), and ``starts`` ``(R, size + 1)`` int32,
    where each bucket's entries begin (the last, the row's length)."""
    buckets = np.asarray(buckets)
    rows, columns = buckets.shape
    order = np.argsort(buckets, axis=1, kind="stable").astype(np.int32)
    flat = (np.arange(rows, dtype=np.int64)[:, None] * size + buckets).ravel()
    starts = np.zeros((rows, size + 1), np.int64)
    starts[:, 1:] = np.bincount(flat, minlength=rows * size).reshape(rows, size)
    return order, np.cumsum(starts, axis=1).astype(np.int32)


def xla_mismatch(name, what):
    return (f"hapsira: the {what} was built for HAPSIRA_TARGET={name} and runs "
            "on JAX's CPU platform, but this program runs on a GPU; put its inputs "
            "on the CPU (jax.device_put(x, jax.devices('cpu')[0])) or start Python "
            "with HAPSIRA_TARGET=cuda")


#: what a host kernel's source imports to run each object with IEEE subnormals
FLOATS_IMPORT = "from hapsira_core.targets._floats import ieee_floats, restore_floats"

#: One parallel region at a time: XLA may run two of our calls at once on
#: two of its threads, and numba's workqueue threading layer aborts on
#: concurrent parallel regions (omp and tbb would oversubscribe the cores).
_PARALLEL_LOCK = np.zeros(1, dtype=np.int64)

# The handler's table of what differs from process to process (a cached
# handler must not hold an address): slots, in int64s, from the table's start.
_WRONG_FRAME, _WRONG_BUFFER, _RAISED, _VERSION, _LOCK, _POINTERS = range(6)
#: handler key -> (table, messages, cfunc): one per kernel and process
_HANDLERS = {}
#: handler key -> the globals its generated module takes (see `handler_globals`)
_GLOBALS = {}


def xla_handler(xla, loop, parallel):
    """A cfunc that wraps XLA's buffers as arrays and runs ``loop`` on them.

    ``loop``: an `ObjectKernel` taking the XLA kernel's arguments (the numpy
    front's own kernel on cpu, a prange loop on parallel; a joined kernel on
    either, whose `native` function the handler calls), compiled or loaded
    from the on-disk cache. The cfunc calls the loop's compiled code by symbol
    (`_native_call`) instead of linking it in, so that nothing of the loop is
    compiled again here.

    The cfunc itself (reading the call frame, checking and wrapping the
    buffers: about 20 s of numba on a loaded 2-core machine, most of a warm
    process's first JAX call before this was cached) is a generated module
    under ``HAPSIRA_CACHE_DIR``, cached by numba like the kernels, where the
    loop is. What it needs that differs from process to process (the
    addresses of the error messages, of the parallel lock, of
    ``xla.pointers``) it reads from a table found by a symbol name
    (``llvmlite.binding.add_symbol``), never from a constant frozen in.

    So a new process with a warm cache loads the loop and the handler instead of
    compiling them again (docs/jax.md, "Start-up").
    """
    entry, argtypes, address = _entry(loop)
    source = _handler_source(xla, parallel)
    key = fingerprint(source, xla.what, entry, loop.code_options(),
                      cache.library_fingerprint(), *([address] if address else []))
    xla._loop = loop  # its compiled code must outlive the handler
    if key in _HANDLERS:  # another XlaKernel of the same kernel and name in this process
        table, messages, handler = _HANDLERS[key]
        xla.pointers = table[_POINTERS:]
        return handler
    messages = _messages(xla)
    table = np.zeros(_POINTERS + len(xla.args), dtype=np.int64)
    table[:_POINTERS] = [m.address for m in messages] + [_PARALLEL_LOCK.ctypes.data]
    symbol = f"hapsira_xla_table_{key}"
    import llvmlite.binding as llvm
    llvm.add_symbol(symbol, table.ctypes.data)
    namespace = ffi._frame_namespace()
    del namespace["VERSION_ERROR"]  # an address: read from the table instead
    namespace.update(run_loop=_native_call(entry, argtypes, address),
                     _table=_symbol_address(symbol), _try_lock=ffi._try_lock, _unlock=ffi._unlock,
                     _yield_thread=ffi._yield_thread, _ieee_floats=_floats.ieee_floats,
                     _restore_floats=_floats.restore_floats)
    _GLOBALS[key] = namespace
    handler = _handler_cfunc(key, source, cached=settings.CACHE and loop.recipe is not None)
    xla.pointers = table[_POINTERS:]
    _HANDLERS[key] = (table, messages, handler)
    return handler


def handler_globals(key):
    """The globals of the generated handler module ``key`` (its helpers, the loop's
    call and its table's symbol), registered by `xla_handler` before it loads the
    module; empty where it did not (numba importing an old module by name)."""
    return _GLOBALS.get(key, {})


_HANDLER_PRELUDE = """from hapsira_core.targets._host import handler_globals

globals().update(handler_globals({key!r}))


"""


def _handler_cfunc(key, source, cached):
    """The compiled handler: from (or into) the disk cache, or made in memory.

    A cache entry numba cannot load is removed and built again once, with a
    warning, as for the kernels (`hapsira_core.kernels.kernel.ObjectKernel._build`).
    """
    for attempt in range(2):
        if cached:
            function = cache.load_module(f"xla_{key}", _HANDLER_PRELUDE.format(key=key)
                                         + source).handler
        else:
            namespace = dict(_GLOBALS[key])
            exec(compile(source, f"<hapsira xla handler {key}>", "exec"), namespace)
            function = namespace["handler"]
        try:
            return numba.cfunc(ffi._HANDLER_SIGNATURE, error_model="numpy",
                               cache=cached)(function)
        except Exception as error:
            if not cached or attempt or not cache.is_corruption(error):
                raise
            name = f"hapsira_kernel_xla_{key}"
            warnings.warn(f"hapsira cache: the entry {name} could not be loaded "
                          f"({type(error).__name__}: {error}); rebuilding it",
                          cache.CacheWarning, stacklevel=4)
            cache.remove(name)
            sys.modules.pop(name, None)


def _messages(xla):
    """The handler's errors, in the order of the table's first slots."""
    wrong_frame = ffi._Message(
        f"hapsira: the {xla.what} was called with a call frame it does not expect "
        f"(expected the execute stage, {xla.n_inputs} arguments and "
        f"{len(xla.outputs)} results)", ffi._ERROR_INTERNAL)
    wrong_buffer = ffi._Message(
        f"hapsira: the {xla.what} got buffers whose dtypes, ranks or shapes do not "
        "agree with its declared arguments", ffi._ERROR_INTERNAL)
    raised = ffi._Message(ffi.raised_text(xla.what), ffi._ERROR_INTERNAL)
    return [wrong_frame, wrong_buffer, raised, ffi._VERSION_MESSAGE]


def _handler_source(xla, parallel):
    """The handler's Python source: the same for every process (no addresses)."""
    def slot(index):
        return f"_i64(table + {8 * index})"

    lines = ["def handler(frame_pointer):",
             "    table = _table()",
             "    frame = _address(frame_pointer)",
             "    extension = _i64(frame + F_EXTENSION)",
             "    if extension != 0 and _i32(extension + E_TYPE) == EXTENSION_METADATA:",
             f"        return _metadata(frame, extension, {slot(_VERSION)})",
             "    if (_i32(frame + F_STAGE) != STAGE_EXECUTE",
             f"            or _i64(frame + F_NARGS) != {xla.n_inputs}",
             f"            or _i64(frame + F_NRETS) != {len(xla.outputs)}):",
             f"        return _error(frame, {slot(_WRONG_FRAME)})",
             "    arguments = _i64(frame + F_ARGS)",
             "    results = _i64(frame + F_RETS)"]
    names = []
    for index, arg in enumerate(xla.args):
        table, slot_index = ("results", index - xla.n_inputs) if arg.output \
            else ("arguments", index)
        rank = len(arg.core) + (1 if arg.per_object else 0)
        code = ffi._DTYPE_CODES[arg.dtype]
        name = f"a{index}"
        shape = ", ".join(f"_dim(b, {axis})" for axis in range(rank)) + ","
        lines += [f"    b = _i64({table} + {8 * slot_index})",
                  f"    if _i32(b + B_DTYPE) != {code} or _i64(b + B_RANK) != {rank}:",
                  f"        return _error(frame, {slot(_WRONG_BUFFER)})",
                  f"    _set_i64(table + {8 * (_POINTERS + index)}, _i64(b + B_DATA))",
                  f"    {name} = numba.carray(_pointer(_i64(b + B_DATA)), ({shape}), "
                  f"np.{arg.dtype.name})"]
        names.append(name)
    same, n_or_one = xla._shape_rules()
    checks = [f"a{i}.shape[{d}] != a{j}.shape[{e}]" for (i, d), (j, e) in same] + \
             [f"(a{i}.shape[0] != a{xla.n_inputs}.shape[0] and a{i}.shape[0] != 1)"
              for i in n_or_one]
    if checks:
        lines += [f"    if {' or '.join(checks)}:",
                  f"        return _error(frame, {slot(_WRONG_BUFFER)})"]
    # the loop restores the mode per object; this restores it after a raise too
    call = ["        mode = _ieee_floats()",
            f"        ok = run_loop(({', '.join(names)},))",
            "        _restore_floats(mode)"]
    if parallel:
        call = [f"        lock = {slot(_LOCK)}",
                "        while not _try_lock(lock):",
                "            _yield_thread()"] + call + ["        _unlock(lock)"]
    call += ["        if not ok:", f"            return _error(frame, {slot(_RAISED)})"]
    lines += [f"    if a{xla.n_inputs}.shape[0] > 0:"] + call + ["    return _pointer(0)"]
    return "\n".join(lines) + "\n"


def _symbol_address(symbol):
    """An intrinsic ``() -> int64``: the address that the JIT gives the symbol
    ``symbol`` (set per process with ``llvmlite.binding.add_symbol``)."""
    from llvmlite import ir
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def address(typingctx):
        def codegen(context, builder, signature, args):
            module = builder.module
            try:
                variable = module.get_global(symbol)
            except KeyError:
                variable = ir.GlobalVariable(module, ir.IntType(8), symbol)
                variable.linkage = "external"
            return builder.ptrtoint(variable, ir.IntType(64))
        return types.int64(), codegen

    return address


def _entry(loop):
    """``(symbol, argument types, address)`` of the compiled ``loop``'s native function:
    a dispatcher's overload, or what runs a joined kernel (`hapsira_core.targets._join`:
    its entry, or parallel's trampoline, which takes the entry's address first: then
    ``address`` is the entry's symbol, else None)."""
    compiled = loop.compile()
    native = getattr(loop, "native", None)
    if native is not None:
        return native()
    signature = loop._signature()
    compiled.compile(signature)  # loaded already: returns at once
    overload = compiled.overloads[tuple(signature)]
    return overload.fndesc.mangled_name, tuple(overload.signature.args), None


def _native_call(symbol, argtypes, address=None):
    """An intrinsic ``call((a0, a1, ...)) -> bool`` that runs the compiled function
    ``symbol`` (numba's calling convention, returning nothing, taking ``argtypes``)
    and says whether it returned without raising. With ``address`` (a symbol), the
    function takes the int64 address of that symbol's function first, then ``argtypes``.

    A numba function calling a dispatcher links a copy of the callee's LLVM
    module into its own and optimises and generates machine code for all of
    it again: for a solver kernel that is most of its compile time. This call
    declares the callee's symbol instead; the JIT resolves it to the code
    already loaded (the caller keeps the callee loaded, and loads it first).
    """
    from llvmlite import ir
    from numba.core import cgutils, errors, types
    from numba.core.cgutils import unpack_tuple
    from numba.extending import intrinsic

    expected = types.Tuple(argtypes)

    @intrinsic
    def call(typingctx, arrays):
        if arrays != expected:
            raise errors.TypingError(f"expected {expected}, got {arrays}")

        def codegen(context, builder, signature, args):
            values = unpack_tuple(builder, args[0], len(expected))
            types_in = argtypes
            if address is not None:
                target = cgutils.get_or_insert_function(
                    builder.module, context.call_conv.get_function_type(types.none, argtypes),
                    address)
                values = [builder.ptrtoint(target, ir.IntType(64))] + list(values)
                types_in = (types.int64,) + tuple(argtypes)
            function_type = context.call_conv.get_function_type(types.none, types_in)
            function = cgutils.get_or_insert_function(builder.module, function_type, symbol)
            status, _ = context.call_conv.call_function(builder, function, types.none,
                                                        types_in, values)
            return builder.not_(status.is_error)
        return types.boolean(arrays), codegen

    return call


def joined_code_options():
    """The code options of a joined kernel (`hapsira_core.targets._join`): the same on
    cpu and parallel, which share its per-object loop and so its cache entries."""
    return ("host", settings.DEBUG)


class ObjectLoop(kernel.ObjectKernel):
    """``for i in range(n): body(rows of i)`` on one core, one njit function: the cpu
    target's kernel, and the loop that a joined kernel (`hapsira_core.targets._join`)
    compiles once per configuration on either host target."""

    def _source(self):
        names, rows, first_out = self._call_parts()
        # each object with IEEE subnormals, whatever the calling thread's mode
        # (hapsira_core.targets._floats: XLA's threads flush them to zero)
        return (f"{FLOATS_IMPORT}\n\n"
                f"def kernel({names}):\n"
                f"    for i in range({first_out}.shape[0]):\n"
                f"        mode = ieee_floats()\n"
                f"        body({rows})\n"
                f"        restore_floats(mode)\n")

    def _compile(self, function, cached):
        return numba.njit(error_model="numpy", cache=cached)(function)

    def _run(self, compiled, arrays):
        compiled(*arrays)


#: what the source of `prange_over_objects` imports
PRANGE_IMPORTS = "import numba as _numba\nimport numpy as _np\n"


def _prange(header, before, count, j, i, rows, call, floats):
    """The source of a function that runs ``call`` once per index on all cores: its
    ``header`` (the ``def`` line), the lines ``before``, then ``for j in prange(count)``
    with ``i = int64(j)``, the lines ``rows`` and ``call`` (with ``floats``, run with IEEE
    subnormals: `FLOATS_IMPORT`); the names of `PRANGE_IMPORTS`.

    prange's index is unsigned; as int64 it unifies with the 0 of a shared row (uint64
    with int64 would give a float index) and slices as the serial loop's does. An index
    whose call raised (a bounds check) is never marked done: numba's prange drops an
    exception raised outside a thread's first index, and this raises it again after
    the parallel region, where the caller sees it (without it the JAX front on parallel
    returned garbage statuses for a params read past the row)."""
    run = [call]
    if floats:
        run = ["mode = ieee_floats()", call, "restore_floats(mode)"]
    body = [f"{i} = _np.int64({j})", *rows, *run, f"done[{i}] = True"]
    return (f"{header}\n"
            + "".join(f"    {line}\n" for line in before)
            + f"    done = _np.zeros({count}, _np.bool_)\n"
            f"    for {j} in _numba.prange({count}):\n"
            + "".join(f"        {line}\n" for line in body)
            + f"    for {i} in range({count}):\n"
            f"        if not done[{i}]:\n"
            f"            raise IndexError('index is out of bounds')\n")


def prange_over_objects(header, first_out, call, floats=True):
    """The source of a function that runs ``call`` once per object on all cores
    (`_prange`): its ``header`` (the ``def`` line), the array ``first_out`` whose first
    axis counts the objects, ``call`` (a statement, on object ``i``'s rows) and, with
    ``floats``, each object run with IEEE subnormals. `PrangeLoop` calls a kernel's
    body, the joined kernels' trampoline their entry
    (`hapsira_core.targets._join.trampoline`)."""
    return _prange(header, [], f"{first_out}.shape[0]", "j", "i", [], call, floats)


class PrangeLoop(kernel.ObjectKernel):
    """``for i in prange(n): body(rows of i)``: an `ObjectKernel`'s body on all cores,
    as one njit function that a cfunc can call (the parallel target's own kernel
    is a gufunc, which cannot be called from compiled code).

    The same per-object body as the numpy call, so the same numbers; a
    per-object input with one row is shared by every object. Cached on disk
    as an entry of its own, next to the kernel it is made from.
    """

    TARGET = "parallel"

    def __init__(self, kernel):
        self.code_options = kernel.code_options
        recipe = None
        if kernel.recipe is not None:
            key, prelude = kernel.recipe
            recipe = (fingerprint("prange loop", key), prelude)
        super().__init__(kernel.body, kernel.args, recipe)

    def _source(self):
        names, rows, first_out = self._call_parts()
        return (f"{PRANGE_IMPORTS}{FLOATS_IMPORT}\n\n\n"
                + prange_over_objects(f"def kernel({names}):", first_out, f"body({rows})"))

    def _compile(self, function, cached):
        return numba.njit(error_model="numpy", parallel=True, cache=cached)(function)


# --- lanes: several objects per core at once (hapsira_core.ivp.lanes) ---

#: How deep LLVM's SLP vectoriser follows a value's operands from a store (LLVM's
#: ``-slp-recursion-max-depth``, 12 by default). A stage's state sum reaches through the
#: user's ``f`` to the previous stages: at 12 the orbit workload's attempt (W = 8) kept
#: 2492 scalar multiplications beside 174 packed ones; at 64, 97 beside 644.
SLP_DEPTH = 64
_SLP_DEPTH_DEFAULT = 12


_lane_compiler = None


def lane_compiler():
    """numba's nopython pipeline with LLVM's SLP vectoriser on (trees `SLP_DEPTH` deep)
    only while the function itself is lowered and optimised, its callees inlined: the
    lanes' attempt (`hapsira_core.ivp.lanes`), the W lanes' isomorphic straight-line code
    that this pass packs into vector instructions (numba leaves it off by default).

    Off while the functions it calls compile on their own (each is compiled, and
    optimised alone, before): compiled with the vectoriser on, a function such as
    cowell's ``f`` packs its own x, y, z into short vectors within one lane, and those
    no longer pack across the lanes once inlined, leaving much of the attempt 2-wide or
    scalar. Only the attempt: a caller (the lane loop, the kernel) reaches it by a call
    to the attempt's own machine code where LLVM does not inline it, so vectorising at
    the kernel instead leaves the attempt scalar in process (the figures:
    docs/benchmarks.md, "Lanes", and docs/log.md, "lanes")."""
    global _lane_compiler
    if _lane_compiler is not None:
        return _lane_compiler
    from numba.core import compiler, compiler_machinery, typed_passes

    saved = []

    @compiler_machinery.register_pass(mutates_CFG=False, analysis_only=True)
    class LaneVectoriserOn(compiler_machinery.LoweringPass):
        _name = "hapsira_lane_vectoriser_on"

        def __init__(self):
            compiler_machinery.LoweringPass.__init__(self)

        def run_pass(self, state):
            import llvmlite.binding as llvm

            saved.append(numba.core.config.SLP_VECTORIZE)
            numba.core.config.SLP_VECTORIZE = 1
            llvm.set_option("", f"-slp-recursion-max-depth={SLP_DEPTH}")
            return False

    @compiler_machinery.register_pass(mutates_CFG=False, analysis_only=True)
    class LaneVectoriserOff(compiler_machinery.LoweringPass):
        _name = "hapsira_lane_vectoriser_off"

        def __init__(self):
            compiler_machinery.LoweringPass.__init__(self)

        def run_pass(self, state):
            _vectoriser_back(saved, len(saved) - 1)
            return False

    class LaneCompiler(compiler.CompilerBase):
        def _compile_core(self):
            # a compile that fails or is interrupted between the two passes (a typing
            # error in lowering, Ctrl-C) would leave the vectoriser on for every later
            # compile of the process, the user's functions included (docs/log.md,
            # "a lane compile that fails")
            depth = len(saved)
            try:
                return super()._compile_core()
            finally:
                _vectoriser_back(saved, depth)

        def define_pipelines(self):
            pm = compiler.DefaultPassBuilder.define_nopython_pipeline(self.state)
            lowering = [cls for cls, _ in pm.passes if cls in (
                typed_passes.NativeLowering, typed_passes.NativeParforLowering)][0]
            pm.add_pass_after(LaneVectoriserOn, typed_passes.AnnotateTypes)
            pm.add_pass_after(LaneVectoriserOff, lowering)
            pm.finalize()
            return [pm]

    _lane_compiler = LaneCompiler
    return LaneCompiler


def _vectoriser_back(saved, depth):
    """numba's SLP setting as it was before the ``depth``-th `lane_compiler` window of
    ``saved`` (the settings its windows found), LLVM's default SLP depth; nothing where
    that window is closed already."""
    import llvmlite.binding as llvm

    if depth < 0:  # (an Off without its On)
        numba.core.config.SLP_VECTORIZE = 0
        return
    if len(saved) <= depth:
        return
    numba.core.config.SLP_VECTORIZE = saved[depth]
    del saved[depth:]
    llvm.set_option("", f"-slp-recursion-max-depth={_SLP_DEPTH_DEFAULT}")


def cpu_features():
    """The CPU name and LLVM features that numba compiles for, lane kernels included: the
    host's, or ``NUMBA_CPU_NAME`` and ``NUMBA_CPU_FEATURES`` where set (an AVX2 build on
    an AVX-512 host, say: ``NUMBA_CPU_NAME`` an AVX2 CPU's LLVM name, with the host's
    features less ``avx512*``), the AVX features off under ``NUMBA_ENABLE_AVX=0``, as
    numba's own code generator reads them. So the lane width of ``auto``
    (`vector_doubles`) and the cache key (`lane_code_options`) follow the code actually
    compiled."""
    import llvmlite.binding as llvm
    from numba.core import codegen, config

    name = config.CPU_NAME or llvm.get_host_cpu_name()
    features = (config.CPU_FEATURES if config.CPU_FEATURES is not None
                else codegen.get_host_cpu_features())
    return name, features


def vector_doubles():
    """float64s per vector register of the CPU compiled for (`cpu_features`): 8 with
    AVX-512, 4 with AVX, else 2."""
    features = cpu_features()[1].split(",")
    if "+avx512f" in features:
        return 8
    if "+avx" in features:
        return 4
    return 2


def lane_width():
    """Objects per lane kernel call (``HAPSIRA_LANES``): 0 where off; under ``auto`` (and
    ``on``) the host's vector width, which ``auto`` runs only where it pays
    (`LaneKernel.runs_lanes`)."""
    if settings.LANES in ("auto", "on"):
        return AUTO_LANES_PER_VECTOR * vector_doubles()
    return settings.LANES


#: auto's width in vectors: one vector register's doubles, the width that did best on
#: AVX-512 (docs/benchmarks.md, "Lanes")
AUTO_LANES_PER_VECTOR = 1

#: Under ``HAPSIRA_LANES=auto``, calls with fewer objects run the per-object kernel, lane
#: kernel cached or not (a few lanes' worth of objects gains little). ``on`` or a width
#: given as a number runs lanes at any size.
AUTO_LANES_MIN_OBJECTS = 1024

#: Under ``HAPSIRA_LANES=auto``, a lane kernel that is neither compiled in this process nor
#: in the disk cache is compiled in the call only for a call of at least this many objects
#: per thread (one on ``cpu``, numba's thread count on ``parallel``: the compile runs on
#: one core, the saving is spread over all). It is about where the time lanes save one
#: core equals a first compile of the lane kernel: below that a first compile does not pay
#: (docs/benchmarks.md, "Lanes"). A smaller call of at least `AUTO_LANES_MIN_OBJECTS` runs
#: per object and has the lane kernel compiled in the background for the calls after it
#: (`_Lanes.background`).
AUTO_LANES_COMPILE_OBJECTS = 1_000_000


def lane_code_options(width):
    """What a lane kernel's code depends on beyond the target's options."""
    return ("lanes", width, "slp", SLP_DEPTH) + cpu_features()


class _Lanes:
    """What a lane kernel adds to the kernel that compiles it: its per-object twin
    (``scalar``) and ``auto``'s choice between them (`runs_lanes`)."""

    PARALLEL = False
    #: What compiles the lane kernel in a background worker process
    #: (`hapsira_core.ivp.compile_worker.Background`: ``start(objects)``, ``running()``), set by
    #: the kernel's maker where a new process can import it; None: never in the background.
    background = None

    @property
    def scalar(self):
        # (made once: a kernel is callable too, so the maker is told apart by type)
        if not isinstance(self._scalar, kernel.ObjectKernel):
            self._scalar = self._scalar()
        return self._scalar

    def lanes_ready(self):
        """Whether a call runs the lane kernel without a long compile: compiled in this
        process or in the disk cache."""
        return self.lanes_on_disk()

    def lanes_on_disk(self):
        """Whether the lane kernel itself (not its per-object twin, as `on_disk` under
        ``auto``) is compiled in this process or in the disk cache."""
        return super().on_disk()

    def runs_lanes(self, objects):
        """Whether a call on ``objects`` objects runs the lane kernel (else the per-object
        one: the same numbers, bit for bit, so this only changes the time). Always, but
        under ``HAPSIRA_LANES=auto``, where it pays: at least `AUTO_LANES_MIN_OBJECTS`
        objects, and the lane kernel ready (`lanes_ready`; not while a background worker
        still compiles it, `background`) or at least `AUTO_LANES_COMPILE_OBJECTS` objects
        per thread to pay for its compile. Never compiles anything."""
        if settings.LANES != "auto":
            return True
        if objects < AUTO_LANES_MIN_OBJECTS:
            return False
        compiling = self.background is not None and self.background.running()
        if self.lanes_ready() and not compiling:
            return True
        threads = numba.get_num_threads() if self.PARALLEL else 1
        return objects >= AUTO_LANES_COMPILE_OBJECTS * threads

    def on_disk(self):
        """Whether the kernel that a call runs is compiled or cached on disk: under
        ``auto`` the per-object kernel will do where the lane kernel is not."""
        if self.lanes_on_disk():
            return True
        return settings.LANES == "auto" and self.scalar.on_disk()

    def __call__(self, *arrays):
        if len(arrays) == len(self.args):
            objects = np.shape(arrays[self.n_inputs])[0]
            if not self.runs_lanes(objects):
                self.scalar(*arrays)  # same arrays, same numbers (bit for bit)
                # (after the call: its own compile and run keep the cores)
                if objects >= AUTO_LANES_MIN_OBJECTS and self.background is not None:
                    self.background.start(objects)
                return None
        return super().__call__(*arrays)


def prange_over_chunks(header, first_out, call, floats=True):
    """The source of a function that runs ``call`` once per chunk of objects on all
    cores (`_prange`): its ``header`` (the ``def`` line), the array ``first_out`` whose
    first axis counts the objects, ``call`` (a statement on the objects ``lo`` to ``hi -
    1``) and, with ``floats``, each chunk run with IEEE subnormals. The parallel lane
    kernels' loop (`LaneKernel`, and the trampoline of a joined one).

    Many chunks per thread, so that uneven objects balance (the thread count is not
    read here: numba's get_num_threads() is a dynamic global, which keeps the kernel
    out of the disk cache); an object's numbers do not depend on its chunk (lanes are
    independent)."""
    return _prange(header,
                   [f"total = {first_out}.shape[0]",
                    "size = max(16, (total + 1023) // 1024)",
                    "chunks = (total + size - 1) // size"],
                   "chunks", "c", "k", ["lo = k * size", "hi = min(total, lo + size)"],
                   call, floats)


class LaneKernel(_Lanes, kernel.ObjectKernel):
    """``body(arrays..., first, last)`` on ranges of objects: the lane loop
    (`hapsira_core.ivp.lanes`) over all objects (cpu) or over chunks on all cores
    (parallel). ``scalar``: the per-object kernel of the same solve (the JAX front's
    handlers call a per-object body), made when first asked for."""

    def __init__(self, body, args, recipe, scalar):
        super().__init__(body, args, recipe)
        self._scalar = scalar

    def _source(self):
        names, _, first_out = self._call_parts()
        if not self.PARALLEL:
            return (f"{FLOATS_IMPORT}\n\n"
                    f"def kernel({names}):\n"
                    f"    mode = ieee_floats()\n"
                    f"    body({names}, 0, {first_out}.shape[0])\n"
                    f"    restore_floats(mode)\n")
        return (f"{PRANGE_IMPORTS}{FLOATS_IMPORT}\n\n\n"
                + prange_over_chunks(f"def kernel({names}):", first_out,
                                     f"body({names}, lo, hi)"))

    def _compile(self, function, cached):
        return numba.njit(error_model="numpy", parallel=self.PARALLEL, cache=cached)(function)

    def _build(self):
        old = numba.core.config.SLP_VECTORIZE
        try:
            return super()._build()
        finally:  # (a failed compile may have left the vectoriser on)
            numba.core.config.SLP_VECTORIZE = old

    def _run(self, compiled, arrays):
        if arrays[self.n_inputs].shape[0] > 0:
            with np.errstate(all="ignore"):
                compiled(*arrays)
