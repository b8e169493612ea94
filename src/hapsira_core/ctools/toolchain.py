"""The host C compiler: finding it, and building a declaration's shared library once."""

import os
import platform
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile

from .. import settings
from .sources import CompilerNotFoundError, _compile_error, _hash

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


def compile_count():
    """How many host libraries this process has compiled (cached ones do not count)."""
    return _compiles


#: A folder of this process alone, once `use_private_folder` was called: where
#: libraries go when ``HAPSIRA_CACHE_DIR`` cannot be written.
_private_folder = None


def folder_of_libraries():
    """Where compiled libraries and generated declaration modules live."""
    if _private_folder is not None:
        return _private_folder
    return os.path.join(settings.CACHE_DIR, "foreign")


def use_private_folder():
    """From now on, build libraries in a temporary folder of this process (removed
    at its exit): ``HAPSIRA_CACHE_DIR`` cannot be used (`hapsira_core.kernels.cache.usable`
    said so, with its one warning). Returns the folder."""
    global _private_folder
    if _private_folder is None:
        import atexit
        _private_folder = tempfile.mkdtemp(prefix="hapsira-foreign-")
        atexit.register(shutil.rmtree, _private_folder, ignore_errors=True)
    return _private_folder


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
        raise TypeError(f"{decl.name}: compiling for the host (the cpu and parallel "
                        "targets, the CUDA simulator) needs the C source (source=...); "
                        "device_code alone serves the GPU only")
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
    folder = folder_of_libraries()
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


