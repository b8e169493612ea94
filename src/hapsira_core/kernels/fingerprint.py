"""A hash of what a compiled function computes: its code and everything it calls.

Numba's on-disk cache keys a function by its own source file, not by the
functions it calls; a cached kernel would then survive a change to the user's
right-hand side. Kernels are therefore cached under a name that includes this
fingerprint: the bytecode, constants and names of a function, the values in
its closure, and, recursively, the fingerprints of the jitted functions and
the numbers it refers to through its globals.
"""

import hashlib
import types


def _python_function(obj):
    """The plain Python function behind a numba dispatcher (or the function itself)."""
    func = getattr(obj, "py_func", obj)
    return func if isinstance(func, types.FunctionType) else None


def _code_parts(code, update, seen, globals_):
    update(code.co_code)
    update(repr(code.co_names).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _code_parts(const, update, seen, globals_)
        else:
            update(repr(const).encode())
    for name in code.co_names:
        if name in globals_:
            _value(globals_[name], update, seen)


def _value(value, update, seen):
    func = _python_function(value)
    if func is not None:
        _function(func, update, seen)
    elif isinstance(value, (int, float, complex, str, bytes, bool, type(None))):
        update(repr(value).encode())
    elif isinstance(value, tuple):
        for item in value:
            _value(item, update, seen)
    elif isinstance(value, types.ModuleType):
        update(value.__name__.encode())
    else:
        # Arrays and other objects numba freezes as constants: their repr.
        update(type(value).__qualname__.encode())
        update(repr(value).encode())


def _function(func, update, seen):
    if id(func) in seen:
        update(b"<seen>")
        return
    seen.add(id(func))
    update(f"{func.__module__}.{func.__qualname__}".encode())
    _code_parts(func.__code__, update, seen, func.__globals__)
    for cell in func.__closure__ or ():
        try:
            _value(cell.cell_contents, update, seen)
        except ValueError:  # an empty cell
            update(b"<empty>")


def fingerprint(*objects):
    """Hex digest over the given functions (dispatchers or plain) and values."""
    digest = hashlib.sha256()
    seen = set()
    for obj in objects:
        _value(obj, digest.update, seen)
    return digest.hexdigest()[:24]
