"""Arithmetic on a state of n floats, in one of two shapes chosen by the form of ``fun``.

``"tuple"``: the state is a tuple of n floats (registers on the GPU) and every
operation is written out for a given n by `ops()` (the same way `.stages`
writes out the Runge-Kutta stages), because numba cannot build a tuple of
variable length. Compile time grows with n faster than the code does, so this
shape is for small n (at most `TUPLE_MAX_N`).

``"array"``: the state is a row of the object's ``work`` array and every
operation is a loop over its n components, the same code whatever n is
(compile time flat in n). ``fun(t, y, p, dydt)`` fills ``dydt``.

Both shapes offer the same operations with the same arguments, so that the
loop and the methods are written once: every operation that makes a state
takes a destination row last (``dst``: a row of ``work`` named by `row()`),
which the tuple shape ignores (`row()` gives None there).
"""

import functools
import inspect
import math
import types

from ..jit import hjit, reciprocal
from ..kernels import twins
from ..kernels.cache import factory

#: Largest n for which a tuple-form ``fun(t, y, p) -> tuple`` is accepted: the tuple
#: shape's compile time grows steeply with n while the array shape's hardly does, and
#: above this the tuple shape no longer runs faster (docs/benchmarks.md, "State size").
TUPLE_MAX_N = 16

SHAPES = ("tuple", "array")


def _tuple(items):
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _tuple_sources(n):
    """Source of every operation on tuples of n components (``dst`` ignored)."""
    idx = range(n)
    sources = {
        # y + a * x
        "axpy": f"def axpy(a, x, y, dst):\n    return {_tuple([f'y[{i}] + a * x[{i}]' for i in idx])}\n",
        "sub": f"def sub(x, y, dst):\n    return {_tuple([f'x[{i}] - y[{i}]' for i in idx])}\n",
        "scale": f"def scale(a, x, dst):\n    return {_tuple([f'a * x[{i}]' for i in idx])}\n",
        "copy": "def copy(x, dst):\n    return x\n",
        "row": "def row(work, index):\n    return None\n",
        "is_finite": "def is_finite(y):\n    return " + " and ".join(
            f"math.isfinite(y[{i}])" for i in idx) + "\n",
        "load": f"def load(a, start, dst):\n    return {_tuple([f'a[start + {i}]' for i in idx])}\n",
        "store_row": "def store_row(a, j, y):\n" + "".join(
            f"    a[j, {i}] = y[{i}]\n" for i in idx),
        "fill_row": "def fill_row(a, j, value):\n" + "".join(
            f"    a[j, {i}] = value\n" for i in idx),
        # sum((x * w) ** 2), in component order
        "weighted_sum_squares": "def weighted_sum_squares(x, w):\n" + "".join(
            f"    q{i} = x[{i}] * w[{i}]\n" for i in idx)
        + "    return " + " + ".join(f"q{i} * q{i}" for i in idx) + "\n",
        # sum((x / s) ** 2), in component order
        "scaled_sum_squares": "def scaled_sum_squares(x, s):\n" + "".join(
            f"    q{i} = x[{i}] / s[{i}]\n" for i in idx)
        + "    return " + " + ".join(f"q{i} * q{i}" for i in idx) + "\n",
        "inverse": "def inverse(x, dst):\n    return "
                   f"{_tuple([f'reciprocal(x[{i}])' for i in idx])}\n",
        # atol + max(|y|, |y_new|) * rtol (Hairer II.4, eq. 4.10); the tolerances are
        # read from the row here, where they are needed, not carried through a step.
        # Never below the smallest normal float: with atol = 0 a component that is
        # exactly 0 would make 0/0 (scipy fails there); an error in it still rejects.
        "error_scale": "def error_scale(y, y_new, tol, start, dst):\n    return " + _tuple(
            [f"max(tol[start + {n + i}] + max(abs(y[{i}]), abs(y_new[{i}])) * tol[start + {i}],"
             f" 2.2250738585072014e-308)" for i in idx]) + "\n",
    }
    return sources


# The same operations on rows of n components, as loops (the tuple shape's arithmetic
# in the same order, so that both shapes give the same numbers). The source is the
# same for every n: only the constant N differs.
_ARRAY_SOURCE = """
def axpy(a, x, y, dst):
    for i in range(N):
        dst[i] = y[i] + a * x[i]
    return dst

def sub(x, y, dst):
    for i in range(N):
        dst[i] = x[i] - y[i]
    return dst

def scale(a, x, dst):
    for i in range(N):
        dst[i] = a * x[i]
    return dst

def copy(x, dst):
    for i in range(N):
        dst[i] = x[i]
    return dst

def row(work, index):
    return work[index]

def is_finite(y):
    for i in range(N):
        if not math.isfinite(y[i]):
            return False
    return True

def load(a, start, dst):
    for i in range(N):
        dst[i] = a[start + i]
    return dst

def store_row(a, j, y):
    for i in range(N):
        a[j, i] = y[i]

def fill_row(a, j, value):
    for i in range(N):
        a[j, i] = value

def weighted_sum_squares(x, w):
    total = 0.0
    for i in range(E):
        q = x[i] * w[i]
        total += q * q
    return total

def scaled_sum_squares(x, s):
    total = 0.0
    for i in range(E):
        q = x[i] / s[i]
        total += q * q
    return total

def inverse(x, dst):
    for i in range(N):
        dst[i] = reciprocal(x[i])
    return dst

def error_scale(y, y_new, tol, start, dst):
    for i in range(N):
        dst[i] = max(tol[start + N + i] + max(abs(y[i]), abs(y_new[i])) * tol[start + i],
                     2.2250738585072014e-308)
    return dst
"""

_NAMES = ("axpy", "sub", "scale", "copy", "row", "is_finite", "load", "store_row", "fill_row",
          "weighted_sum_squares", "scaled_sum_squares", "inverse", "error_scale")


@functools.lru_cache(maxsize=None)
def ops(n, shape="tuple", error_n=None):
    """The operations on n-component states of ``shape``, as ``hjit`` functions in a namespace.

    ``axpy(a, x, y, dst) = y + a x``, ``sub(x, y, dst)``, ``scale(a, x, dst)``,
    ``copy(x, dst)``, ``is_finite``, ``load(array, start, dst)``,
    ``store_row(a, j, y)`` on 2-D arrays, ``fill_row``, ``weighted_sum_squares``,
    ``scaled_sum_squares``, ``inverse(x, dst)``, and ``error_scale(y, y_new, tol,
    start, dst)``, which reads ``rtol`` at ``tol[start:start+n]`` and ``atol`` right
    after it. ``row(work, i)``: the destination row ``i`` of ``work`` (array shape;
    None for tuples, where ``dst`` is ignored). ``shape``, ``n`` and ``is_array``
    say which shape this is.

    ``error_n`` (array shape): the sums of squares, and so the error norms, run over
    the first ``error_n`` components only (``n_err``; all n by default): the state of
    ``solve_ivp(..., stm=True)`` is followed by its transition matrix, which is
    integrated on the state's steps without taking part in their control.
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"state dimension: expected a whole number of components >= 1, "
                         f"got {n!r}")
    if shape not in SHAPES:
        raise ValueError(f"state shape: expected one of {SHAPES}, got {shape!r}")
    # generated functions belong to this module: numba imports it to reload a cached kernel
    error_n = n if error_n is None else error_n
    if not (isinstance(error_n, int) and 1 <= error_n <= n) or (
            shape == "tuple" and error_n != n):
        raise ValueError(f"error_n: expected 1 to {n} (all n in the tuple shape), got "
                         f"{error_n!r}")
    # (reciprocal: 1 / x as the target takes it, `hapsira_core.jit.reciprocal`)
    namespace = {"math": math, "reciprocal": reciprocal, "__name__": __name__, "N": n,
                 "E": error_n}
    compiled = {"n": n, "n_err": error_n, "shape": shape, "is_array": shape == "array"}
    if shape == "tuple":
        for name, source in _tuple_sources(n).items():
            exec(compile(source, f"<hapsira state ops n={n}: {name}>", "exec"), namespace)
    else:
        exec(compile(_ARRAY_SOURCE, f"<hapsira array state ops n={n}>", "exec"), namespace)
    for name in _NAMES:
        compiled[name] = hjit(namespace[name], cache=False,
                              **(returns_a_view() if shape == "array" and name == "row" else {}))
    return types.SimpleNamespace(**compiled)


def returns_a_view():
    """hjit options of a function that returns an array it did not receive (a row of
    ``work``, or a state written to ``dst`` through other calls): inlined in numba's
    IR, because numba-cuda refuses a device function whose return value is an array
    other than one of its arguments ("Only accept returning of array passed into the
    function as argument"; the CUDA simulator accepts it). With it, the array-shape
    kernels compile for the GPU at any n, without spills (docs/gpu.md, "State size")."""
    return {"inline": "always"}


def fun_form(fun):
    """``"tuple"`` for ``fun(t, y, p) -> tuple``, ``"array"`` for ``fun(t, y, p, dydt)``,
    or None for any other number of positional parameters."""
    py = getattr(fun, "py_func", fun)
    try:
        parameters = inspect.signature(py).parameters.values()
    except (TypeError, ValueError):
        return None
    positional = [q for q in parameters if q.kind in (q.POSITIONAL_ONLY, q.POSITIONAL_OR_KEYWORD)
                  and q.default is q.empty]
    return {3: "tuple", 4: "array"}.get(len(positional))


def check_fun_form(fun, n):
    """The state shape for ``fun`` at n components; a ValueError naming ``fun`` where its
    form does not fit (a tuple form above `TUPLE_MAX_N`, or neither form)."""
    form = fun_form(fun)
    name = getattr(getattr(fun, "py_func", fun), "__qualname__", repr(fun))
    if form is None:
        raise ValueError(
            f"fun: expected fun(t, y, p) returning a tuple of n floats (n <= {TUPLE_MAX_N}) or "
            f"fun(t, y, p, dydt) filling the array dydt (any n); {name} takes neither")
    if form == "tuple" and n > TUPLE_MAX_N:
        raise ValueError(
            f"fun: {name} is the tuple form fun(t, y, p) -> tuple, accepted up to n = "
            f"{TUPLE_MAX_N} components, and the states have n = {n}: write it in the array "
            f"form fun(t, y, p, dydt), which fills dydt[0..{n - 1}] and returns nothing "
            "(it compiles once whatever n is; docs/api.md)")
    if form == "array" and _returns_value(fun):
        raise ValueError(
            f"fun: {name} takes 4 arguments, the array form fun(t, y, p, dydt), which fills "
            "dydt and returns nothing; it returns a value, which would be ignored. Drop the "
            f"return value, or write fun(t, y, p) -> tuple for n <= {TUPLE_MAX_N}")
    return form


def _returns_value(fun):
    """Whether the Python code of ``fun`` has a ``return`` of something other than None."""
    import dis
    code = getattr(getattr(fun, "py_func", fun), "__code__", None)
    if code is None:
        return False
    instructions = [i for i in dis.get_instructions(code) if i.opname not in ("CACHE", "NOP")]
    for before, this in zip(instructions, instructions[1:]):
        if this.opname == "RETURN_CONST" and this.argval is not None:
            return True
        if this.opname == "RETURN_VALUE" and not (
                before.opname == "LOAD_CONST" and before.argval is None):
            return True
    return False


@factory
def rhs(fun, shape, n=None):
    """``f(t, y, p, dst) -> state``: the right-hand side in the loop's call form.

    Tuple shape: ``fun(t, y, p)`` (``dst`` ignored); array shape: ``fun`` fills
    ``dst`` and the row is returned. A tuple-form ``fun`` in the array shape (a
    method that keeps its states in ``work``, `..methods.base.Method.state_shape`)
    needs ``n``: it is called on the row's n components as a tuple and its
    result written to ``dst``."""
    if shape == "tuple":
        @hjit
        def f(t, y, p, dst):
            return fun(t, y, p)
    elif fun_form(fun) == "tuple":
        if n is None:
            raise TypeError("rhs: a tuple-form fun in the array shape needs n")
        components = ", ".join(f"y[{i}]" for i in range(n)) + ("," if n == 1 else "")
        writes = "".join(f"    dst[{i}] = out[{i}]\n" for i in range(n))
        source = (f"def f(t, y, p, dst):\n    out = fun(t, ({components}), p)\n"
                  f"{writes}    return dst\n")
        names = twins.run(source, f"<hapsira tuple-to-row rhs n={n}>", {"fun": fun})
        f = hjit(names["f"])
    else:
        @hjit
        def f(t, y, p, dst):
            fun(t, y, p, dst)
            return dst
    return f
