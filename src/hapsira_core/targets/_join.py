"""A kernel compiled once per solver configuration and joined to each user function
below numba's typing (the host targets).

Most of a kernel's first compile is the solve loop: typing and lowering its
functions again for every new right-hand side. Here the loop is compiled once per
*generic* configuration (method, state size and form, events or none, records...),
with `stub` calls where it calls the user's functions: each an external call whose
symbol name carries the call's numba types. Its LLVM bitcode is kept in memory and
in the cache folder. A user's functions are then compiled alone, each as a small
wrapper with a stub's types (`wrapper`), linked with the loop into one LLVM module
whose functions are all private but one entry (`join`), and LLVM's optimiser runs
on the whole, so that they are inlined into the loop as in a kernel compiled at
once: the same instructions and the same numbers. The joined object code is cached
too (`JoinedKernel`), so a warm process loads it.

Python calls an entry through a `trampoline`, a cached numba function that takes
the entry's address and the kernel's arrays.
"""

import base64
import contextlib
import itertools
import os
import pickle
import threading
import warnings

import numba
import numpy as np

from numba.core import cgutils, types
from numba.extending import intrinsic

from .. import progress, settings
from ..kernels import cache, kernel
from ..kernels.cache import factory
from . import _host

PREFIX = "hapsira.stub."
_ENTRY = "hapsira.join."
_LOCK = threading.RLock()
_COUNT = itertools.count()
#: The joined libraries of this process by entry symbol (a symbol is defined once).
_JOINED = {}


def _symbol(role, signature):
    """The stub's symbol: its role and the call's numba types, readable back (`_decode`)."""
    blob = pickle.dumps((role, tuple(signature.args), signature.return_type))
    return PREFIX + base64.b32encode(blob).decode().rstrip("=")


def _decode(symbol):
    blob = symbol[len(PREFIX):]
    return pickle.loads(base64.b32decode(blob + "=" * (-len(blob) % 8)))


_RESOLVED = set()


def _for_this_machine(key):
    """``key`` joined with what numba's own cache checks of the machine (triple, CPU name
    and features): a cache folder shared by two machines never serves one the other's code."""
    from numba.core import registry

    from ..kernels.fingerprint import fingerprint

    return fingerprint(key, registry.cpu_target.target_context.codegen().magic_tuple())[:24]


def _resolvable(symbol):
    """Let the JIT resolve ``symbol`` in the generic library (which is never run):
    a call to it would abort through numba's own unresolved-symbol handler."""
    if symbol not in _RESOLVED:
        import llvmlite.binding as llvm
        from numba.core.runtime import nrt

        llvm.add_symbol(symbol, nrt.rtsys.library.get_pointer_to_function(
            "nrt_unresolved_abort"))
        _RESOLVED.add(symbol)


def _intrinsic(arity, typer, codegen):
    """A numba intrinsic of ``arity`` arguments (numba's intrinsics take no ``*args``)."""
    names = ", ".join(f"a{i}" for i in range(arity))
    namespace = {"typer": typer, "codegen": codegen}
    exec(f"def impl(typingctx, {names}):\n"
         f"    signature = typer({names})\n"
         f"    return signature, codegen\n", namespace)
    return intrinsic(namespace["impl"])


@factory
def stub(role, arity, returns, error_components=None, marks=()):
    """The stand-in for a user function of ``role`` called with ``arity`` arguments.

    ``returns``: what the call returns, from its argument types: ``"state"`` (the
    tuple form of ``fun``: the state's own type), ``"none"`` (the array form, and a
    Jacobian written into its array) or ``"float"`` (an event function).
    ``error_components``: the mark of an stm=True system's right-hand side, which the
    loop reads (`hapsira_core.ivp.state.ops`). ``marks``: ``((attribute, value), ...)``
    set on the stand-in, what a method reads of the function it stands for (a
    Jacobian's constancy, `hapsira_core.ivp.sensitivities.constant_jacobian`) or the
    stand-ins of the functions derived from it (`hapsira_core.ivp.sensitivities.stand_in`)."""
    def typer(*args):
        result = {"state": lambda: args[1], "none": lambda: types.none,
                  "float": lambda: types.float64}[returns]()
        return result(*args)

    def codegen(context, builder, signature, args):
        symbol = _symbol(role, signature)
        _resolvable(symbol)
        function_type = context.call_conv.get_function_type(signature.return_type,
                                                             signature.args)
        function = cgutils.get_or_insert_function(builder.module, function_type, symbol)
        status, value = context.call_conv.call_function(
            builder, function, signature.return_type, signature.args, args)
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return value

    made = _intrinsic(arity, typer, codegen)
    # the loop reads a function's form from its parameters (`hapsira_core.ivp.state.fun_form`)
    namespace = {}
    exec(f"def {role}({', '.join(f'a{i}' for i in range(arity))}):\n    pass\n", namespace)
    made.py_func = namespace[role]
    if error_components is not None:
        made.hapsira_error_components = error_components
    for attribute, value in marks:
        setattr(made, attribute, value)
    return made


@factory
def entry_call(arity):
    """``call(address, a1..an)``: calls the entry at ``address`` (a kernel's function in
    numba's calling convention, returning nothing) with the arrays ``a1..an``."""
    def typer(address, *arrays):
        return types.none(address, *arrays)

    def codegen(context, builder, signature, args):
        arrays = signature.args[1:]
        function_type = context.call_conv.get_function_type(types.none, arrays)
        function = builder.inttoptr(args[0], function_type.as_pointer())
        status, _ = context.call_conv.call_function(builder, function, types.none, arrays,
                                                    args[1:])
        with cgutils.if_unlikely(builder, status.is_error):
            context.call_conv.return_status_propagate(builder, status)
        return context.get_dummy_value()

    return _intrinsic(arity + 1, typer, codegen)


_TRAMPOLINES = {}


def trampoline(argtypes, args=None, chunks=False):
    """``trampoline(address, a1..an)``: a numba function (from the disk cache where it
    can) that runs the joined entry at ``address`` on the arrays, compiled for the
    arrays' numba types ``argtypes``. With the kernel's ``args`` (`Arg`), it runs the
    entry once per object on all cores (``prange``), each call on that object's rows,
    or with ``chunks`` once per chunk of objects (a lane loop's entry,
    `hapsira_core.targets._host.prange_over_chunks`), each call on the chunk's rows.
    A damaged cache entry is removed, with a warning, and compiled again."""
    source = _trampoline_source(len(argtypes), args, chunks)
    for attempt in range(2):
        function, name = _trampoline(source, cached=attempt == 0)
        try:
            function.compile((types.int64,) + tuple(argtypes))
            return function
        except Exception as error:
            if name is None or attempt or not cache.is_corruption(error):
                raise
            _damaged(name, error, "loaded")
            _TRAMPOLINES.pop(source, None)


def _trampoline_source(arity, args, chunks=False):
    names = ", ".join(f"a{i}" for i in range(arity))
    head = ("import numba\n"
            "import numpy as np\n"
            "from hapsira_core.targets._join import entry_call\n\n"
            f"_call = entry_call({arity})\n\n\n")
    if args is None:
        return (head + "@numba.njit(error_model='numpy', cache=__cached__)\n"
                f"def trampoline(address, {names}):\n"
                f"    _call(address, {names})\n")

    first, last = ("lo", "hi") if chunks else ("i", "i + 1")

    def rows(index, arg):
        name = f"a{index}"
        if not arg.per_object:
            return name
        if arg.output:
            return f"{name}[{first}:{last}]"
        return f"({name} if {name}.shape[0] == 1 else {name}[{first}:{last}])"

    from ._host import PRANGE_IMPORTS, prange_over_chunks, prange_over_objects

    loop = prange_over_chunks if chunks else prange_over_objects
    first_out = next(i for i, a in enumerate(args) if a.output)
    # (the entry, a per-object loop or a lane loop, runs its objects with IEEE subnormals
    # itself)
    return (PRANGE_IMPORTS + head
            + "@numba.njit(error_model='numpy', parallel=True, cache=__cached__)\n"
            + loop(f"def trampoline(address, {names}):", f"a{first_out}",
                   f"_call(address, {', '.join(rows(i, a) for i, a in enumerate(args))})",
                   floats=False))


def _trampoline(source, cached):
    """``(function, its cache entry's name or None)``."""
    if source not in _TRAMPOLINES:
        module = name = None
        if settings.CACHE and cached:
            key = cache.key("trampoline", source, code_options=())
            name = f"trampoline_{key}"
            module = cache.load_module(name, source.replace("__cached__", "True"))
        if module is None:
            namespace = {}
            exec(compile(source.replace("__cached__", "False"), "<hapsira trampoline>",
                         "exec"), namespace)
            _TRAMPOLINES[source] = namespace["trampoline"], None
        else:
            _TRAMPOLINES[source] = module.trampoline, cache._PREFIX + name
    return _TRAMPOLINES[source]


def wrapper(role, function, argtypes, restype):
    """``function`` compiled as the stub of ``role`` with these types: its result
    unpacked and converted to the stub's type (a tuple's items to floats, an event's
    value to a float), as the loop's own arithmetic would convert it, so that it has
    the stub's exact calling convention; a result the loop cannot take (a tuple of
    another length) fails to compile in numba's words, as in a kernel compiled at once."""
    names = ", ".join(f"a{i}" for i in range(len(argtypes)))
    if isinstance(restype, types.BaseTuple):
        items = [f"r{i}" for i in range(len(restype))]
        body = (f"    {', '.join(items)}, = function({names})\n"
                f"    return ({''.join(f'float({item}), ' for item in items)})\n")
    elif restype == types.none:
        body = f"    function({names})\n"
    else:
        body = f"    return float(function({names}))\n"
    result = _compiled(role, body, names, function, argtypes)
    if result.signature.return_type != restype:
        raise TypeError(f"{role}: the wrapper returns {result.signature.return_type}, "
                        f"the stub {restype}")
    return result


def _compiled(role, body, names, function, argtypes):
    from ._host import hjit

    namespace = {"function": function}
    exec(compile(f"def {role}_wrapper({names}):\n{body}", f"<hapsira {role} wrapper>", "exec"),
         namespace)
    compiled = hjit(namespace[f"{role}_wrapper"])
    compiled.compile(tuple(argtypes))
    return compiled.overloads[tuple(argtypes)]


class Generic:
    """A generic kernel's LLVM bitcode: ``entry`` its function's symbol, ``arguments``
    its numba argument types; the stubs it calls are declared in the bitcode."""

    def __init__(self, bitcode, entry, arguments):
        self.bitcode = bitcode
        self.entry = entry
        self.arguments = tuple(arguments)

    def module(self):
        import llvmlite.binding as llvm
        return llvm.parse_bitcode(self.bitcode)


_GENERIC = {}


def generic(key, make_kernel):
    """The `Generic` of ``key``: from this process, the cache folder, or compiled
    (``make_kernel()``: the generic `ObjectKernel`, compiled in memory)."""
    with _LOCK:
        if key in _GENERIC:
            return _GENERIC[key]
        name = f"{cache._PREFIX}generic_{_for_this_machine(key)}"
        found = _read_generic(name)
        if found is None:
            found = _compile_generic(make_kernel())
            _write(name, {"entry": found.entry, "arguments": found.arguments},
                   found.bitcode)
        _GENERIC[key] = found
        return found


def generic_ready(key):
    """Whether the `Generic` of ``key`` is in this process or the cache folder (a join
    then compiles only the user's functions)."""
    if key in _GENERIC:
        return True
    if not (settings.CACHE and cache.usable()):
        return False
    return all(os.path.exists(p) for p in _paths(
        f"{cache._PREFIX}generic_{_for_this_machine(key)}"))


def _compile_generic(generic_kernel):
    compiled = generic_kernel.compile()
    signature = tuple(generic_kernel._signature())
    compiled.compile(signature)
    result = compiled.overloads[signature]
    module = result.library._get_module_for_linking()
    return Generic(module.as_bitcode(), result.fndesc.mangled_name, signature)


def _paths(name):
    folder = settings.CACHE_DIR
    return os.path.join(folder, name + ".py"), os.path.join(folder, name + ".bin")


def _write(name, meta, data):
    """An entry of the cache folder: a small module recording ``meta`` beside a data
    file (so that `cache.entries`, `prune` and `clear` count and remove both)."""
    if not (settings.CACHE and cache.usable()):
        return
    module, blob = _paths(name)
    try:
        cache._write_atomically_bytes(blob, data)
        text = ("# generated by hapsira_core; safe to delete\n"
                f"META = {base64.b64encode(pickle.dumps(meta)).decode()!r}\n")
        cache._write_atomically(module, text)
    except OSError:
        pass


def _read(name):
    """``(meta, data)`` of an entry, None where it is missing or unreadable (a damaged
    entry is removed with a warning and rebuilt by the caller)."""
    if not (settings.CACHE and cache.usable()):
        return None
    module, blob = _paths(name)
    if not (os.path.exists(module) and os.path.exists(blob)):
        return None
    try:
        with open(module) as source:
            text = source.read()
        meta = pickle.loads(base64.b64decode(text.split("META = ", 1)[1].strip().strip("'")))
        with open(blob, "rb") as stored:
            data = stored.read()
        os.utime(module)
        return meta, data
    except Exception as error:
        return _damaged(name, error)


def _damaged(name, error, verb="read"):
    """Remove a damaged entry, with a warning that it is rebuilt; returns None."""
    warnings.warn(f"hapsira cache: the entry {name} could not be {verb} "
                  f"({type(error).__name__}: {error}); rebuilding it", cache.CacheWarning,
                  stacklevel=5)
    cache.remove(name)


def _read_generic(name):
    found = _read(name)
    if found is None:
        return None
    meta, data = found
    made = Generic(data, meta["entry"], meta["arguments"])
    try:
        made.module()  # readable bitcode, or a damaged entry
    except Exception as error:
        return _damaged(name, error)
    return made


def join(generic_code, functions, entry, optimising=contextlib.nullcontext):
    """The library of ``generic_code`` joined to the user's ``functions``
    (``{role: function}``): each stub the loop calls defined by the function's
    `wrapper`, every function private but ``entry`` (the kernel's, in numba's calling
    convention), optimised as one module, inside ``optimising()`` (a context: numba's
    optimiser settings, such as the lanes' vectoriser, for that module alone, not for
    the functions compiled before). Returns the finalised library."""
    import llvmlite.binding as llvm
    from llvmlite import ir
    from numba.core import registry
    from numba.core.compiler_lock import global_compiler_lock

    context = registry.cpu_target.target_context
    module = generic_code.module()
    bridges = ir.Module("hapsira_bridges")
    bridges.triple = module.triple
    linked = []
    for declared in [f for f in module.functions if f.is_declaration
                     and f.name.startswith(PREFIX)]:
        role, argtypes, restype = _decode(declared.name)
        if role not in functions:
            raise KeyError(f"the generic kernel calls a {role!r} function; none was given")
        result = wrapper(role, functions[role], argtypes, restype)
        linked.append(result.library)
        function_type = context.call_conv.get_function_type(restype, argtypes)
        _forward(ir, bridges, function_type, declared.name, result.fndesc.mangled_name)
    function_type = context.call_conv.get_function_type(
        types.none, generic_code.arguments)
    _forward(ir, bridges, function_type, entry, generic_code.entry)
    # bridges first: a linked module's linkonce functions come in only where referenced
    module.link_in(llvm.parse_assembly(str(bridges)))
    for library in linked:
        module.link_in(library._get_module_for_linking(), preserve=True)
    # private, not internal: the JIT's linker registers an internal symbol by its name,
    # and a later kernel's copy of a function of that name (linkonce_odr, which yields to
    # a definition already loaded) would call this one, whose arguments LLVM may have
    # changed here (BDF's interpolant, which the dense output's kernel calls again)
    for function in module.functions:
        if not function.is_declaration and function.name != entry:
            function.linkage = "private"
    for variable in module.global_variables:
        if not variable.is_declaration:
            variable.linkage = "private"
    codegen = context.codegen()
    library = codegen.create_library(entry)
    library.enable_object_caching()
    with global_compiler_lock, optimising():
        library.add_llvm_module(module)
        library.finalize()
    return library


def _forward(ir, module, function_type, name, target):
    """Define ``name`` in ``module`` as a call of ``target`` (inlined away)."""
    function = ir.Function(module, function_type, name)
    function.attributes.add("alwaysinline")
    callee = ir.Function(module, function_type, target)
    builder = ir.IRBuilder(function.append_basic_block())
    builder.ret(builder.call(callee, function.args))


class JoinedKernel(kernel.ObjectKernel):
    """An `ObjectKernel` whose compiled form is a generic kernel joined to the user's
    functions (`join`): ``generic_key`` and ``make_generic()`` give the generic body
    (the per-object body built on stubs, compiled in memory as a `LOOP`),
    ``functions`` the user's functions by stub role. Same arguments, same numbers as the `ObjectKernel` of the same
    body compiled at once."""

    #: the `ObjectKernel` class of the generic loop (a target's per-object loop on one
    #: core, whose entry this kernel's caller runs)
    LOOP = None

    def __init__(self, body, args, recipe, generic_key, make_generic, functions):
        super().__init__(body, args, recipe)
        self.generic_key = generic_key
        self.make_generic = make_generic
        self.functions = dict(functions)
        self._library = None
        self._types = None
        #: the joined entry's symbol once compiled (what the JAX front's handler calls)
        self.entry = None

    @property
    def cache_name(self):
        if self.recipe is None:
            return None
        return f"{cache._PREFIX}joined_{self._key()}"

    def optimising(self):
        """The context of the joined module's optimisation (`join`): numba's settings."""
        return contextlib.nullcontext()

    def _key(self):
        """The recipe's key joined with the arguments' layout: two kernels of one body
        source called with other arrays are two entries."""
        layout = [(a.name, a.dtype.str, a.core, a.per_object, a.output, a.interleaved)
                  for a in self.args]
        return _for_this_machine((self.recipe[0], repr(layout)))

    def on_disk(self):
        if self._compiled is not None:
            return True
        if not settings.CACHE or self.recipe is None:
            return False
        return all(os.path.exists(p) for p in _paths(self.cache_name))

    def compile(self):
        with _LOCK:
            if self._compiled is None:
                self._compiled = self._build()
        return self._compiled

    def _build(self):
        from numba.core import registry
        from numba.core.runtime import nrt

        context = registry.cpu_target.target_context
        nrt.rtsys.initialize(context)  # the runtime's functions, which the code calls
        codegen = context.codegen()
        entry = (_ENTRY + (self._key() if self.recipe is not None
                           else f"memory{next(_COUNT)}.{os.getpid()}"))
        self.entry = entry
        if entry in _JOINED:  # another kernel of the same recipe in this process
            self._library = _JOINED[entry]
            return (self._library.get_pointer_to_function(entry),
                    self._caller())
        library = None
        if self.recipe is not None:
            found = _read(self.cache_name)
            if found is not None:
                try:
                    library = codegen.unserialize_library(pickle.loads(found[1]))
                except Exception as error:
                    library = _damaged(self.cache_name, error, "loaded")
        if library is None:
            loop = f"the loop of {self.description} (once for every function of this form)"
            with progress.compiling(loop):
                generic_code = generic(self.generic_key, lambda: self._loop(loop))
            name = getattr(getattr(self.functions["fun"], "py_func", None), "__qualname__",
                           "the user's function")
            with progress.compiling(f"{self.description} for {name}"):
                library = join(generic_code, self.functions, entry, self.optimising)
            if self.recipe is not None:
                _write(self.cache_name, {"entry": entry},
                       pickle.dumps(library.serialize_using_object_code()))
        address = library.get_pointer_to_function(entry)
        if not address:
            raise RuntimeError(f"hapsira: the joined kernel {entry} has no entry")
        self._library = _JOINED[entry] = library  # its code must outlive the calls
        return address, self._caller()

    def _loop(self, description):
        """The generic loop's kernel, compiled in memory; its notice (`progress`) says
        what the joined kernel's says of it."""
        made = self.LOOP(self.make_generic(), self.args, recipe=None)
        made.description = description
        return made

    def _caller(self):
        """``call(address, *arrays)``: what runs the entry on the kernel's arrays."""
        return trampoline(self._signature())

    def native(self):
        """``(symbol, argument types, address)``: the compiled function that the JAX
        front's handler calls by symbol on the kernel's arrays
        (`hapsira_core.targets._host.xla_handler`), here the entry itself; ``address``
        (None here): the symbol whose address it takes first."""
        self.compile()
        return self.entry, tuple(self._signature()), None

    def _run(self, compiled, arrays):
        """The entry was compiled for the arguments' dtypes and ranks and C-ordered
        arrays: any other order (a broadcast row, a transposed view) runs on a C-ordered
        copy, an output's copied back after; another dtype or rank is refused (the
        trampoline would hand the entry memory it reads as another layout)."""
        address, call = compiled
        if self._types is None:  # (made once: numba's types are slow to make per call)
            self._types = tuple(self._signature())
        for arg, array, numba_type in zip(self.args, arrays, self._types):
            if array.dtype != arg.dtype or array.ndim != numba_type.ndim:
                raise TypeError(f"hapsira: the kernel's argument {arg.name} is a "
                                f"{numba_type.ndim}-d {arg.dtype} array; got a "
                                f"{array.ndim}-d {array.dtype} one (an internal error: "
                                "please report it)")
        ordered = [a if a.flags.c_contiguous else np.ascontiguousarray(a) for a in arrays]
        call(address, *ordered)
        for arg, given, used in zip(self.args, arrays, ordered):
            if used is not given and arg.output:
                given[...] = used


class _LeftToTheJoin:
    """A generic loop's kernel compiled (for its signature) inside
    `stub_callers_unoptimised`: what calls the user's functions is left to the join."""

    def _build(self):
        from numba.core.compiler_lock import global_compiler_lock

        with global_compiler_lock, stub_callers_unoptimised():
            compiled = super()._build()
            compiled.compile(self._signature())
        return compiled


class LaneLoop(_LeftToTheJoin, _host.LaneKernel):
    """The lane loop over all the objects of its arrays on one core, compiled in memory,
    what calls the user's functions left unoptimised (`stub_callers_unoptimised`): the
    generic loop of a joined lane kernel (`JoinedLaneKernel`) on either host target, which
    the join optimises once, the user's functions inlined, as a lane kernel compiled at
    once is optimised after its ``f`` is linked in.

    Optimised here, with the stubs as opaque calls, the attempt vectorised worse once
    joined (more packed multiplications and stack accesses than the attempt compiled at
    once, and slower); left unoptimised, the same instructions (docs/log.md, "joined
    lanes")."""

    TARGET = "cpu"
    code_options = staticmethod(_host.joined_code_options)

    def __init__(self, body, args, recipe=None):
        super().__init__(body, args, recipe, None)


class ObjectLoop(_LeftToTheJoin, _host.ObjectLoop):
    """The per-object loop over all the objects of its arrays on one core, compiled in
    memory, what calls the user's functions left unoptimised and without machine code
    (`stub_callers_unoptimised`): the generic loop of a joined per-object kernel
    (`JoinedKernel`) on either host target (parallel runs its entry once per object from
    the trampoline's ``prange``), which the join optimises once, the user's functions
    inlined. Optimised here too, the loop went through LLVM's O3 passes twice and was made
    machine code never run (docs/log.md, "a cheaper generic loop compile")."""


@contextlib.contextmanager
def stub_callers_unoptimised():
    """While numba compiles inside, a library that calls a stub of a joined kernel
    (`stub`), itself or through what it links, is not
    optimised by LLVM: its optimisation waits for the user's functions (the join).
    Nor is it made machine code: it is never run (its LLVM module is what the join
    reads), and the generic lane loop's machine code took a sixth of its first compile
    (docs/log.md, "a cheaper lane loop compile"). Everything else (the helpers it
    calls, which other kernels of this process share) is optimised and compiled as
    always. Inside numba's compiler lock (the setting is numba's own class)."""
    from numba.core import codegen

    library = codegen.CPUCodeLibrary
    functions, final = library._optimize_functions, library._optimize_final_module
    finalize = library._finalize_final_module
    jit = codegen.JITCPUCodegen
    env_set = jit.set_env

    def calls_stub(module):
        return any(f.is_declaration and f.name.startswith(PREFIX)
                   for f in module.functions)

    def optimize_functions(self, ll_module):
        if not calls_stub(ll_module):
            return functions(self, ll_module)
        ll_module.data_layout = self._codegen._data_layout

    def optimize_final_module(self):
        if not calls_stub(self._final_module):
            return final(self)

    def finalize_final_module(self):
        if not calls_stub(self._final_module):
            return finalize(self)
        # never run: no machine code (the join reads its LLVM module)
        self._finalize_dynamic_globals()
        self._verify_declare_only_symbols()
        self._finalized = True

    def set_env(self, env_name, env):  # (a library left without machine code has none)
        if self._engine.get_global_value_address(env_name):
            env_set(self, env_name, env)

    library._optimize_functions = optimize_functions
    library._optimize_final_module = optimize_final_module
    library._finalize_final_module = finalize_final_module
    jit.set_env = set_env
    try:
        yield
    finally:
        library._optimize_functions, library._optimize_final_module = functions, final
        library._finalize_final_module = finalize
        jit.set_env = env_set


@contextlib.contextmanager
def lane_vectoriser():
    """LLVM's SLP vectoriser on, trees `_host.SLP_DEPTH` deep, for the optimisations that numba
    runs inside (it reads the setting as it makes each pass manager); numba's setting
    and LLVM's default depth after. Only around the joined module's optimisation: the
    user's functions are compiled before, without it (`_host.lane_compiler` says why)."""
    import llvmlite.binding as llvm

    old = numba.core.config.SLP_VECTORIZE
    numba.core.config.SLP_VECTORIZE = 1
    llvm.set_option("", f"-slp-recursion-max-depth={_host.SLP_DEPTH}")
    try:
        yield
    finally:
        numba.core.config.SLP_VECTORIZE = old
        llvm.set_option("", f"-slp-recursion-max-depth={_host._SLP_DEPTH_DEFAULT}")


class JoinedLaneKernel(_host._Lanes, JoinedKernel):
    """A lane kernel (`_host.LaneKernel`'s arguments, numbers and ``auto`` choice) whose compiled
    form is the generic lane loop (`LaneLoop`: stubs where it calls ``f`` and the event
    functions, left unoptimised) joined to the user's functions, the joined
    module optimised with the lanes' vectoriser (`lane_vectoriser`): ``f`` inlined in
    the attempt's lanes, then packed as in a lane kernel compiled at once. On cpu the
    joined entry runs on all objects; on parallel on chunks of them (`_host.prange_over_chunks`).
    ``scalar``: as `LaneKernel`'s."""

    LOOP = LaneLoop

    def __init__(self, body, args, recipe, generic_key, make_generic, functions, scalar):
        super().__init__(body, args, recipe, generic_key, make_generic, functions)
        self._scalar = scalar

    def optimising(self):
        return lane_vectoriser()

    def lanes_ready(self):
        """Whether a call runs lanes without a long compile: the joined kernel or its
        generic lane loop compiled in this process or in the disk cache (a join then
        compiles only the user's functions)."""
        return super().lanes_ready() or generic_ready(self.generic_key)

    def _caller(self):
        if not self.PARALLEL:
            return super()._caller()
        return trampoline(self._signature(), self.args, chunks=True)

    def _run(self, compiled, arrays):
        if arrays[self.n_inputs].shape[0] > 0:
            with np.errstate(all="ignore"):
                super()._run(compiled, arrays)


__all__ = ["stub", "entry_call", "trampoline", "wrapper", "join", "generic", "generic_ready",
           "JoinedKernel", "JoinedLaneKernel", "LaneLoop", "ObjectLoop", "PREFIX"]
