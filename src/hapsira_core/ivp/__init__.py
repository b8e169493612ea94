"""``solve_ivp`` for N objects at once: scipy's explicit Runge-Kutta methods as ``hjit`` code.

:func:`solve_ivp` is the front (:mod:`.api`); the solver is built from
parts, each a module: the methods and their tableaux (:mod:`.methods`,
:mod:`.butcher`), the stage code generator (:mod:`.stages`), state
arithmetic per dimension (:mod:`.state`), step-size control
(:mod:`.control`), events (:mod:`.events`), the per-object loop
(:mod:`.loop`), row layouts (:mod:`.layout`) and kernels (:mod:`.build`).
"""

from .api import Event, IVPResult, ObjectResult, Problem, integrate, solve_ivp  # noqa: F401
from .layout import (  # noqa: F401
    BAD_INITIAL_STATE,
    MAX_STEPS,
    STATUS_MESSAGES,
    STEP_TOO_SMALL,
    SUCCESS,
    TERMINATED,
)
from .methods import METHODS  # noqa: F401
