"""The total derivatives at events: the event's time and state as functions of y0, its time moving.

With ``stm=True`` the loop records Phi(t_e) = d y(t) / d y0 at t = t_e held
fixed (`hapsira_core.ivp.sensitivities.matrices`). The event's time
moves with y0 too: differentiating g(t_e(y0), y(t_e(y0); y0)) = 0 gives

    d t_e / d y0 = -(dg/dy Phi(t_e)) / (dg/dt + dg/dy . f(t_e, y_e))

and the state at the event d y(t_e(y0)) / d y0 = Phi(t_e) + f(t_e, y_e)
d t_e / d y0, the event-time (saltation) correction. dg/dt and dg/dy are the
automatic derivative of the event function's source (the twin of
`hapsira_core.ivp.sensitivities.derivative_twin`), and one per-object kernel
(`hapsira_core.jit.ObjectKernel`, every target) evaluates both at the
recorded events after the run: no cost unless the run has events.
"""

import math

import numpy as np

from ..jit import Arg, ObjectKernel, hjit
from ..kernels import derivatives, twins
from ..kernels.cache import factory
from . import sensitivities

__all__ = ["check_events", "totals"]


def _spec(n):
    return (derivatives.SCALAR, (derivatives.SCALAR,) * n, None)


def check_events(events, n):
    """Differentiate each event's ``g`` with respect to ``t`` and the state's n
    components now, so that one that cannot be is refused before the run:
    `NotDifferentiable` naming the event (``stm=True`` gives the events'
    total derivatives, which need dg/dy); a ``g`` whose source cannot be read
    (made by ``exec``) too, as ``fun`` is."""
    for index, event in enumerate(events):
        try:
            sensitivities.derivative_twin(event.g, _spec(n))
        except (derivatives.NotDifferentiable, twins.SourceUnavailable) as error:
            raise derivatives.NotDifferentiable(
                f"events[{index}]: with stm=True the event function is differentiated too "
                f"(res.dt_events_dy0, res.stm_events_total need dg/dt and dg/dy, with y the "
                f"state's {n} components): {error}") from None


@factory
def event_body(fun, g, n):
    """``body(te, ye, p, total, grad)``: for each record c of one object and one event,
    with ``ye[c]`` the augmented state ``(y, Phi row-major)`` at ``te[c]``, the total
    matrix ``total[c]`` (n * n, row-major) and ``grad[c] = d t_e / d y0`` (n); NaN
    where ``te[c]`` is (no record)."""
    twin = sensitivities.derivative_twin(g, _spec(n))
    zeros = twin.hapsira_zeros  # index 0: dg/dt, 1 + i: dg/dy_i
    state = ", ".join(f"ye[c, {i}]" for i in range(n)) + ("," if n == 1 else "")
    rate = [f"f[{i}] * J[{1 + i}]" for i in range(n) if 1 + i not in zeros]
    if 0 not in zeros:
        rate.insert(0, "J[0]")
    slope = [f"J[{1 + i}] * ye[c, {n + i * n} + j]" for i in range(n) if 1 + i not in zeros]
    lines = ["def event_totals(te, ye, p, total, grad):",
             "    for c in range(te.shape[0]):",
             "        t = te[c]",
             "        if t != t:",
             f"            for k in range({n * n}):",
             "                total[c, k] = NAN",
             f"            for j in range({n}):",
             "                grad[c, j] = NAN",
             "            continue",
             f"        y = ({state})",
             "        f = fun(t, y, p)",
             "        J = twin(t, y, p)[1]",
             # the rate at which g crosses zero along the solution: 0 at a tangency,
             # where the event time is not differentiable (inf or NaN follow)
             f"        rate = {' + '.join(rate) or '0.0'}",
             f"        for j in range({n}):",
             f"            dt = -({' + '.join(slope) or '0.0'}) / rate",
             "            grad[c, j] = dt"]
    lines += [f"            total[c, {i * n} + j] = ye[c, {n + i * n} + j] + f[{i}] * dt"
              for i in range(n)]
    source = "\n".join(lines) + "\n"
    name = getattr(getattr(g, "py_func", g), "__qualname__", repr(g))
    namespace = twins.run(source, f"<hapsira event totals of {name}, n={n}>",
                          {"fun": fun, "twin": twin, "NAN": math.nan, "__name__": __name__})
    made = hjit(namespace["event_totals"])
    made.hapsira_as_written = True
    return made


#: Built kernels, by (fun, g, n).
KERNELS = {}


def kernel(fun, g, n):
    """The `event_body` kernel of the active target (built once per process)."""
    key = (fun, g, n)
    if key not in KERNELS:
        f64 = np.float64
        KERNELS[key] = ObjectKernel(event_body(fun, g, n), (
            Arg("te", f64, ("c",)),
            Arg("ye", f64, ("c", "w")),
            Arg("p", f64, ("np",)),
            Arg("total", f64, ("c", "nn"), output=True),
            Arg("grad", f64, ("c", "n"), output=True),
        ))
    return KERNELS[key]


def _host(kernel, te, ye, p, n):
    """The kernel on numpy arrays: ``(total (N, C, n * n), grad (N, C, n))``."""
    n_objects, records = ye.shape[:2]
    total = np.empty((n_objects, records, n * n))
    grad = np.empty((n_objects, records, n))
    if n_objects and records:
        kernel(np.ascontiguousarray(te), np.ascontiguousarray(ye), np.ascontiguousarray(p),
               total, grad)
    return total, grad


def totals(raw, fun, events, params, n, single, launch=_host):
    """``(stm_events_total, dt_events_dy0)`` of an augmented run, before
    `hapsira_core.ivp.sensitivities.matrices`: one ``(N, C, n, n)`` and one ``(N, C, n)``
    array per event (``(C, n, n)``, ``(C, n)`` for one object), NaN-padded as
    ``y_events``. ``fun``: the tuple-form right-hand side; ``params``: the rows the
    run was given ``(1 or N, P)``; ``launch(kernel, te, ye, p, n) -> (total, grad)``
    runs the kernel where the arrays live (numpy's by default; the JAX front's on
    XLA's buffers)."""
    t_events, y_events = raw["t_events"], raw["y_events"]  # (N, E, C), (N, E, C, n + n*n)
    records = y_events.shape[2]
    matrices, gradients = [], []
    for e, event in enumerate(events):
        total, grad = launch(kernel(fun, event.g, n), t_events[:, e, :records],
                             y_events[:, e], params, n)
        total = total.reshape(total.shape[0], records, n, n)
        matrices.append(total[0] if single else total)
        gradients.append(grad[0] if single else grad)
    return matrices, gradients
