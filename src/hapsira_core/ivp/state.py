"""Arithmetic on a state of n floats held as a tuple, generated once per n.

Tuples, not arrays: on the GPU they live in registers, and numba unrolls
every operation on them. numba cannot build a tuple of variable length, so
each operation is written out for a given n by `ops()` (the same way
`.stages` writes out the Runge-Kutta stages) and compiled as an
``hjit`` function.
"""

import functools
import math
import types

from ..jit import hjit

#: Largest state dimension the generated code is built for. Every stage is n
#: statements of straight-line code, and numba's compile time grows faster than
#: the code: DOP853 at n = 32 compiles in minutes (measured in docs/architecture.md).
MAX_N = 32


def _tuple(items):
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


def _sources(n):
    """Source of every operation for states of n components."""
    idx = range(n)
    sources = {
        # y + a * x
        "axpy": f"def axpy(a, x, y):\n    return {_tuple([f'y[{i}] + a * x[{i}]' for i in idx])}\n",
        "sub": f"def sub(x, y):\n    return {_tuple([f'x[{i}] - y[{i}]' for i in idx])}\n",
        "scale": f"def scale(a, x):\n    return {_tuple([f'a * x[{i}]' for i in idx])}\n",
        "is_finite": "def is_finite(y):\n    return " + " and ".join(
            f"math.isfinite(y[{i}])" for i in idx) + "\n",
        "load": f"def load(a, start):\n    return {_tuple([f'a[start + {i}]' for i in idx])}\n",
        "load_row": f"def load_row(a, j):\n    return {_tuple([f'a[j, {i}]' for i in idx])}\n",
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
        "inverse": f"def inverse(x):\n    return {_tuple([f'1.0 / x[{i}]' for i in idx])}\n",
        # atol + max(|y|, |y_new|) * rtol (Hairer II.4, eq. 4.10); the tolerances are
        # read from the row here, where they are needed, not carried through a step.
        # Never below the smallest normal float: with atol = 0 a component that is
        # exactly 0 would make 0/0 (scipy fails there); an error in it still rejects.
        "error_scale": "def error_scale(y, y_new, tol, start):\n    return " + _tuple(
            [f"max(tol[start + {n + i}] + max(abs(y[{i}]), abs(y_new[{i}])) * tol[start + {i}],"
             f" 2.2250738585072014e-308)" for i in idx]) + "\n",
    }
    return sources


@functools.lru_cache(maxsize=None)
def ops(n):
    """The operations on n-component states, as ``hjit`` functions in a namespace.

    ``axpy(a, x, y) = y + a x``, ``sub``, ``scale``, ``is_finite``,
    ``load(array, start)``, ``load_row(a, j)``/``store_row(a, j, y)`` on 2-D
    arrays, ``fill_row``, ``weighted_sum_squares``, ``scaled_sum_squares``,
    ``inverse``, and ``error_scale(y, y_new, tol, start)``, which reads
    ``rtol`` at ``tol[start:start+n]`` and ``atol`` right after it.
    """
    if not isinstance(n, int) or not 1 <= n <= MAX_N:
        raise ValueError(f"state dimension: expected 1 to {MAX_N} components, got {n!r}")
    # generated functions belong to this module: numba imports it to reload a cached kernel
    namespace = {"math": math, "__name__": __name__}
    compiled = {"n": n}
    for name, source in _sources(n).items():
        exec(compile(source, f"<hapsira state ops n={n}: {name}>", "exec"), namespace)
        compiled[name] = hjit(namespace[name], cache=False)
    return types.SimpleNamespace(**compiled)
