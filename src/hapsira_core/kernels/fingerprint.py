"""A hash of what a compiled function computes: its code and every value it reads.

Numba's on-disk cache keys a function by its own source file, not by the
functions it calls or the values it freezes as constants; a cached kernel
would then survive a change to the user's right-hand side. Kernels are
therefore cached under a name that includes this fingerprint, which covers,
recursively, everything a function can reach:

* its bytecode, constants and names (and those of nested code),
* its globals that its code names, its default arguments (positional and
  keyword-only) and the values in its closure,
* functions it reaches (plain or jitted, and numba intrinsics by their
  definition): their fingerprint, and for a dispatcher its compile options
  (``fastmath``, ``boundscheck``...),
* modules: a module of the standard library by its name and Python's version;
  any other module (the user's) by the attributes the code reads from it, that
  is every name of the code looked up on the module, followed through
  submodules and attribute chains (``consts.RATE``, ``helpers.g``,
  ``pkg.sub.VALUE``); cycles are cut. A module installed in site-packages
  (``pip install .``, not editable) is keyed by content too, since a package
  can change under one version: its version, the digest of its distribution's
  ``RECORD`` (the hashes of every file pip installed), its own file (a source
  file's bytes, a compiled one's path, size and modification time), and of the
  attributes the code reads only the plain ones (numbers, strings, arrays,
  tuples of these), its jitted functions and its submodules (keyed alike). Its
  other attributes (ufuncs, classes, plain functions) are not walked, which
  keeps numpy or scipy as cheap as one file's digest each; they are covered by
  the file digests and ``RECORD``. Every installed module reached has a file
  (a module without one, a namespace package, is keyed as the user's),
* numbers and strings by their exact ``repr``, numpy arrays and scalars by
  dtype, shape and bytes, tuples item by item, other objects by type and
  ``repr``.

Names are over-approximated (an attribute is hashed if any name of the code
has its name), so a change can only make a key change, never hide one. The
settings that change the generated code are added by the cache
(`hapsira_core.kernels.cache.key`), not here.
"""

import functools
import hashlib
import importlib.metadata
import os
import site
import sys
import sysconfig
import types

import numpy as np


def _python_function(obj):
    """The plain Python function behind a numba dispatcher, or a numba ``@intrinsic``'s
    definition (whose nested code generator holds, say, the PTX it emits), or the
    function itself."""
    func = getattr(obj, "py_func", None) or getattr(obj, "_defn", obj)
    return func if isinstance(func, types.FunctionType) else None


def _canonical(value):
    """``repr`` that does not depend on the process (sets and dicts sorted)."""
    if isinstance(value, (set, frozenset)):
        return "{" + ", ".join(sorted(_canonical(item) for item in value)) + "}"
    if isinstance(value, dict):
        return "{" + ", ".join(sorted(f"{_canonical(k)}: {_canonical(v)}"
                                      for k, v in value.items())) + "}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_canonical(item) for item in value) + ",)"
    return repr(value)


def _names(code):
    """Every name the code (and the code nested in it) looks up: globals and attributes."""
    found = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= _names(const)
    return found


def _code(code, update):
    update(code.co_code)
    update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code(const, update)
        else:
            update(_canonical(const).encode())


@functools.lru_cache(maxsize=None)
def _library_folders():
    folders = set(site.getsitepackages() + [site.getusersitepackages()])
    for key in ("purelib", "platlib"):
        folders.add(sysconfig.get_paths()[key])
    return tuple(os.path.realpath(f) + os.sep for f in folders if f)


@functools.lru_cache(maxsize=None)
def _library_version(top):
    """``"python ..."`` for the standard library; for a top-level package or module
    installed in site-packages its version and the digest of its distribution's
    ``RECORD``; None for a module of the user's."""
    if top in sys.stdlib_module_names or top in sys.builtin_module_names:
        return "python " + sys.version
    module = sys.modules.get(top)
    path = getattr(module, "__file__", None)
    if not path or not os.path.realpath(path).startswith(_library_folders()):
        return None
    try:
        distribution = importlib.metadata.distribution(top)
    except Exception:  # no metadata under the module's name: its files alone key it
        distribution = None
    version = getattr(module, "__version__", None)
    if not isinstance(version, str):
        version = distribution.version if distribution is not None else "no version"
    record = distribution.read_text("RECORD") if distribution is not None else None
    if record:
        version += " record " + hashlib.sha256(record.encode()).hexdigest()
    return "installed " + version


@functools.lru_cache(maxsize=None)
def _file_stamp(path):
    """A source file's digest; a compiled module's path, size and modification time."""
    try:
        if path.endswith(".py"):
            with open(path, "rb") as source:
                return hashlib.sha256(source.read()).hexdigest()
        stat = os.stat(path)
        return f"{path} {stat.st_size} {stat.st_mtime_ns}"
    except OSError:
        return f"{path} unreadable"


def _plain(value):
    """A value an installed module's attribute is hashed by: data, or a tuple of data."""
    if isinstance(value, tuple):
        return all(_plain(item) for item in value)
    return isinstance(value, (int, float, complex, str, bytes, bool, type(None),
                              np.ndarray, np.generic))


def _read_from_installed(value):
    """Whether an installed module's attribute is walked: plain data, a submodule, or a
    jitted function (a dispatcher or intrinsic, not a plain Python function)."""
    return (_plain(value) or isinstance(value, types.ModuleType)
            or (not isinstance(value, types.FunctionType)
                and _python_function(value) is not None))


def _module(module, update, seen, names):
    update(b"module " + module.__name__.encode())
    own = getattr(module, "__hapsira_fingerprint__", None)
    if isinstance(own, str):  # a generated module whose name says what it holds
        update(own.encode())
        return
    version = _library_version(module.__name__.split(".")[0])
    installed = version is not None and version.startswith("installed ")
    if version is not None:
        update(version.encode())
        if not installed:
            return
        path = getattr(module, "__file__", None)
        if path:
            update(b"file " + _file_stamp(path).encode())
    if not names:  # reached by no code: nothing of it is read
        return
    if (id(module), names) in seen:
        update(b"<seen>")
        return
    seen.add((id(module), names))
    attributes = vars(module)
    for name in sorted(names):
        if name in attributes:
            if installed and not _read_from_installed(attributes[name]):
                continue
            update(b"." + name.encode())
            _value(attributes[name], update, seen, names)


def _value(value, update, seen, names=frozenset()):
    """Hash ``value``; ``names``: the names of the code that reaches it (the
    attributes it may read from a module)."""
    func = _python_function(value)
    if func is not None:
        _function(func, update, seen)
        options = getattr(value, "targetoptions", None)
        if options:
            update(b"options " + _canonical(dict(options)).encode())
    elif isinstance(value, (int, float, complex, str, bytes, bool, type(None))):
        update(type(value).__name__.encode() + repr(value).encode())
    elif isinstance(value, (np.ndarray, np.generic)):
        array = np.ascontiguousarray(value)
        update(f"array {array.dtype.str} {array.shape}".encode())
        update(repr(array.tolist()).encode() if array.dtype.hasobject else array.tobytes())
    elif isinstance(value, tuple):
        update(f"{type(value).__qualname__} {len(value)}".encode())
        for item in value:
            _value(item, update, seen, names)
    elif isinstance(value, types.ModuleType):
        _module(value, update, seen, frozenset(names))
    else:
        # Other objects numba freezes as constants (enums, classes...): their repr.
        update(type(value).__qualname__.encode())
        update(_canonical(value).encode())


def _function(func, update, seen):
    if id(func) in seen:
        update(b"<seen>")
        return
    seen.add(id(func))
    update(f"{func.__module__}.{func.__qualname__}".encode())
    _code(func.__code__, update)
    names = frozenset(_names(func.__code__))
    for name in sorted(names):
        if name in func.__globals__:
            update(b"global " + name.encode())
            _value(func.__globals__[name], update, seen, names)
    for default in func.__defaults__ or ():
        update(b"default")
        _value(default, update, seen, names)
    for name, default in sorted((func.__kwdefaults__ or {}).items()):
        update(b"keyword default " + name.encode())
        _value(default, update, seen, names)
    for cell in func.__closure__ or ():
        try:
            contents = cell.cell_contents
        except ValueError:  # an empty cell
            update(b"<empty>")
        else:
            update(b"cell")
            _value(contents, update, seen, names)


def fingerprint(*objects):
    """Hex digest over the given functions (dispatchers or plain) and values."""
    digest = hashlib.sha256()
    seen = set()
    for obj in objects:
        _value(obj, digest.update, seen)
    return digest.hexdigest()[:24]
