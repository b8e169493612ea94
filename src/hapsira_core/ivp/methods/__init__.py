"""The registry of methods: ``solve_ivp(method=NAME)`` looks the name up here.

A new method is one module that defines ``METHOD`` (see `.base`) and
one line below.
"""

from . import bdf, dop853, radau, rk23, rk45, rodas

METHODS = {module.METHOD.name: module.METHOD
           for module in (dop853, rk45, rk23, radau, bdf, rodas)}


def get(name):
    """The `Method` called ``name`` (as scipy spells it)."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"method: expected one of {', '.join(map(repr, METHODS))}, "
                         f"got {name!r}") from None
