"""Compile errors in user callbacks, told in the user's terms.

When a right-hand side ``f`` or an event's ``g`` does not compile, numba's
message starts deep inside its own type inference and the solver, and names
the user's code somewhere in the middle (36 to 51 lines of it, then as many of
the chained exception's). `user_function_error()` finds the user's function in
that message and builds an error that names it first, with numba's reason in a
line or two::

    user function 'my_rhs' (/home/me/model.py:14) does not compile: x = np.zeros(3) + "a"
    numba says: No implementation of function Function(<built-in function add>) found
    for signature: >>> add(array(float64, 1d, C), Literal[str](a))
    (numba's full message: set HAPSIRA_DEBUG=1)

With ``HAPSIRA_DEBUG`` set the whole of numba's message follows instead, and
the error keeps numba's exception as its cause (`chained`); without it the
cause is dropped, so that a traceback is the user's error alone. The
full message is always in the error's ``detail``.

Usage (inside the kernel runner, `hapsira_core.ivp.build.run()`)::

    try:
        kernel(...)
    except (numba.core.errors.TypingError, numba.core.errors.LoweringError) as exc:
        error = user_function_error(exc, [f] + [e.g for e in events])
        if error is exc:
            raise
        raise chained(error, exc)
"""

import inspect
import linecache
import os
import re

from .. import settings

__all__ = ["CallbackCompileError", "user_function_error", "chained"]


class CallbackCompileError(TypeError):
    """A user function (``f`` or an event's ``g``) that numba cannot compile.

    ``function``: its name; ``filename``, ``lineno``: where the offending
    line is (or its definition, if numba's message names no line of it);
    ``source_line``: that line's text (None if unknown); ``detail``: numba's
    message.
    """

    def __init__(self, message, function=None, filename=None, lineno=None, source_line=None,
                 detail=""):
        super().__init__(message)
        self.function = function
        self.filename = filename
        self.lineno = lineno
        self.source_line = source_line
        self.detail = detail


# numba names places as 'File "path", line N:' and '... at path (N)'
_LOCATIONS = re.compile(r'File "(?P<a>[^"]+)", line (?P<b>\d+)|\bat (?P<c>\S+) \((?P<d>\d+)\)')


def _python_function(fn):
    """The plain Python function behind an hjit/njit/cuda dispatcher (or ``fn`` itself)."""
    for attribute in ("py_func", "fn", "__wrapped__"):
        inner = getattr(fn, attribute, None)
        if inspect.isfunction(inner):
            return inner
    return fn if inspect.isfunction(fn) else None


def _same_file(path, filename):
    if path == filename:
        return True
    if path.startswith("<") or filename.startswith("<"):
        return False
    candidates = {os.path.realpath(path), os.path.realpath(os.path.join(os.getcwd(), path))}
    return os.path.realpath(filename) in candidates


class _Function:
    def __init__(self, fn):
        self.object = fn
        self.py = _python_function(fn)
        self.compiled = self.py is not fn  # a dispatcher wraps it
        self.name = getattr(self.py or fn, "__qualname__", None) or repr(fn)
        self.filename = self.first = self.last = None
        if self.py is not None:
            code = self.py.__code__
            self.filename = inspect.getsourcefile(self.py) or code.co_filename
            try:
                lines, first = inspect.getsourcelines(self.py)
                self.first, self.last = first, first + len(lines) - 1
            except (OSError, TypeError):
                self.first = self.last = code.co_firstlineno

    def contains(self, path, line):
        return (self.filename is not None and self.first is not None
                and self.first <= line <= self.last and _same_file(path, self.filename))

    def named_in(self, text):
        short = self.name.rsplit(".", 1)[-1]
        return f"<function {self.name} at" in text or f"<function {short} at" in text \
            or f"'{short}'" in text


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _chain(exc):
    """The exception and those it was raised from, once each (ours left out)."""
    seen = []
    while exc is not None and all(exc is not e for e in seen):
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return [e for e in seen if not isinstance(e, CallbackCompileError)]


def _message(exc):
    """numba's text: the messages of the exception chain, without terminal colours."""
    return _ANSI.sub("", "\n".join(str(e) for e in _chain(exc)))


def _frame_places(exc):
    """Places numba was typing or lowering, from the traceback's frames, innermost first.

    numba-cuda's TypingError carries no places in its message, but its
    traceback keeps numba's frames: their ``loc`` objects (file, line) and the
    functions being compiled (``func_id.func``). Returns ``(places, functions)``.
    """
    places, functions = [], []
    for error in _chain(exc):
        frames, tb = [], error.__traceback__
        while tb is not None:
            frames.append(tb.tb_frame)
            tb = tb.tb_next
        for frame in reversed(frames):
            for value in list(frame.f_locals.values()):
                try:
                    for candidate in (value, getattr(value, "loc", None)):
                        path = getattr(candidate, "filename", None)
                        line = getattr(candidate, "line", None)
                        if isinstance(path, str) and isinstance(line, int):
                            places.append((path, line))
                    func = getattr(getattr(value, "func_id", None), "func", None)
                    if inspect.isfunction(func):
                        functions.append(func)
                except Exception:  # noqa: BLE001 - a property that does not answer
                    continue
    return places, functions


def chained(error, cause):
    """``error``, to raise in place of numba's ``cause``: with ``HAPSIRA_DEBUG`` set,
    caused by it (a traceback shows numba's exception and its dump too); without it,
    with neither cause nor context, so that a traceback is ``error``'s few lines
    (``raise chained(error, exc)`` inside ``except ... as exc``)."""
    error.__cause__ = cause if settings.DEBUG else None
    error.__suppress_context__ = True
    return error


def reason(detail):
    """numba's reason in a line or two: the first line of its message that is not a
    'Failed in ... pipeline' or 'During: ...' line, with the next one when it ends
    with a colon (e.g. 'found for signature:' and the signature)."""
    lines = [line.strip() for line in detail.splitlines()]
    lines = [line for line in lines if line and not line.startswith(("Failed in", "During:"))]
    if not lines:
        return "(no message)"
    text = lines[0]
    if text.endswith(":") and len(lines) > 1:
        text += " " + lines[1]
    return text if len(text) <= 300 else text[:297] + "..."


def _numba_says(detail):
    """What a `CallbackCompileError` says of numba's message: its reason (`reason`),
    or all of it with ``HAPSIRA_DEBUG`` (read when the error is made)."""
    if settings.DEBUG:
        return "\n\nnumba says:\n" + detail
    return f"\nnumba says: {reason(detail)}\n(numba's full message: set HAPSIRA_DEBUG=1)"


def _tidy(detail):
    """numba's detail without its repeated 'Failed in ... pipeline' lines."""
    lines, previous = [], None
    for line in detail.splitlines():
        if line == previous and line.startswith("Failed in"):
            continue
        lines.append(line)
        previous = line
    return "\n".join(lines).strip()


def user_function_error(exc, functions):
    """An error naming the user function that made ``exc`` (a numba compile error).

    ``functions``: the user's functions (``f`` and the events' ``g``; hjit
    dispatchers or plain functions; None entries are ignored). numba's message
    (and its causes), then the places held by numba's frames in the
    traceback (numba-cuda's messages name none), are searched for places in
    these functions: the first one, numba's innermost, is the offending line
    (for an error inside a helper the user's function calls, the line of
    that call). Returns a
    `CallbackCompileError` (a ``TypeError``) whose message starts with
    ``"user function 'name' (file:line) does not compile: <source line>"``,
    then numba's reason (all of numba's message with ``HAPSIRA_DEBUG``); or ``exc`` itself when no user function is
    involved (then re-raise it unchanged), or when it is a
    `CallbackCompileError` already.

    A plain Python function (not ``@hjit``) that numba cannot type gives
    ``"user function 'name' (file:line) is not compiled: decorate it with
    @hjit ..."``.
    """
    if isinstance(exc, CallbackCompileError):
        return exc  # already told in the user's terms
    text = _message(exc)
    detail = _tidy(text)
    candidates = [_Function(fn) for fn in functions if fn is not None]

    places = [(m.group("a") or m.group("c"), int(m.group("b") or m.group("d")))
              for m in _LOCATIONS.finditer(text)]
    frame_places, compiling = _frame_places(exc)
    for path, line in places + frame_places:
        for fn in candidates:
            if fn.contains(path, line):
                source = linecache.getline(fn.filename, line).strip() or None
                return _build(fn, fn.filename, line, source, detail)

    for fn in candidates:
        if not fn.compiled and fn.py is not None and "Cannot determine Numba type of " \
                "<class 'function'>" in text:
            where = f"{fn.filename}:{fn.first}" if fn.filename else "unknown place"
            return CallbackCompileError(
                f"user function '{fn.name}' ({where}) is not compiled: decorate it with "
                "@hjit (from hapsira_core.jit import hjit)" + _numba_says(detail),
                fn.name, fn.filename, fn.first, None, detail)

    for fn in candidates:
        if fn.named_in(text) or any(fn.py is func for func in compiling):
            return _build(fn, fn.filename, fn.first, None, detail)
    return exc


def _build(fn, filename, line, source, detail):
    where = f"{filename}:{line}" if filename else "unknown place"
    what = source if source is not None else \
        "(numba's message names no line of it; see below)"
    message = f"user function '{fn.name}' ({where}) does not compile: {what}" + \
        _numba_says(detail)
    return CallbackCompileError(message, fn.name, filename, line, source, detail)


def check_returns(function, arguments, accept, expected):
    """Call the Python function behind ``function`` on sample ``arguments``; raise
    a `CallbackCompileError` naming it if what it returns is not ``accept``-ed.

    Used after a kernel failed, to tell "returns 5 values, the state has 6"
    instead of numba's tuple-unpacking message. Nothing is raised when the
    call itself fails (then numba's own message is the better one).
    """
    fn = _Function(function)
    if fn.py is None:
        return
    try:
        result = fn.py(*arguments)
    except Exception:  # noqa: BLE001 - not ours to judge
        return
    if accept(result):
        return
    where = f"{fn.filename}:{fn.first}" if fn.filename else "unknown place"
    raise CallbackCompileError(f"user function '{fn.name}' ({where}) returns "
                               f"{_describe(result)}; expected {expected}",
                               fn.name, fn.filename, fn.first)


def _describe(value):
    if isinstance(value, tuple):
        inner = ", ".join(_describe(item) if isinstance(item, tuple) else type(item).__name__
                          for item in value)
        return f"a tuple of {len(value)} ({inner})"
    return f"a {type(value).__name__}"


def is_real(value):
    import numbers

    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_state(value, n):
    """A tuple of ``n`` real numbers."""
    return isinstance(value, tuple) and len(value) == n and all(is_real(v) for v in value)
