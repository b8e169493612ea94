"""DOP853 (Dormand & Prince 8(5,3)) for one object at a time, as ``hjit`` code.

``solve.solve`` is the per-object loop; the other modules are its parts:
``tableau`` (coefficients), ``rk`` (step and step-size control), ``dense``
(interpolant), ``events`` (detection and root finding), ``state`` (tuple
arithmetic).
"""

from .solve import (  # noqa: F401
    BAD_INITIAL_STATE,
    MAX_STEPS,
    STEP_TOO_SMALL,
    SUCCESS,
    TERMINATED,
    solve,
)
