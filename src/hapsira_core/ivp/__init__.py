"""``solve_ivp`` for N objects at once: scipy's explicit Runge-Kutta methods as ``hjit`` code.

`solve_ivp()` takes numpy arrays (`.api`) or Dask arrays, routed by
`hapsira_core.fronts`; the solver is built from
parts, each a module: the methods and their tableaux (`.methods`,
`.butcher`), the stage code generator (`.stages`), state
arithmetic per dimension (`.state`), step-size control
(`.control`), events (`.events`), the per-object loop
(`.loop`), row layouts (`.layout`) and kernels (`.build`).
"""

import functools as _functools

from . import api
from .api import (  # noqa: F401
    Event, EventBase, IVPResult, ObjectResult, Problem, Statuses, integrate)
from .layout import (  # noqa: F401
    BAD_INITIAL_STATE,
    MAX_STEPS,
    STATUS_MESSAGES,
    STEP_TOO_SMALL,
    SUCCESS,
    TERMINATED,
)
from .methods import METHODS  # noqa: F401
from .sensitivities import NotDifferentiable, jacobian  # noqa: F401

# The public solve_ivp: numpy arrays to `.api.solve_ivp`, Dask arrays to the Dask front.
from ..fronts import solve_ivp  # noqa: E402

_functools.update_wrapper(solve_ivp, api.solve_ivp)
