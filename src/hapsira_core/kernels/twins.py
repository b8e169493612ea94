"""A user function's source and the twins made from it: what the source rewrites
(`guard`, `reciprocals`, `derivatives`) share.

A twin is made by ``exec`` of rewritten source in the function's own names (its
globals and the values of its closure cells). Its source is registered with
``linecache`` under its file name, so that a later rewrite (a guarded twin of a
reciprocal twin) and numba's error messages can read it again.
"""

import ast
import inspect
import linecache
import textwrap


class SourceUnavailable(ValueError):
    """The function's source cannot be read (made by ``exec``, a lambda inside an expression)."""


def definition(py_func):
    """``(source, module tree, its def statement)`` of plain Python function ``py_func``,
    or `SourceUnavailable` where its source cannot be read or is not a ``def``."""
    try:
        source = textwrap.dedent(inspect.getsource(py_func))
    except (OSError, TypeError) as error:
        raise SourceUnavailable(f"{py_func.__qualname__}: its source cannot be read "
                                f"({error})") from None
    tree = ast.parse(source)
    statement = tree.body[0]
    if not isinstance(statement, ast.FunctionDef) or statement.name != py_func.__name__:
        raise SourceUnavailable(f"{py_func.__qualname__}: not a def statement")
    return source, tree, statement


def namespace(py_func):
    """The names ``py_func`` reads: its globals and the values of its closure cells."""
    names = dict(py_func.__globals__)
    code = py_func.__code__
    for name, cell in zip(code.co_freevars, py_func.__closure__ or ()):
        names[name] = cell.cell_contents
    return names


def run(source, filename, names):
    """``exec`` ``source`` in ``names`` (returned, with what it defined), its text
    registered with ``linecache`` as ``filename``."""
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), names)
    return names


def twin(py_func, source, filename, names):
    """The function that ``source`` defines under ``py_func``'s name, run in ``names``,
    with ``py_func``'s defaults, module and qualified name."""
    made = run(source, filename, names)[py_func.__name__]
    made.__defaults__ = py_func.__defaults__
    made.__kwdefaults__ = py_func.__kwdefaults__
    made.__module__ = py_func.__module__
    made.__qualname__ = py_func.__qualname__
    return made
