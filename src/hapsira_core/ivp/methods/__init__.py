"""The registry of methods: ``solve_ivp(method=...)`` takes a name here or a `Method`.

A new method is one module that defines ``METHOD`` (a `Method`: `.base` states the
contract) and one line below; a method of a family (`.rosenbrock`) is a tableau and its
``METHOD``. A `Method` given to ``solve_ivp`` that is not registered here (a user's
`Rosenbrock` over another tableau, say) is found by its name in this process
(`GIVEN`); its kernels are compiled in memory, not cached on disk (a new process
would not know the name).
"""

import difflib

from . import bdf, dop853, radau, rk23, rk45, rodas
from .base import ExplicitMethod, Functions, Method, check  # noqa: F401
from .rosenbrock import Rosenbrock, RosenbrockTableau  # noqa: F401

METHODS = {module.METHOD.name: module.METHOD
           for module in (dop853, rk45, rk23, radau, bdf, rodas)}

#: The `Method` objects given to ``solve_ivp`` that `METHODS` does not hold, by name.
GIVEN = {}


def get(method):
    """The `Method` ``method`` names (as scipy spells it), or ``method`` itself where it
    is a `Method` (checked, `.base.check`, and known by its name from then on: `GIVEN`);
    a ValueError naming ``method`` and listing the names otherwise."""
    if isinstance(method, Method):
        return _given(method)
    if isinstance(method, str):
        found = METHODS.get(method) or GIVEN.get(method)
        if found is not None:
            return found
    shown = repr(method) if isinstance(method, str) else type(method).__name__
    raise ValueError(f"method: expected one of {', '.join(map(repr, METHODS))} or a Method, "
                     f"got {shown}{_suggestion(method)}")


def builtin(name):
    """Whether ``name`` is a registered method's (`METHODS`), which a new process knows:
    only their kernels are cached on disk."""
    return name in METHODS


def _given(method):
    check(method)
    known = METHODS.get(method.name) or GIVEN.get(method.name)
    if known is method:
        return method
    if known is not None:
        if type(known) is type(method) and _attributes(known) == _attributes(method):
            return known  # an equal method (the same tableau): its kernels are built
        raise ValueError(f"method: another Method is called {method.name!r}; give yours "
                         "another name")
    GIVEN[method.name] = method
    return method


def _attributes(method):
    return {name: value for name, value in vars(method).items() if name != "_built"}


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
