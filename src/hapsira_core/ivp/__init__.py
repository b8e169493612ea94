"""``solve_ivp`` for N objects at once: scipy's explicit Runge-Kutta methods as ``hjit`` code.

`solve_ivp()` takes numpy arrays or Dask arrays, routed by `hapsira_core.fronts`
to their front; every front calls the core here (`.api`: `Problem`, `integrate`)
and returns the result types of `.results`. The solver is built from
parts, each a module: the methods and their tableaux (`.methods`,
`.butcher`), the stage code generator (`.stages`), state
arithmetic per dimension (`.state`), step-size control
(`.control`), events (`.events`), the per-object loop
(`.loop`), row layouts (`.layout`) and kernels (`.build`).
"""

from .api import Event, EventBase, Problem, integrate  # noqa: F401
from .layout import (  # noqa: F401
    BAD_INITIAL_STATE,
    JACOBIAN_NOT_FINITE,
    MAX_STEPS,
    STATUS_MESSAGES,
    STEP_TOO_SMALL,
    SUCCESS,
    TERMINATED,
)
from .methods import METHODS, Method, Rosenbrock, RosenbrockTableau  # noqa: F401
from .results import IVPResult, ObjectResult, Statuses  # noqa: F401
from .sensitivities import NotDifferentiable, jacobian  # noqa: F401

# The public solve_ivp: numpy arrays to the numpy front, Dask arrays to the Dask front.
from ..fronts import solve_ivp  # noqa: E402, F401
