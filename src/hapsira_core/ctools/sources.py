"""A foreign function's declaration as plain values, its translation units, and
the compiler diagnostics read back into the user's file and line."""

import hashlib
import os
import re

from .. import __version__
from .prototype import _parse_prototype

_INSTALL_HINT = (
    "install a C compiler (Debian/Ubuntu: apt install gcc; Fedora/RHEL: dnf install gcc; "
    "macOS: xcode-select --install; conda: conda install -c conda-forge c-compiler), "
    "or point HAPSIRA_CC (or CC) at one"
)

#: Bumped when the generated code changes, so that old libraries are not reused.
_FORMAT = 3


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


