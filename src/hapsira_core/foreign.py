"""Foreign functions: one C source, declared once, called from ``hjit`` code on every target.

::

    from hapsira_core.foreign import declare

    density = declare("double density(double h, const double *p)", "density.c")

    @hjit
    def f(t, rr, vv, k, p):
        rho = density(norm(rr) - 6378.137, p)      # the C function, from any hjit code
        ...

The C file marks each of its functions with ``HAPSIRA_FUNC``::

    HAPSIRA_FUNC double density(double h, const double *p)
    {
        return p[0] * exp(-(h - p[1]) / p[2]);
    }

and is written in the common subset of C and C++ (the GPU compiles it as
CUDA C++), without ``#include``: ``<math.h>`` and ``<stdint.h>`` come with the
declaration on the host; on the GPU the CUDA math functions need none.

How one source reaches each target (each target's ``declare_foreign``, in
`hapsira_core.targets`; the C side, parsing and compiling, is `hapsira_core.ctools`):

* ``cpu``, ``parallel``: the source, with a generated exported wrapper of a
  unique name, is compiled once by the host C compiler into a shared library
  under ``HAPSIRA_CACHE_DIR/foreign``, loaded with
  ``llvmlite.binding.load_library_permanently`` and called from numba as an
  external function by its symbol name (no function pointer is frozen into
  compiled code, so callers stay cacheable on disk).
* ``cuda``: the source plus a generated wrapper in numba's device ABI
  (``extern "C" __device__ int sym(double *ret, ...)``, returning 0) is
  declared with ``numba.cuda.declare_device(..., link=[CUSource])``: every
  kernel that calls it, however deep, links it (LTO when nvJitLink is there);
  nobody writes ``link=``. Precompiled PTX, LTO-IR, cubin or fatbin can be
  given instead (``device_code=``).
* the CUDA simulator (which only stubs ``declare_device``): the host library,
  called through ``ctypes`` from the simulated Python, so that CI runs the
  foreign path on all three targets.

``HAPSIRA_FUNC`` is ``static`` on the host and ``static __device__`` on the
GPU: every function of the file stays private to its library, and only the
generated wrapper is visible, under a name made of the file's path and the
prototype (made unique within a process): two files, or two versions of one
file, never collide.

Host compiler: ``HAPSIRA_CC``, else ``CC``, else Python's own build compiler
(``sysconfig``), else ``cc``, ``gcc`` or ``clang`` on the ``PATH``; flags of
your own go in ``declare(..., flags=[...])``. Both are read when a library is
built. The library's file name is a hash of the source, prototype, flags,
compiler version and this library's version: an unchanged source loads the
library without compiling; a changed one builds a new library.
"""

import keyword
import os
import sys
import types as pytypes

from .ctools.prototype import PTR
from .ctools.sources import (  # noqa: F401  (public names)
    CompilerNotFoundError, ForeignCompileError, _Declaration, _record)
from .ctools.toolchain import (DEFAULT_FLAGS, compile_count,  # noqa: F401
                               folder_of_libraries, use_private_folder)

__all__ = ["declare", "ForeignCompileError", "CompilerNotFoundError", "compile_count",
           "DEFAULT_FLAGS"]

_callees_by_fingerprint = {}  # declarations done in this process, so a repeat costs nothing
_symbols = {}  # exported name -> fingerprint of the code that has it in this process


def _declare_for_target(decl):
    from .targets import active
    return active.declare_foreign(decl)


# --------------------------------------------------------------------------- the hjit wrapper

def _symbol_for_process(decl):
    """The exported name, made unique in this process: two versions of one file
    declared in one session (an edit in a notebook) must not share it, as the
    first library loaded would answer for both."""
    symbol = decl.symbol
    if _symbols.setdefault(symbol, decl.fingerprint) != decl.fingerprint:
        symbol = f"{symbol}_{decl.fingerprint[:12]}"
        _symbols[symbol] = decl.fingerprint
    decl.symbol = symbol


class _Callees(pytypes.ModuleType):
    """The target's callees of one declaration (``call``, ``convert0``...), made
    on first use.

    A module whose ``__hapsira_fingerprint__`` is the fingerprint of the C: the
    kernel fingerprint (:mod:`hapsira_core.kernels.fingerprint`) hashes that and the
    name, never the callees themselves (on cuda an object whose repr changes
    from process to process), and reading it compiles nothing. Made on first
    use: numba imports generated modules by name while it reads its disk
    cache, also old versions that nothing calls any more, which must not be
    compiled for that.
    """

    def __init__(self, record, fingerprint):
        super().__init__(f"hapsira_foreign_callees_{fingerprint[:24]}")
        self.__hapsira_fingerprint__ = fingerprint
        self._record = record

    def __getattr__(self, name):  # only for attributes not there yet
        if name.startswith("__") or "call" in self.__dict__:
            raise AttributeError(name)
        self.load()
        return getattr(self, name)

    def load(self):
        """Compile or load the function for the active target (once)."""
        if "call" not in self.__dict__:
            decl = _Declaration(self._record)
            _symbol_for_process(decl)
            call, converters, library = _declare_for_target(decl)
            for position, convert in enumerate(converters):
                setattr(self, f"convert{position}", convert)
            self.decl, self.library, self.call = decl, library, call
        return self


def _callees(record):
    """The one :class:`_Callees` of this declaration in this process."""
    fingerprint = _Declaration(record).fingerprint
    if fingerprint not in _callees_by_fingerprint:
        _callees_by_fingerprint[fingerprint] = _Callees(record, fingerprint)
    return _callees_by_fingerprint[fingerprint]


def _python_name(name):
    return name + "_" if keyword.iskeyword(name) else name


def _module_source(decl):
    """The generated module: the declaration, and the one Python source of the
    callable (convert each argument, then call C) for every target."""
    names = [p.name for p in decl.params]
    doc = f"C function {decl.prototype} of {decl.display} (fingerprint {decl.fingerprint})."
    lines = [f"# generated by hapsira_core.foreign: {decl.prototype} of {decl.display}.",
             "# Importing it declares the function on the active target (numba imports it",
             "# by name when it loads a cached caller). Safe to delete.",
             "import math as _hapsira_math", "",
             "from hapsira_core import foreign as _hapsira_foreign", "",
             f"_hapsira_callees = _hapsira_foreign._callees({decl.record!r})", "", "",
             f"def {_python_name(decl.name)}({', '.join(names)}):", f"    {doc!r}"]
    args = []
    for position, param in enumerate(decl.params):
        convert = f"_hapsira_callees.convert{position}({param.name})"
        if param.kind == PTR:
            lines.append(f"    _c{position}, _ok{position} = {convert}")
            lines.append(f"    if not _ok{position}:")
            lines.append("        return _hapsira_math.nan  # a strided view: C would read "
                         "other numbers")
        else:
            lines.append(f"    _c{position} = {convert}")
        args.append(f"_c{position}")
    lines.append(f"    return _hapsira_callees.call({', '.join(args)})")
    lines += ["", "",
              f"_hapsira_function = _hapsira_foreign._hjit_function({_python_name(decl.name)}, "
              "_hapsira_callees)"]
    return "\n".join(lines) + "\n"


def _hjit_function(pyfunc, callees):
    """The generated function compiled for the target, with the declaration's attributes."""
    from .jit import hjit

    function = hjit(pyfunc)
    decl = _Declaration(callees._record)
    function.prototype = decl.prototype
    function.fingerprint = decl.fingerprint
    function.source_path = decl.path
    return function


def _folder():
    """The folder of libraries and generated modules: under ``HAPSIRA_CACHE_DIR``,
    or, where that cannot be written, one of this process (after the cache's one
    `CacheWarning`; before, every declaration raised from ``os.makedirs``)."""
    from .kernels import cache
    if not cache.usable():
        folder = use_private_folder()
        if __path__ != [folder]:
            __path__[:] = [folder]
        return folder
    return folder_of_libraries()


#: The generated modules are submodules of this one, found in the cache folder:
#: any process can import them by name (numba does, to rebuild a cached caller
#: that refers to one), and importing one declares its function.
__path__ = [folder_of_libraries()]


def _module(decl):
    """Import (after writing, the first time) the generated module of ``decl``."""
    import importlib

    name = f"{__name__}.{decl.name}_{decl.fingerprint[:24]}"
    if name in sys.modules:
        return sys.modules[name]
    path = os.path.join(_folder(), name.rsplit(".", 1)[1] + ".py")
    if not os.path.exists(path):
        os.makedirs(_folder(), exist_ok=True)
        partial = f"{path}.{os.getpid()}.tmp"
        with open(partial, "w", encoding="utf-8") as out:
            out.write(_module_source(decl))
        os.replace(partial, path)  # atomic: concurrent processes see all of it or nothing
        importlib.invalidate_caches()
    return importlib.import_module(name)


def declare(prototype, source=None, *, language=None, flags=(), device_code=None,
            device_abi="c"):
    """Declare a C function once; returns an ``hjit`` function that calls it on the active target.

    Parameters
    ----------
    prototype : str
        Its C prototype, e.g. ``"double density(double h, const double *p)"``:
        returns ``double``; parameters ``double``, ``int64_t`` (or ``long
        long``) and ``const double *`` (a float64 array, e.g. the params row
        ``p`` or a slice of it, passed as its data pointer). The C definition
        must have exactly this type (checked by the compiler).
    source : str or os.PathLike
        The C file (``.c``; ``.cu``/``.cpp`` are compiled as C++ on the host)
        or the C text itself (a string with a newline or a ``{``). Its
        functions are marked ``HAPSIRA_FUNC``; see the module docstring.
    language : {"c", "c++"}, optional
        How the host compiles it; from the file suffix by default (text: C).
    flags : sequence of str
        Extra host compiler flags (part of the cache key).
    device_code : str or os.PathLike, optional
        cuda only: a precompiled ``.ptx``, ``.ltoir``, ``.cubin`` or
        ``.fatbin`` file (or a ``.cu`` file) linked instead of ``source``
        compiled for the GPU. It defines the function under the prototype's
        name, ``extern "C" __device__``, in the C ABI (``device_abi="c"``:
        returns the double) or numba's (``"numba"``: ``int name(double *ret,
        ...)`` returning 0).

    Returns
    -------
    function
        An ``hjit`` function with the prototype's name and parameters, with
        the attributes ``prototype``, ``fingerprint`` (hex hash of the code,
        for kernel caches), ``symbol`` (the exported name), ``library`` (the
        host library's path, None on the GPU) and ``source_path``. Passing
        an array that is not contiguous (``p[::2]``) where C takes a pointer
        gives NaN.

    Raises
    ------
    ForeignCompileError
        The C does not compile: names the file, the line and the compiler's
        message (also when the definition does not match the prototype).
    CompilerNotFoundError
        A host target (or the simulator) and no C compiler.
    ValueError, TypeError
        A malformed prototype, an unsupported C type, bad arguments.
    """
    record = _record(prototype, source, language, flags, device_code, device_abi)
    _folder()  # first: where the library goes (a folder of this process if the cache's is unusable)
    callees = _callees(record).load()  # compile or load now, so that errors come from here
    function = _module(callees.decl)._hapsira_function
    function.symbol, function.library = callees.decl.symbol, callees.library
    return function
