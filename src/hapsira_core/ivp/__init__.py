"""``solve_ivp`` for N objects at once: scipy's explicit Runge-Kutta methods as ``hjit`` code.

`solve_ivp()` is the front (`.api`); the solver is built from
parts, each a module: the methods and their tableaux (`.methods`,
`.butcher`), the stage code generator (`.stages`), state
arithmetic per dimension (`.state`), step-size control
(`.control`), events (`.events`), the per-object loop
(`.loop`), row layouts (`.layout`) and kernels (`.build`).
"""

from .api import (  # noqa: F401
    Event, EventBase, IVPResult, ObjectResult, Problem, Statuses, integrate, solve_ivp)
from .layout import (  # noqa: F401
    BAD_INITIAL_STATE,
    MAX_STEPS,
    STATUS_MESSAGES,
    STEP_TOO_SMALL,
    SUCCESS,
    TERMINATED,
)
from .methods import METHODS  # noqa: F401
