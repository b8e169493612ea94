"""RK45: the Dormand-Prince 5(4) pair, as ``scipy.integrate.RK45``.

J. R. Dormand, P. J. Prince, "A family of embedded Runge-Kutta formulae",
J. Comput. Appl. Math. 6(1), 1980. Steps of order 5 (local extrapolation),
error of order 4; dense output: Shampine's quartic interpolant (L. F.
Shampine, "Some Practical Runge-Kutta Formulas", Math. Comp. 46, 1986).
"""

from ..butcher import ButcherTableau
from . import embedded

TABLEAU = ButcherTableau(
    name="RK45",
    c=(0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0),
    a=(
        (),
        (1 / 5,),
        (3 / 40, 9 / 40),
        (44 / 45, -56 / 15, 32 / 9),
        (19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729),
        (9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656),
    ),
    b=(35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84),
    error={"e": (-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40)},
    order=5,
    error_estimator_order=4,
)

#: Interpolant weights: ``Q = K^T P`` over the 6 stages and the step-end derivative.
P = (
    (1.0, -8048581381 / 2820520608, 8663915743 / 2820520608, -12715105075 / 11282082432),
    (0.0, 0.0, 0.0, 0.0),
    (0.0, 131558114200 / 32700410799, -68118460800 / 10900136933,
     87487479700 / 32700410799),
    (0.0, -1754552775 / 470086768, 14199869525 / 1410260304, -10690763975 / 1880347072),
    (0.0, 127303824393 / 49829197408, -318862633887 / 49829197408,
     701980252875 / 199316789632),
    (0.0, -282668133 / 205662961, 2019193451 / 616988883, -1453857185 / 822651844),
    (0.0, 40617522 / 29380423, -110615467 / 29380423, 69997945 / 29380423),
)

METHOD = embedded.method(TABLEAU, P)
