"""RK23: the Bogacki-Shampine 3(2) pair, as ``scipy.integrate.RK23``.

P. Bogacki, L. F. Shampine, "A 3(2) pair of Runge-Kutta formulas", Appl.
Math. Lett. 2(4), 1989. Steps of order 3 (local extrapolation), error of
order 2; dense output: the cubic Hermite interpolant (Hairer II.6).
"""

from ..butcher import ButcherTableau
from . import embedded

TABLEAU = ButcherTableau(
    name="RK23",
    c=(0.0, 1 / 2, 3 / 4),
    a=((), (1 / 2,), (0.0, 3 / 4)),
    b=(2 / 9, 1 / 3, 4 / 9),
    error={"e": (5 / 72, -1 / 12, -1 / 9, 1 / 8)},
    order=3,
    error_estimator_order=2,
)

#: Interpolant weights: ``Q = K^T P`` over the 3 stages and the step-end derivative.
P = (
    (1.0, -4 / 3, 5 / 9),
    (0.0, 1.0, -2 / 3),
    (0.0, 4 / 3, -8 / 9),
    (0.0, -1.0, 1.0),
)

METHOD = embedded.method(TABLEAU, P)
