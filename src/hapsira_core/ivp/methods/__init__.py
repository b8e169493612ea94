"""The registry of methods: ``solve_ivp(method=NAME)`` looks the name up here.

A new method is one module that defines ``METHOD`` (see `.base`) and
one line below.
"""

import difflib

from . import bdf, dop853, radau, rk23, rk45, rodas

METHODS = {module.METHOD.name: module.METHOD
           for module in (dop853, rk45, rk23, radau, bdf, rodas)}


def get(name):
    """The `Method` called ``name`` (as scipy spells it)."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise ValueError(f"method: expected one of {', '.join(map(repr, METHODS))}, "
                         f"got {name!r}{_suggestion(name)}") from None


def _suggestion(name):
    """``"; did you mean 'Radau'?"`` for a name that differs from a method's in case only
    or is close to one (difflib), else ``""``."""
    if not isinstance(name, str):
        return ""
    same = [known for known in METHODS if known.lower() == name.lower()]
    close = same or difflib.get_close_matches(name, METHODS, n=1)
    if not close:  # 'rodas' for 'Rodas5P', 'dop' for 'DOP853': the case alone hid them
        close = difflib.get_close_matches(name.upper(), [m.upper() for m in METHODS], n=1)
        close = [m for m in METHODS if close and m.upper() == close[0]]
    return f"; did you mean {close[0]!r}?" if close else ""
