"""The on-disk kernel cache: generated kernel modules under ``HAPSIRA_CACHE_DIR``.

numba caches a compiled function beside its source file and keys the entry
by that file alone (not by the functions it calls), and it refuses to cache
functions that reach others through values made at run time. So each
kernel is written as a small module that reaches everything it calls by
import: the user's functions by their module and name, functions made by
factories (adapters, the solve loop per method and dimension) by calling
the factory again (`factory()` records how). The module's file name
holds `key()`: a fingerprint (`hapsira_core.kernels.fingerprint`) of everything the
kernel calls and every value it reads (globals, module attributes followed as
far as the code reads them, default arguments, closures, arrays by their
bytes, each jitted function's compile options), of the library's own source
and the versions involved, and of every setting that changes the generated
code (`code_settings()`: the target, ``HAPSIRA_DEBUG``,
``HAPSIRA_CUDA_MAX_REGISTERS``, the CUDA simulator, numba's own bounds-check,
optimisation and debug-info settings). A changed function, helper, constant,
setting or library never finds a stale kernel. numba then caches the kernel
beside that file, in the same folder.

Where a function cannot be reached by import (defined in ``python -c``, an
interactive session or a closure no factory made), the kernel is built in
memory as before, without an error: it is compiled in every process.

Entries are written atomically (concurrent processes are safe), a corrupt
entry is removed and rebuilt with a warning, and the folder is pruned to
``HAPSIRA_CACHE_MAX_MB``, least recently used first. A ``HAPSIRA_CACHE_DIR``
that cannot be used (a file, a read-only or impossible path) gives one
`CacheWarning` naming it, and the process then compiles in memory.
"""

import functools
import hashlib
import importlib
import importlib.util
import os
import sys
import time
import warnings

from .. import settings
from .fingerprint import fingerprint


def _names_from_content():
    """Give every function compiled from this library or its users a numba
    name made from what it computes, not from a count of this process.

    numba names a compiled function by module, qualified name and a counter
    of the process that compiled it, and a process that loads several cached
    kernels links them into one symbol table. Closures made by one factory
    share a qualified name (``orbit_rhs.<locals>.fun`` for every ``f``), and
    so do functions generated per state size: compiled by two processes, two
    of them could get the same counter, and the JIT linked the first one
    loaded for both (seen on cpu: a cached two-body kernel ran another
    kernel's ``f``, with success status). Names must also not depend on the
    process: processes compiling one kernel at the same time write its cache
    entries side by side, and the parallel target's two entries, written by
    different processes, must name each other's functions alike (random
    counters made those first runs crash). So the number in the name is the
    function's `fingerprint` (code, constants, closure, globals, recursively);
    numba's own functions keep the counter.
    """
    from numba.core.bytecode import FunctionIdentity

    counted = FunctionIdentity.from_function.__func__

    def from_function(cls, pyfunc):
        identity = counted(cls, pyfunc)
        module = getattr(identity.func, "__module__", None) or ""
        if module.split(".")[0] in ("numba", "llvmlite", "numpy"):
            return identity
        try:
            uid = int(fingerprint(identity.func)[:15], 16) + 1
        except Exception:  # an object fingerprint() cannot read: keep numba's count
            return identity
        identity.unique_id = uid
        identity.unique_name = f"{identity.func_qualname}${uid}"
        return identity

    FunctionIdentity.from_function = classmethod(from_function)


_names_from_content()


def _prange_names_from_content():
    """Name the functions numba makes for a ``prange`` loop (its parfor gufuncs) from
    the function they are lowered in, not from the process.

    numba names them ``__numba_parfor_gufunc_<hex(hash(parfor))>``, the address of an
    object of the compiling process; `_names_from_content` then numbers them from that
    name. Two processes that share a cache folder (the parallel target's kernels, its
    trampolines, the lanes' chunk loop) could give two different loops one name, and a
    process that loads both links the first one loaded for both (as in
    `_names_from_content`). Here a loop's number is the fingerprint of the enclosing
    function's mangled name (which holds its content's fingerprint and argument types)
    and the loop's place among the loops lowered in it: the same function gives the
    same names in every process, two different ones never share one.
    """
    import threading
    import weakref

    from numba.parfors import parfor_lowering

    create = parfor_lowering._create_gufunc_for_parfor_body
    lowering = threading.local()
    #: lowerer -> loops lowered in it so far (a function's loops, in the order of its IR)
    counts = weakref.WeakKeyDictionary()

    def named_create(lowerer, parfor, *args, **kwargs):
        stack = lowering.__dict__.setdefault("stack", [])
        place = counts.get(lowerer, 0)
        counts[lowerer] = place + 1
        stack.append(f"{lowerer.fndesc.mangled_name}#{place}")
        try:
            return create(lowerer, parfor, *args, **kwargs)
        finally:
            stack.pop()

    def parfor_hash(obj):
        stack = lowering.__dict__.get("stack")
        if not stack or not isinstance(obj, parfor_lowering.parfor.Parfor):
            return hash(obj)
        return int(fingerprint("prange loop", stack[-1])[:15], 16)

    parfor_lowering._create_gufunc_for_parfor_body = named_create
    # the module's own name `hash` (looked up in its globals before the builtins): its
    # one use names the gufunc
    parfor_lowering.hash = parfor_hash


_prange_names_from_content()

#: ``id(result) -> (factory, args)`` for every result of a `factory()`.
_RECIPES = {}
_PREFIX = "hapsira_kernel_"


class CacheWarning(UserWarning):
    """A cache entry was unusable (corrupt or truncated) and is being rebuilt, or
    the cache folder cannot be used and kernels are compiled in memory."""


#: Why ``HAPSIRA_CACHE_DIR`` cannot be used in this process (None: it can, or
#: not tried yet), keyed by the folder (tests change ``settings.CACHE_DIR``).
_UNUSABLE = {}


def usable():
    """Whether kernels can be written to ``HAPSIRA_CACHE_DIR``; the first time it
    cannot, one `CacheWarning` says so, and kernels are compiled in memory."""
    folder = settings.CACHE_DIR
    if folder not in _UNUSABLE:
        try:
            os.makedirs(folder, exist_ok=True)
            probe = os.path.join(folder, f".probe.{os.getpid()}.{time.monotonic_ns()}.tmp")
            with open(probe, "w"):
                pass
            os.remove(probe)
            _UNUSABLE[folder] = None
        except OSError as error:
            _unusable(folder, error)
    return _UNUSABLE[folder] is None


def _unusable(folder, error):
    _UNUSABLE[folder] = error
    warnings.warn(f"hapsira cache: HAPSIRA_CACHE_DIR={folder!r} cannot be used "
                  f"({type(error).__name__}: {error}); kernels are compiled in memory "
                  "in this process", CacheWarning, stacklevel=5)


def code_settings(code_options):
    """Every setting that changes the code compiled for a kernel (a cache key
    without one of them would serve a kernel built with another value): the
    target's own (``code_options``: its name, HAPSIRA_DEBUG, register caps...,
    from `hapsira_core.targets`) and numba's global code settings."""
    import numba

    return ("target", tuple(code_options),
            "numba", tuple(repr(getattr(numba.config, name, None)) for name in
                           ("BOUNDSCHECK", "OPT", "DEBUGINFO_DEFAULT", "FASTMATH")))


def key(*parts, code_options):
    """The cache key of a kernel made of ``parts`` (its functions and the source
    of its module): the one place where settings and library join the fingerprint."""
    return fingerprint(*parts, library_fingerprint(), code_settings(code_options))


def remember(result, maker, args):
    """Record that ``maker(*args)`` gives ``result`` (and will again, in a new
    process), so that kernels calling ``result`` can be cached: for builders
    that memoise by hand (see `factory()` for the decorator)."""
    _RECIPES[id(result)] = (maker, tuple(args))
    return result


def factory(func):
    """Memoise ``func(*args)`` and remember how each result was made.

    A kernel module can then rebuild the result by calling the factory with
    the same arguments, as long as the factory and its arguments can be
    imported (or are plain numbers, strings and tuples of them).
    """
    memo = {}

    @functools.wraps(func)
    def make(*args):
        try:
            return memo[args]
        except KeyError:
            result = memo[args] = func(*args)
            return remember(result, make, args)

    return make


def _importable(obj):
    """``(module, qualname)`` if ``obj`` is what that import gives, else None."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None) or getattr(
        getattr(obj, "py_func", None), "__qualname__", None)
    if not module or not qualname or "<" in qualname:
        return None
    loaded = sys.modules.get(module)
    if loaded is None or (module == "__main__" and not getattr(loaded, "__file__", None)):
        return None  # python -c, an interactive session: nothing to import next time
    target = loaded
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return (module, qualname) if target is obj else None


def expression(obj, imports):
    """Python source that rebuilds ``obj`` in a kernel module, or None.

    ``imports``: a dict ``{alias: (module, qualname)}`` that is filled in.
    """
    if isinstance(obj, (bool, int, float, str, type(None))):
        return repr(obj)
    if isinstance(obj, tuple):
        items = [expression(item, imports) for item in obj]
        if any(item is None for item in items):
            return None
        return "(" + "".join(f"{item}, " for item in items) + ")"
    if id(obj) in _RECIPES:
        make, args = _RECIPES[id(obj)]
        maker = expression(make, imports)
        items = [expression(arg, imports) for arg in args]
        if maker is None or any(item is None for item in items):
            return None
        return f"{maker}({', '.join(items)})"
    place = _importable(obj)
    if place is None:
        return None
    alias = f"_i{len(imports)}"
    for existing, value in imports.items():
        if value == place:
            return existing
    imports[alias] = place
    return alias


def import_lines(imports):
    lines = []
    for alias, (module, qualname) in imports.items():
        head, _, rest = qualname.partition(".")
        line = f"from {module} import {head} as {alias}"
        if rest:
            line = f"import {module} as {alias}_m\n{alias} = {alias}_m.{qualname}"
        lines.append(line)
    return "\n".join(lines)


@functools.lru_cache(maxsize=None)
def library_fingerprint():
    """A hash of the source of hapsira_core and hapsira_cowell and of the versions
    that compile it: a kernel cached by another version is never reused."""
    import numba
    import numpy

    digest = hashlib.sha256()
    for version in (sys.version, numba.__version__, numpy.__version__):
        digest.update(version.encode())
    for package in ("hapsira_core", "hapsira_cowell"):
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            continue
        for root in spec.submodule_search_locations:
            for folder, _, files in sorted(os.walk(root)):
                for name in sorted(files):
                    if name.endswith(".py"):
                        with open(os.path.join(folder, name), "rb") as source:
                            digest.update(name.encode())
                            digest.update(source.read())
    return digest.hexdigest()[:16]


def _write_atomically(path, text):
    _write_atomically_bytes(path, text.encode())


def _write_atomically_bytes(path, data):
    partial = f"{path}.{os.getpid()}.{time.monotonic_ns()}.tmp"
    with open(partial, "wb") as out:
        out.write(data)
    os.replace(partial, path)


def load_module(key, source):
    """The kernel module for ``key`` with this ``source``, written if needed;
    None where the cache folder cannot be used (see `usable()`).

    A file whose text is not ``source`` (truncated, edited, garbage) is
    rewritten; a module that fails to import is removed and written again.
    """
    if not usable():
        return None
    name = f"{_PREFIX}{key}"
    path = os.path.join(settings.CACHE_DIR, name + ".py")
    text = "# generated by hapsira_core; safe to delete\n" + source
    try:
        with open(path) as existing:
            intact = existing.read() == text
    except (OSError, UnicodeDecodeError):
        intact = False
    if not intact:
        if os.path.exists(path):
            warnings.warn(f"hapsira cache: {path} was damaged; rebuilding it", CacheWarning,
                          stacklevel=3)
            remove(name)
        try:
            _write_atomically(path, text)
        except OSError as error:  # the folder went away or filled up since
            _unusable(settings.CACHE_DIR, error)
            return None
    else:
        # recently used, so pruned last: the access time says so. The modification
        # time stays, since numba-cuda takes it as the source's stamp and would
        # find its index stale (and recompile) in every process after a touch.
        os.utime(path, ns=(time.time_ns(), os.stat(path).st_mtime_ns))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    # numba reloads a cached kernel's environment by importing its module by name
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    prune()
    return module


def _entry_files(name):
    """The files of one entry: the module and numba's index and data beside it."""
    folder = settings.CACHE_DIR
    found = []
    for base in (folder, os.path.join(folder, "__pycache__")):
        try:
            for file in os.listdir(base):
                if file.startswith(name + ".") or file.startswith(f"guf-{name}."):
                    found.append(os.path.join(base, file))
        except OSError:
            continue
    return found


def remove(name):
    """Delete one entry (module and numba's files); missing files are fine."""
    for file in _entry_files(name):
        try:
            os.remove(file)
        except FileNotFoundError:
            pass


def entries():
    """``[(name, bytes, last used)]`` of every entry, most recently used first."""
    try:
        modules = [f for f in os.listdir(settings.CACHE_DIR)
                   if f.startswith(_PREFIX) and f.endswith(".py")]
    except OSError:  # not there, or not a folder
        return []
    found = []
    for module in modules:
        name = module[:-3]
        files = _entry_files(name)
        try:
            size = sum(os.path.getsize(f) for f in files)
            used = max(max(os.path.getatime(f), os.path.getmtime(f)) for f in files)
        except (OSError, ValueError):
            continue  # removed meanwhile by another process
        found.append((name, size, used))
    return sorted(found, key=lambda entry: -entry[2])


def prune(max_bytes=None):
    """Remove the least recently used entries until the cache is under ``max_bytes``."""
    limit = settings.CACHE_MAX_MB * 2 ** 20 if max_bytes is None else max_bytes
    total = 0
    for name, size, _ in entries():
        total += size
        if total > limit:
            remove(name)


def clear():
    """Remove every entry; returns how many there were."""
    found = entries()
    for name, _, _ in found:
        remove(name)
    return len(found)


def info():
    """A short description of the cache: where, how many entries, how large."""
    found = entries()
    size = sum(entry[1] for entry in found)
    return {"directory": settings.CACHE_DIR, "enabled": settings.CACHE,
            "entries": len(found), "megabytes": size / 2 ** 20,
            "limit_megabytes": settings.CACHE_MAX_MB}


def info_lines():
    """`info()` as lines for a terminal (``hapsira-cowell cache info``)."""
    found = info()
    return [f"directory: {found['directory']}",
            f"enabled:   {'yes' if found['enabled'] else 'no (HAPSIRA_CACHE=0)'}",
            f"entries:   {found['entries']} ({found['megabytes']:.1f} MB of "
            f"{found['limit_megabytes']} MB, HAPSIRA_CACHE_MAX_MB)"]


def clear_lines():
    """`clear()`, reported as lines (``hapsira-cowell cache clear``)."""
    return [f"removed {clear()} cached kernels from {settings.CACHE_DIR}"]


def is_corruption(error):
    """Whether ``error`` (raised while numba loaded a cached kernel) means a damaged
    entry rather than code that does not compile."""
    from numba.core import errors

    if isinstance(error, (errors.TypingError, errors.LoweringError, errors.UnsupportedError)):
        return False
    return True


__all__ = ["factory", "remember", "expression", "import_lines", "library_fingerprint", "load_module",
           "remove", "entries", "prune", "clear", "info", "CacheWarning", "key", "code_settings",
           "usable"]
