"""The hjit functions of `call_identity` (a module of their own: Dask workers import
them by module and name); ``lotka`` is the ensembles' Lotka-Volterra
(`workloads.lotka_volterra`, its four rates ``p``)."""

from hapsira_core.jit import hjit
from hapsira_cowell.perturbations import J2_perturbation, two_body
from workloads import lotka_volterra as lotka  # noqa: F401


@hjit
def lotka_array(t, y, p, dydt):
    dydt[0] = p[0] * y[0] - p[1] * y[0] * y[1]
    dydt[1] = -p[2] * y[1] + p[3] * y[0] * y[1]


@hjit
def x_minus_one(t, y, p):
    return y[0] - 1.0


@hjit
def y_minus_two(t, y, p):
    return y[1] - 2.0


@hjit
def robertson(t, y, p):
    return (-0.04 * y[0] + 1e4 * y[1] * y[2],
            0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] * y[1],
            3e7 * y[1] * y[1])


@hjit
def robertson_jac(t, y, p):
    return (-0.04, 1e4 * y[2], 1e4 * y[1],
            0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1],
            0.0, 6e7 * y[1], 0.0)


@hjit
def linear(t, y, p):
    return (p[0] * y[0] + p[1] * y[1], p[2] * y[0] + p[3] * y[1])


@hjit
def j2(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, p[0], p[1])
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])
