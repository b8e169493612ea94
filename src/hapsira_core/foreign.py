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

How one source reaches each target (the target-specific pieces are the
``_declare_*`` functions below, chosen by ``settings.TARGET``):

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

import ctypes
import hashlib
import keyword
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import types as pytypes

import numpy as np

from . import __version__, settings

__all__ = ["declare", "ForeignCompileError", "CompilerNotFoundError", "compile_count",
           "DEFAULT_FLAGS"]

#: Bumped when the generated code changes, so that old libraries are not reused.
_FORMAT = 3

#: Host compiler flags. ``-ffp-contract=off``: no fused multiply-adds the numba
#: twin of a function would not do, so C and hjit agree to the last bit on CPUs
#: with FMA. ``-fvisibility=hidden``: only the wrapper is exported. The errors
#: are the ones the GPU compiler (C++) would raise anyway, caught on the host.
DEFAULT_FLAGS = ("-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-ffp-contract=off")
_C_ERRORS = ("-Werror=missing-prototypes", "-Werror=implicit-function-declaration",
             "-Werror=incompatible-pointer-types")
_CXX_ERRORS = ("-Werror=missing-declarations",)

_INSTALL_HINT = (
    "install a C compiler (Debian/Ubuntu: apt install gcc; Fedora/RHEL: dnf install gcc; "
    "macOS: xcode-select --install; conda: conda install -c conda-forge c-compiler), "
    "or point HAPSIRA_CC (or CC) at one"
)

_compiles = 0  # host libraries built by this process (tests check that a cached one is not)
_callees_by_fingerprint = {}  # declarations done in this process, so a repeat costs nothing
_symbols = {}  # exported name -> fingerprint of the code that has it in this process


def compile_count():
    """How many host libraries this process has compiled (cached ones do not count)."""
    return _compiles


class ForeignCompileError(RuntimeError):
    """C that does not compile, link or load: names the file, the line, the compiler's message.

    ``file``, ``line`` (or None), ``message`` (the first error) and ``output``
    (everything the compiler said) are attributes.
    """

    def __init__(self, file, line, message, output="", command=None):
        self.file, self.line, self.message, self.output = file, line, message, output
        where = f"{file}, line {line}" if line is not None else f"{file}"
        text = f"{where}: {message}"
        if output:
            head = f" ({' '.join(command)})" if command else ""
            text += f"\n--- compiler output{head} ---\n{output.rstrip()}"
        super().__init__(text)


class CompilerNotFoundError(ForeignCompileError):
    """No host C compiler: says what to install."""

    def __init__(self, detail):
        RuntimeError.__init__(self, f"no C compiler for foreign functions: {detail}; "
                                    f"{_INSTALL_HINT}")
        self.file, self.line, self.message, self.output = None, None, detail, ""


# --------------------------------------------------------------------------- prototypes

F64, I64, PTR = "float64", "int64", "float64 array"
_C_SPELLINGS = {  # C type as written -> kind
    "double": F64,
    "int64_t": I64, "long long": I64, "long long int": I64,
    "signed long long": I64, "signed long long int": I64,
    "const double *": PTR, "double const *": PTR, "double *": PTR,
}
_C_WORDS = {"const", "double", "float", "int", "long", "short", "char", "signed", "unsigned",
            "void", "volatile", "restrict", "int64_t", "int32_t", "uint64_t", "size_t", "bool"}
_PROTOTYPE = re.compile(r"^\s*(?P<ret>[A-Za-z_][\w\s\*]*?)\s*\b(?P<name>[A-Za-z_]\w*)\s*"
                        r"\((?P<params>[^()]*)\)\s*;?\s*$")
_SUPPORTED = "double (float64), int64_t or long long (int64), const double * (a float64 array)"


class _Param:
    def __init__(self, ctype, kind, name):
        self.ctype, self.kind, self.name = ctype, kind, name


def _parse_prototype(prototype):
    """``"double f(double x, const double *p)"`` -> (name, [_Param]); ValueError/TypeError."""
    if not isinstance(prototype, str):
        raise TypeError(f"prototype: expected a C prototype string such as "
                        f"'double density(double h, const double *p)', got {prototype!r}")
    match = _PROTOTYPE.match(prototype)
    if match is None:
        raise ValueError(f"prototype: expected a C prototype such as "
                         f"'double density(double h, const double *p)', got {prototype!r}")
    name, ret = match["name"], " ".join(match["ret"].split())
    if ret != "double":
        raise TypeError(f"prototype {prototype!r}: the return type must be double "
                        f"(a float64), got {ret!r}")
    text = match["params"].strip()
    params = []
    if text not in ("", "void"):
        for position, piece in enumerate(text.split(",")):
            params.append(_parse_param(prototype, position, piece))
    used = set()
    for position, param in enumerate(params):  # Python names for the wrapper
        pyname = param.name or f"arg{position}"
        while keyword.iskeyword(pyname) or pyname in used or pyname.startswith("_"):
            pyname = f"arg{position}" if pyname != f"arg{position}" else pyname + "_"
        used.add(pyname)
        param.name = pyname
    return name, params


def _parse_param(prototype, position, piece):
    tokens = re.findall(r"[A-Za-z_]\w*|\*|\[\s*\]|\S", piece)
    if not tokens:
        raise ValueError(f"prototype {prototype!r}: parameter {position + 1} is empty")
    name = None
    if tokens[-1] == "[]" or re.fullmatch(r"\[\s*\]", tokens[-1]):
        tokens = tokens[:-1] + ["*"]  # `const double p[]` is `const double *p`
        if len(tokens) > 1 and tokens[-2] not in _C_WORDS and tokens[-2] != "*":
            name = tokens.pop(-2)
    elif re.fullmatch(r"[A-Za-z_]\w*", tokens[-1]) and tokens[-1] not in _C_WORDS:
        name = tokens.pop()
    ctype = re.sub(r"(\w)\*", r"\1 *", re.sub(r"\s*\*\s*", "*", " ".join(tokens)))
    if any(not re.fullmatch(r"[A-Za-z_]\w*|\*", t) for t in tokens):
        raise ValueError(f"prototype {prototype!r}: cannot read parameter {position + 1} "
                         f"{piece.strip()!r}")
    kind = _C_SPELLINGS.get(ctype)
    if kind is None:
        raise TypeError(f"prototype {prototype!r}: parameter {position + 1} "
                        f"({piece.strip()!r}) has the unsupported type {ctype!r}; "
                        f"supported: {_SUPPORTED}")
    return _Param(ctype, kind, name)


# --------------------------------------------------------------------------- sources

def _record(prototype, source, language, flags, device_code, device_abi):
    """The declaration as plain values (the generated module stores it, see _module_source)."""
    _parse_prototype(prototype)  # a bad prototype fails before anything is read or compiled
    path, text = _read_source(source)
    if isinstance(flags, str) or not all(isinstance(f, str) for f in flags):
        raise TypeError(f"flags: expected a sequence of strings, got {flags!r}")
    device_hash = None
    if device_code is not None:
        if not isinstance(device_code, (str, os.PathLike)):
            raise TypeError(f"device_code: expected the path of a .ptx, .ltoir, .cubin, "
                            f".fatbin or .cu file, got {type(device_code).__name__}")
        device_code = os.path.abspath(os.fspath(device_code))
        try:
            with open(device_code, "rb") as handle:
                device_hash = hashlib.sha256(handle.read()).hexdigest()
        except FileNotFoundError:
            raise FileNotFoundError(f"device_code: no file {device_code!r}") from None
    if device_abi not in ("c", "numba"):
        raise ValueError(f"device_abi: expected 'c' or 'numba', got {device_abi!r}")
    if text is None and device_code is None:
        raise TypeError("source: expected a C file path or C source text, got None")
    return {"prototype": " ".join(prototype.split()), "display": path,
            "path": os.path.abspath(path) if path else None, "text": text,
            "language": _language(language, path), "flags": tuple(flags),
            "device_code": device_code, "device_hash": device_hash, "device_abi": device_abi}


class _Declaration:
    """Everything about one foreign function that does not depend on the target."""

    def __init__(self, record):
        self.record = record
        self.prototype = record["prototype"]
        self.name, self.params = _parse_prototype(self.prototype)
        self.path, self.text = record["path"], record["text"]
        self.display = record["display"] or f"<source of {self.name}>"
        self.language, self.flags = record["language"], tuple(record["flags"])
        self.device_code, self.device_abi = record["device_code"], record["device_abi"]
        #: hash of everything declared (the C text, where it is, how it is compiled,
        #: the device code's hash) and of this library's version; it names the
        #: generated module, whose record must be the same
        self.fingerprint = _hash(_FORMAT, __version__, sorted(record.items()))
        # The exported name stays when the C body changes (it depends on the file
        # and the prototype only): numba's disk cache may keep a caller compiled
        # against an older body, and its call by name must find the new one, not
        # a missing symbol (a segmentation fault). _symbol_for_process makes it
        # unique within one process.
        where = self.path or "<string>"
        self.symbol = f"hapsira_{self.name}_{_hash(self.prototype, where, self.language)[:16]}"

    def source_line_of_definition(self):
        """The line of the source where the function seems to be defined (for messages)."""
        for number, line in enumerate((self.text or "").splitlines(), 1):
            if re.search(rf"\b{re.escape(self.name)}\s*\(", line):
                return number
        return None

    def _check(self, cxx):
        """A compile-time check that the C definition has the declared prototype."""
        ctypes_ = ", ".join(p.ctype for p in self.params) or "void"
        message = f"the C definition of {self.name} differs from its declaration"
        if cxx:
            return ("template <typename A, typename B> struct hapsira_same_type "
                    "{ static const bool value = false; };\n"
                    "template <typename A> struct hapsira_same_type<A, A> "
                    "{ static const bool value = true; };\n"
                    f"static_assert(hapsira_same_type<decltype({self.name}), "
                    f"double({ctypes_})>::value,\n    \"{message}\");\n")
        return (f"_Static_assert(__builtin_types_compatible_p(__typeof__({self.name}), "
                f"double({ctypes_})),\n    \"{message}\");\n")

    def _user_part(self):
        path = self.display.replace("\\", "\\\\").replace('"', '\\"')
        return f'#line 1 "{path}"\n{self.text}\n#line 1 "{_DECLARATION_FILE}"\n'

    def host_source(self):
        """The translation unit for the host compiler: the source and an exported wrapper."""
        cxx = self.language == "c++"
        params = ", ".join(f"{p.ctype} a{i}" for i, p in enumerate(self.params)) or "void"
        args = ", ".join(f"a{i}" for i in range(len(self.params)))
        export = ('extern "C" ' if cxx else "") + '__attribute__((visibility("default")))'
        return (f"/* generated by hapsira_core.foreign: {self.prototype} from {self.display} "
                "for the host; safe to delete */\n"
                "#include <math.h>\n#include <stdint.h>\n"
                "#define HAPSIRA_FUNC static\n"
                "#ifndef __CUDACC__\n#define __host__\n#define __device__\n"
                "#define __forceinline__ inline\n#endif\n"
                + self._user_part() + self._check(cxx)
                + f"{export} double {self.symbol}({params});\n"
                f"{export} double {self.symbol}({params})\n"
                f"{{\n    return {self.name}({args});\n}}\n")

    def cuda_source(self):
        """The CUDA C++ for NVRTC: the source and a wrapper in numba's device ABI."""
        params = "".join(f", {p.ctype} a{i}" for i, p in enumerate(self.params))
        args = ", ".join(f"a{i}" for i in range(len(self.params)))
        return (f"/* generated by hapsira_core.foreign: {self.prototype} from {self.display} "
                "for numba-cuda */\n"
                "typedef long long int64_t;  /* NVRTC has no <stdint.h> */\n"
                "#define HAPSIRA_FUNC static __device__\n"
                + self._user_part() + self._check(True)
                + f'extern "C" __device__ int {self.symbol}(double *hapsira_ret{params})\n'
                f"{{\n    *hapsira_ret = {self.name}({args});\n    return 0;\n}}\n")


_DECLARATION_FILE = "<hapsira declaration>"


def _read_source(source):
    """(path or None, text): a path (str without newline or brace, or PathLike) or C text."""
    if source is None:
        return None, None
    if isinstance(source, os.PathLike) or (
            isinstance(source, str) and "\n" not in source and "{" not in source):
        path = os.fspath(source)
        try:
            with open(path, encoding="utf-8") as handle:
                return path, handle.read()
        except FileNotFoundError:
            raise FileNotFoundError(f"source: no C file {path!r} (a string without a newline "
                                    "or '{' is read as a path)") from None
    if isinstance(source, str):
        return None, source
    raise TypeError(f"source: expected a C file path or C source text, got {type(source).__name__}")


def _language(language, path):
    if language is None:
        suffix = os.path.splitext(path)[1].lower() if path else ".c"
        language = "c++" if suffix in (".cu", ".cpp", ".cc", ".cxx") else "c"
    if language not in ("c", "c++"):
        raise ValueError(f"language: expected 'c' or 'c++', got {language!r}")
    return language


def _hash(*parts):
    digest = hashlib.sha256()
    for part in parts:
        digest.update(repr(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()


# --------------------------------------------------------------------------- errors

_DIAGNOSTIC = re.compile(
    r"^(?P<file>.+?)(?::(?P<line>\d+)(?::\d+)?|\((?P<line2>\d+)\)):\s*"
    r"(?:fatal |catastrophic )?error:\s*(?P<message>.*)$", re.MULTILINE)
_LINK_ERROR = re.compile(r"^(?P<file>[^\n:]+):(?P<line>\d+): (?P<message>undefined reference.*)$",
                         re.MULTILINE)


def _compile_error(decl, output, command=None):
    """A ForeignCompileError naming the user's file and line from a compiler's output."""
    match = _DIAGNOSTIC.search(output) or _LINK_ERROR.search(output)
    if match is None:
        return ForeignCompileError(decl.display, None, "the compiler failed", output, command)
    line = int(match["line"] or match.groupdict().get("line2") or 0) or None
    message = match["message"].strip()
    unmarked = re.search(r"no previous (prototype|declaration)|calling a __host__ function"
                         r"|without execution space", message)
    if _DECLARATION_FILE in match["file"]:
        # An error in the generated check or wrapper: the definition does not
        # fit the prototype, or there is none; point at the definition.
        line = decl.source_line_of_definition()
        if re.search(r"undeclared|not declared|is undefined", message) or line is None:
            message = f"no function {decl.name} is defined (declared as '{decl.prototype}')"
        elif "static assert" in message:
            message = (f"the C definition of {decl.name} has another type than the declared "
                       f"'{decl.prototype}'")
        else:
            message = f"{decl.name} as declared ('{decl.prototype}') does not fit: {message}"
    if unmarked:
        message += (" (mark every function of the file with HAPSIRA_FUNC: it makes them "
                    "private to the library and usable on the GPU)")
    return ForeignCompileError(decl.display, line, message, output, command)


# --------------------------------------------------------------------------- host library

_versions = {}


def _host_compiler():
    """The host C compiler as an argument list; CompilerNotFoundError if there is none."""
    for variable in ("HAPSIRA_CC", "CC"):
        value = os.environ.get(variable, "").strip()
        if value:
            command = shlex.split(value)
            if shutil.which(command[0]) is None:
                raise CompilerNotFoundError(f"{variable}={value!r} is not a program on the PATH")
            return command
    configured = sysconfig.get_config_var("CC")
    candidates = [shlex.split(configured)] if configured else []
    candidates += [["cc"], ["gcc"], ["clang"]]
    for command in candidates:
        if command and shutil.which(command[0]) is not None:
            return command
    raise CompilerNotFoundError("none of HAPSIRA_CC, CC, cc, gcc or clang was found")


def _compiler_version(command):
    key = tuple(command)
    if key not in _versions:
        try:
            result = subprocess.run(command + ["--version"], capture_output=True, text=True,
                                    timeout=60)
        except OSError as error:
            raise CompilerNotFoundError(f"{' '.join(command)} does not run: {error}") from None
        _versions[key] = (result.stdout or result.stderr).strip()
    return _versions[key]


def _library_suffix():
    return {"win32": ".dll", "darwin": ".dylib"}.get(sys.platform, ".so")


def _host_library(decl):
    """The path of the compiled host library of ``decl``: from the cache, or built now."""
    global _compiles
    if decl.text is None:
        raise TypeError(f"{decl.name}: the {settings.TARGET} target needs the C source "
                        "(source=...); device_code alone serves the GPU only")
    compiler = _host_compiler()
    cxx = decl.language == "c++"
    flags = list(DEFAULT_FLAGS) + list(_CXX_ERRORS if cxx else _C_ERRORS)
    if sys.platform.startswith("linux"):
        flags.append("-Wl,-z,defs")  # an undefined function fails here, not at load time
    if decl.path:
        flags += ["-I", os.path.dirname(decl.path)]
    flags += list(decl.flags)
    text = decl.host_source()
    # the whole translation unit (the C, the wrapper and its exported name),
    # the command and the compiler's version: any change builds a new library
    key = _hash(text, compiler, flags, _compiler_version(compiler),
                platform.machine(), sys.platform)
    folder = _folder()
    library = os.path.join(folder, f"{decl.name}-{key[:24]}{_library_suffix()}")
    if os.path.exists(library):
        return library
    os.makedirs(folder, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as scratch:
        source = os.path.join(scratch, f"{decl.name}.{'cpp' if cxx else 'c'}")
        with open(source, "w", encoding="utf-8") as out:
            out.write(text)
        partial = os.path.join(scratch, "lib" + _library_suffix())
        command = compiler + ["-x", "c++" if cxx else "c"] + flags + [source, "-x", "none",
                                                                        "-o", partial, "-lm"]
        try:
            # plain ASCII messages (no locale quotes), which the error parser reads
            result = subprocess.run(command, capture_output=True, text=True, timeout=600,
                                    env={**os.environ, "LC_ALL": "C", "LANG": "C"})
        except OSError as error:
            raise CompilerNotFoundError(f"{compiler[0]} does not run: {error}") from None
        if result.returncode != 0:
            raise _compile_error(decl, result.stderr + result.stdout, command)
        _compiles += 1
        # The finished library appears under its final name at once (a rename
        # is atomic): a concurrent process sees either nothing or all of it.
        os.replace(partial, library)
    return library


# --------------------------------------------------------------------------- argument checks

def _type_message(decl, position, received):
    param = decl.params[position]
    expected = {F64: "a float (C: double)", I64: "an integer (C: int64_t)",
                PTR: "a float64 array (C: const double *)"}[param.kind]
    return (f"{decl.name}(): argument {position + 1} ({param.name}) must be {expected}, "
            f"got {received}")


def _numba_converters(decl, intrinsic, errors, cgutils):
    """One numba intrinsic per argument: checks its type while compiling and
    converts it for the C call (arrays become their data pointer and a flag
    saying the data is contiguous, as C reads it)."""
    from numba.core import types

    def scalar(position, kind):
        target = types.float64 if kind == F64 else types.int64
        accepted = (types.Float, types.Integer, types.Boolean) if kind == F64 else (types.Integer,)

        @intrinsic
        def convert(typingctx, value):
            if not isinstance(value, accepted):
                raise errors.TypingError(_type_message(decl, position, value))

            def codegen(context, builder, signature, args):
                return context.cast(builder, args[0], signature.args[0], target)
            return target(value), codegen
        return convert

    def pointer(position):
        result = types.Tuple((types.CPointer(types.float64), types.boolean))

        @intrinsic
        def convert(typingctx, value):
            if not (isinstance(value, types.Array) and value.dtype == types.float64):
                raise errors.TypingError(_type_message(decl, position, value))

            def codegen(context, builder, signature, args):
                array = context.make_array(value)(context, builder, args[0])
                ok = cgutils.true_bit
                if value.layout != "C":
                    # contiguous in C order: each dimension longer than 1 has the stride
                    # of the dimensions after it (a view such as p[::2] is not)
                    shape = cgutils.unpack_tuple(builder, array.shape, value.ndim)
                    strides = cgutils.unpack_tuple(builder, array.strides, value.ndim)
                    expected = context.get_constant(types.intp, 8)
                    one = context.get_constant(types.intp, 1)
                    for extent, stride in zip(reversed(shape), reversed(strides)):
                        fits = builder.or_(builder.icmp_signed("<=", extent, one),
                                           builder.icmp_signed("==", stride, expected))
                        ok = builder.and_(ok, fits)
                        expected = builder.mul(expected, extent)
                return context.make_tuple(builder, result, (array.data, ok))
            return result(value), codegen
        return convert

    return [pointer(i) if p.kind == PTR else scalar(i, p.kind)
            for i, p in enumerate(decl.params)]


def _numba_signature(decl):
    from numba.core import types
    kinds = {F64: types.float64, I64: types.int64, PTR: types.CPointer(types.float64)}
    return types.float64(*(kinds[p.kind] for p in decl.params))


# --------------------------------------------------------------------------- per target

def _declare_host(decl):
    """cpu / parallel: the host library, called by symbol name (numba ExternalFunction)."""
    import llvmlite.binding as llvm
    from numba.core import cgutils, errors, types
    from numba.extending import intrinsic

    library = _host_library(decl)
    try:
        llvm.load_library_permanently(library)
    except RuntimeError as error:
        raise ForeignCompileError(decl.display, None, f"the compiled library {library} does "
                                  f"not load: {error}") from None
    call = types.ExternalFunction(decl.symbol, _numba_signature(decl))
    return call, _numba_converters(decl, intrinsic, errors, cgutils), library


def _declare_cuda(decl):
    """cuda: numba-cuda's declare_device, carrying the code to link with it."""
    from numba import cuda
    from numba.cuda import cgutils
    from numba.cuda.core import errors
    from numba.cuda.extending import intrinsic

    if decl.device_code is not None:
        link, symbol, abi = decl.device_code, decl.name, decl.device_abi
    else:
        source = decl.cuda_source()
        _check_cuda_source(decl, source)
        link, symbol, abi = cuda.CUSource(source, name=decl.display), decl.symbol, "numba"
    call = cuda.declare_device(symbol, _numba_signature(decl), link=[link], abi=abi)
    return call, _numba_converters(decl, intrinsic, errors, cgutils), None


def _check_cuda_source(decl, source):
    """Compile the CUDA source once now (NVRTC, LTO-IR for this GPU), so that bad C
    raises ForeignCompileError at declaration, not inside some kernel's link."""
    from numba import cuda
    from numba.cuda.cudadrv import nvrtc

    cc = cuda.get_current_device().compute_capability
    try:
        nvrtc.compile(source, decl.display, cc, ltoir=True)
    except Exception as error:  # NVRTC's error type differs between versions
        raise _compile_error(decl, str(error).replace("\x00", "")) from None


def _declare_simulator(decl):
    """The CUDA simulator: the host library through ctypes, from the simulated Python."""
    library = _host_library(decl)
    function = getattr(ctypes.CDLL(library), decl.symbol)
    c_types = {F64: ctypes.c_double, I64: ctypes.c_int64, PTR: ctypes.POINTER(ctypes.c_double)}
    function.restype = ctypes.c_double
    function.argtypes = [c_types[p.kind] for p in decl.params]

    def call(*args):
        # numpy's float64 keeps IEEE semantics in the simulated code that follows
        return np.float64(function(*args))

    def scalar(position, kind):
        if kind == I64:
            def accepted(value):  # as numba: integers only, no bool
                return isinstance(value, (int, np.integer)) and not isinstance(value, bool)
        else:
            def accepted(value):
                return isinstance(value, (int, float, np.integer, np.floating, np.bool_))

        def convert(value):
            if not accepted(value):
                raise TypeError(_type_message(decl, position, type(value).__name__))
            return float(value) if kind == F64 else int(value)
        return convert

    def pointer(position):
        def convert(value):
            array = getattr(value, "_ary", value)  # the simulator's device arrays wrap numpy
            if not (isinstance(array, np.ndarray) and array.dtype == np.float64):
                raise TypeError(_type_message(decl, position, type(value).__name__))
            if not array.flags.c_contiguous:
                return None, False
            return array.ctypes.data_as(c_types[PTR]), True
        return convert

    converters = [pointer(i) if p.kind == PTR else scalar(i, p.kind)
                  for i, p in enumerate(decl.params)]
    return call, converters, library


def _declare_for_target(decl):
    if settings.TARGET in ("cpu", "parallel"):
        return _declare_host(decl)
    if settings.cuda_simulator_enabled():
        return _declare_simulator(decl)
    return _declare_cuda(decl)


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
    kernel fingerprint (:mod:`hapsira_core.fingerprint`) hashes that and the
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
    return os.path.join(settings.CACHE_DIR, "foreign")


#: The generated modules are submodules of this one, found in the cache folder:
#: any process can import them by name (numba does, to rebuild a cached caller
#: that refers to one), and importing one declares its function.
__path__ = [_folder()]


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
    callees = _callees(record).load()  # compile or load now, so that errors come from here
    function = _module(callees.decl)._hapsira_function
    function.symbol, function.library = callees.decl.symbol, callees.library
    return function
