"""``cowell()``: propagate one object or a cloud with DOP853 on the active target."""

import warnings

import numpy as np
from astropy import units as u

from hapsira_core import ivp
from hapsira_core.ivp import solve as solve_module
from hapsira_core.jit import TARGET, Arg, ObjectKernel, hjit, switch

from .errors import user_function_error
from .events import Event
from .perturbations import two_body
from .units import is_quantity, to_value

__all__ = ["cowell", "CowellResult", "STATUS_MESSAGES"]

EPS = np.finfo(np.float64).eps

#: What each ``status`` code means.
STATUS_MESSAGES = {
    ivp.SUCCESS: "reached the last time of flight",
    ivp.TERMINATED: "stopped by a terminal event",
    ivp.STEP_TOO_SMALL: "step size fell below 10 ulp of t (a singularity, e.g. "
                        "a collision with the attractor's centre)",
    ivp.MAX_STEPS: "max_steps accepted steps were not enough",
    ivp.BAD_INITIAL_STATE: "initial state or its derivative is not finite "
                           "(NaN or inf input, or r = 0)",
}

_ARGS = (
    Arg("r0", np.float64, ("three",)),
    Arg("v0", np.float64, ("three",)),
    Arg("tofs", np.float64, ("m",), per_object=False),
    Arg("params", np.float64, ("np",)),
    Arg("fconf", np.float64, ("nf",), per_object=False),
    Arg("iconf", np.int64, ("ni",), per_object=False),
    Arg("ev_direction", np.float64, ("e",), per_object=False),
    Arg("ev_max", np.int64, ("e",), per_object=False),
    Arg("ev_consts", np.float64, ("e", "q"), per_object=False),
    Arg("rr", np.float64, ("m", "three"), output=True),
    Arg("vv", np.float64, ("m", "three"), output=True),
    Arg("info", np.int64, ("ninfo",), output=True),
    Arg("t_events", np.float64, ("e", "c"), output=True),
    Arg("n_events", np.int64, ("e",), output=True),
    Arg("scratch", np.float64, ("e", "two"), scratch=True),
)

_KERNELS = {}


def _kernel(f, event_functions):
    """The compiled solver for ``f`` and these event functions (built once)."""
    key = (TARGET, f, event_functions)
    if key not in _KERNELS:
        g = switch(event_functions, 6)

        @hjit
        def body(r0, v0, tofs, p, fconf, iconf, ev_direction, ev_max, ev_consts,
                 rr, vv, info, t_events, n_events, scratch):
            ivp.solve(f, g, r0, v0, tofs, p, fconf, iconf, ev_direction, ev_max,
                      ev_consts, rr, vv, info, t_events, n_events, scratch)

        _KERNELS[key] = ObjectKernel(body, _ARGS)
    return _KERNELS[key]


class CowellResult:
    """What :func:`cowell` returns.

    ``rr``, ``vv``: states at ``tofs``, ``(N, M, 3)`` km and km/s (NaN where
    the object had stopped); ``status``: ``(N,)`` codes, see
    :data:`STATUS_MESSAGES`; ``t_events``: one ``(N, C)`` array of event times
    (s, NaN-padded) per event; ``n_events``: ``(N, E)`` occurrence counts;
    ``nfev``, ``nsteps``: ``(N,)`` work done. For a single object (``r0`` of
    shape ``(3,)``) the leading N axis is dropped everywhere.
    """

    def __init__(self, rr, vv, status, t_events, n_events, nfev, nsteps):
        self.rr = rr
        self.vv = vv
        self.status = status
        self.t_events = t_events
        self.n_events = n_events
        self.nfev = nfev
        self.nsteps = nsteps

    @property
    def success(self):
        """True where the object reached the last time or a terminal event."""
        return np.asarray(self.status) >= 0

    def messages(self):
        """The meaning of each object's status (a list, or a str for one object)."""
        status = np.asarray(self.status)
        if status.ndim == 0:
            return STATUS_MESSAGES[int(status)]
        return [STATUS_MESSAGES[int(s)] for s in status]

    def __repr__(self):
        status = np.atleast_1d(self.status)
        counts = {int(s): int((status == s).sum()) for s in np.unique(status)}
        return f"CowellResult(objects={status.size}, status counts={counts})"


def _is_device_array(value):
    return TARGET == "cuda" and hasattr(value, "__cuda_array_interface__") \
        and not isinstance(value, np.ndarray)


def _states(r0, v0):
    """r0, v0 as (N, 3) float64 km, km/s (device arrays pass through)."""
    arrays = []
    for name, value, unit in (("r0", r0, u.km), ("v0", v0, u.km / u.s)):
        if _is_device_array(value):
            shape = tuple(value.__cuda_array_interface__["shape"])
            dtype = np.dtype(value.__cuda_array_interface__["typestr"])
            if len(shape) != 2 or shape[1] != 3 or dtype != np.float64:
                raise ValueError(f"{name}: expected shape (N, 3) and float64 for a device "
                                 f"array, got {shape} {dtype}")
            arrays.append(value)
            continue
        array = to_value(value, unit, name)
        if array.ndim not in (1, 2) or array.shape[-1] != 3:
            raise ValueError(f"{name}: expected shape (3,) or (N, 3), got {array.shape}")
        if not array.flags.c_contiguous or 0 in array.strides or array.dtype != np.float64:
            array = array.astype(np.float64, order="C")  # no stride-0 or strided views in kernels
        arrays.append(array)
    r0, v0 = arrays
    single = getattr(r0, "ndim", 2) == 1
    if (getattr(v0, "ndim", 2) == 1) != single:
        raise ValueError(f"r0, v0: shapes differ ({r0.shape} and {v0.shape})")
    if single:
        r0, v0 = r0[None, :], v0[None, :]
    if r0.shape[0] != v0.shape[0]:
        raise ValueError(f"r0, v0: number of objects differs ({r0.shape[0]} and {v0.shape[0]})")
    return r0, v0, single


def _tofs(tofs):
    array = np.atleast_1d(to_value(tofs, u.s, "tofs"))
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"tofs: expected a non-empty 1-D array of times, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError("tofs: expected finite times, got NaN or inf")
    if np.any(array > 0) and np.any(array < 0):
        raise ValueError("tofs: expected times all of one sign (negative = backward), got both")
    if np.any(np.diff(np.abs(array)) < 0):
        raise ValueError("tofs: expected times sorted away from 0 (increasing, or decreasing "
                         "when backward)")
    return np.ascontiguousarray(array)


def _tolerance(value, name):
    array = np.asarray(value, dtype=np.float64)
    if array.ndim == 0:
        array = np.full(6, float(array))
    if array.shape != (6,):
        raise ValueError(f"{name}: expected a scalar or 6 values (one per state component), "
                         f"got shape {array.shape}")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError(f"{name}: expected finite non-negative tolerances, got {value!r}")
    return array


def _params(params, n):
    if params is None:
        return np.zeros((1, 1))
    array = np.asarray(params, dtype=np.float64)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[0] not in (1, n):
        raise ValueError(f"params: expected shape (P,) or ({n}, P), got {np.shape(params)}")
    if array.shape[1] == 0:
        array = np.zeros((array.shape[0], 1))
    # A fresh C-ordered copy: views such as x[:, None] can carry a stride of 0,
    # which made the cuda kernel 8x slower on an H100.
    return array.copy(order="C")


def _positive_int(value, name, minimum):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise ValueError(f"{name}: expected an integer >= {minimum}, got {value!r}")
    return int(value)


def cowell(k, r0, v0, tofs, rtol=1e-11, atol=1e-12, *, f=None, params=None, events=(),
           max_steps=100_000, max_event_records=64):
    """Propagate objects with Cowell's method: DOP853 on ``f`` (default two-body).

    Parameters
    ----------
    k : float or Quantity
        GM of the attractor, km^3/s^2.
    r0, v0 : array_like or Quantity, (3,) or (N, 3)
        Initial positions (km) and velocities (km/s) at t = 0. On the cuda
        target, (N, 3) float64 device arrays are used in place.
    tofs : array_like, Quantity or TimeDelta, (M,)
        Times of flight (s) at which states are returned; sorted away from
        zero and all of one sign (negative: backward propagation).
    rtol, atol : float or (6,)
        Relative and absolute tolerances as in ``scipy.integrate.solve_ivp``
        (rtol below 100 eps is raised to it, with a warning).
    f : hjit function, optional
        ``f(t, rr, vv, k, p) -> (drr, dvv)``; default
        :func:`~hapsira_cowell.perturbations.two_body`.
    params : array_like, (P,) or (N, P), optional
        Numbers handed to ``f`` and events as the row ``p`` (shared or one row
        per object). Changing them never recompiles.
    events : sequence of :class:`~hapsira_cowell.events.Event`
    max_steps : int
        Accepted steps allowed per object (status -2 when exceeded).
    max_event_records : int
        Occurrences of each event whose times are kept (C).

    Returns
    -------
    CowellResult
        Quantities (km, km/s, s) if any of ``r0``, ``v0``, ``tofs`` was one.
    """
    quantities = any(is_quantity(x) for x in (r0, v0, tofs))
    k = to_value(k, u.km ** 3 / u.s ** 2, "k")
    if k.ndim != 0 or not np.isfinite(k) or k <= 0:
        raise ValueError(f"k: expected a positive finite GM in km^3/s^2, got {k!r}")
    r0, v0, single = _states(r0, v0)
    n = r0.shape[0]
    tofs = _tofs(tofs)
    rtol = _tolerance(rtol, "rtol")
    atol = _tolerance(atol, "atol")
    if np.any(rtol < 100 * EPS):
        warnings.warn(f"rtol below 100 * eps; using rtol = max(rtol, {100 * EPS})",
                      stacklevel=2)
        rtol = np.maximum(rtol, 100 * EPS)
    params = _params(params, n)
    max_steps = _positive_int(max_steps, "max_steps", 1)
    records = _positive_int(max_event_records, "max_event_records", 0)
    events = tuple(events)
    for index, event in enumerate(events):
        if not isinstance(event, Event):
            raise ValueError(f"events[{index}]: expected an hapsira_cowell.events.Event, "
                             f"got {type(event).__name__}")
    f = two_body if f is None else f
    if not callable(f):
        raise ValueError(f"f: expected an hjit function, got {type(f).__name__}")

    n_ev = len(events)
    slots = max(n_ev, 1)  # arrays keep at least one slot: zero-size rows upset gufuncs
    width = max([len(e.constants) for e in events] + [1])
    ev_direction = np.zeros(slots)
    ev_max = np.zeros(slots, dtype=np.int64)
    ev_consts = np.zeros((slots, width))
    for index, event in enumerate(events):
        ev_direction[index] = event.direction
        ev_max[index] = event.max_occurrences
        ev_consts[index, : len(event.constants)] = event.constants
    fconf = np.concatenate(([float(k)], rtol, atol))
    iconf = np.array([max_steps, n_ev], dtype=np.int64)

    m = tofs.size
    rr = np.empty((n, m, 3))
    vv = np.empty((n, m, 3))
    info = np.empty((n, 3), dtype=np.int64)
    # without events the kernel still gets one slot; keep it one number wide
    t_events = np.empty((n, slots, max(records, 1) if n_ev else 1))
    n_events = np.empty((n, slots), dtype=np.int64)
    scratch = np.empty((n, slots, 2))

    kernel = _kernel(f, tuple(e.device_function for e in events))
    try:
        kernel(r0, v0, tofs, params, fconf, iconf, ev_direction, ev_max, ev_consts,
               rr, vv, info, t_events, n_events, scratch)
    except Exception as exc:
        if not type(exc).__module__.startswith("numba"):
            raise
        # A compile error: name the user's function and line first, numba's detail after.
        error = user_function_error(exc, [f] + [e.g for e in events])
        if error is exc:
            raise
        raise error from exc

    t_events = [t_events[:, e, :records] for e in range(n_ev)]
    n_events = n_events[:, :n_ev]
    status, nfev, nsteps = info[:, 0], info[:, 1], info[:, 2]
    if quantities:
        rr = rr << u.km
        vv = vv << (u.km / u.s)
        t_events = [t << u.s for t in t_events]
    if single:
        rr, vv, status, nfev, nsteps = rr[0], vv[0], status[0], nfev[0], nsteps[0]
        t_events = [t[0] for t in t_events]
        n_events = n_events[0]
    return CowellResult(rr, vv, status, t_events, n_events, nfev, nsteps)
