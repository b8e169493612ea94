"""The orbit adapter the numpy, JAX and Dask fronts share: ``f(t, rr, vv, k, p)`` as the core's
``fun(t, y, p)``; ``(k, r0, v0, tofs)`` checked and turned into the core's ``Problem``.

The core integrates ``y = (rr, vv)`` with one params row ``p``; ``cowell()``
puts GM first in that row, so that ``k`` is data like every other number
(a new GM never recompiles) and the user's row follows it.
"""

import contextlib
import contextvars
import functools
import threading
import warnings

import numba
import numpy as np
from astropy import units as u

from hapsira_core import ivp
from hapsira_core.ivp import checks
from hapsira_core.ivp.call import Call
from hapsira_core.jit import factory, hjit, is_device_array
from hapsira_core.kernels.errors import check_returns, is_real, is_state

from ..models.events import Event
from ..models.perturbations import two_body
from ..constants import K_EARTH
from ..units import UnitsWarning, to_value

__all__ = ["orbit_rhs", "check_state", "check_states", "check_tofs", "check_gm", "call_options",
           "check_units", "UnitsCheck", "warn_if_all_failed", "units_unchecked",
           "bounds_checked", "orbit_call", "check_stm", "tofs_end", "step_options"]

#: km^3/s^2: above any solar-system body's GM (the Sun's is 1.327e11); the Moon's GM in
#: m^3/s^2 is 4.9e12, the Earth's 3.986e14
GM_MAX = 1e12
#: km/s: faster than anything in the solar system (a sun-grazing comet at perihelion
#: reaches ~600 km/s); a low orbit's speed in m/s is 7.5e3
SPEED_MAX = 1e3
_CHECK_UNITS = contextvars.ContextVar("hapsira_cowell_check_units", default=True)


@factory
def orbit_rhs(f):
    """``f(t, rr, vv, k, p) -> (drr, dvv)`` as the core's ``fun(t, y, p)``."""
    @hjit
    def fun(t, y, p):
        drr, dvv = f(t, (y[0], y[1], y[2]), (y[3], y[4], y[5]), p[0], p[1:])
        return (drr[0], drr[1], drr[2], dvv[0], dvv[1], dvv[2])
    return fun


def check_state(value, name, unit):
    """One of r0, v0 as a float64 array, (3,) or (N, 3) (device arrays pass through)."""
    if is_device_array(value):
        shape = tuple(value.__cuda_array_interface__["shape"])
        dtype = np.dtype(value.__cuda_array_interface__["typestr"])
        if len(shape) != 2 or shape[1] != 3 or dtype != np.float64:
            raise ValueError(f"{name}: expected shape (N, 3) and float64 for a device "
                             f"array, got {shape} {dtype}")
        return value
    array = to_value(value, unit, name)
    if array.ndim not in (1, 2) or array.shape[-1] != 3:
        raise ValueError(f"{name}: expected shape (3,) or (N, 3), got {array.shape}")
    if not array.flags.c_contiguous or 0 in array.strides or array.dtype != np.float64:
        array = array.astype(np.float64, order="C")  # no stride-0 or strided views in kernels
    return array


#: units made once: composing them with astropy at each call would add to every call
_KM_PER_S = u.km / u.s
_GM_UNIT = u.km ** 3 / u.s ** 2


def check_states(r0, v0, state=check_state):
    """r0, v0 as (N, 3) km, km/s, and whether one object was given.

    ``state(value, name, unit)`` converts and checks each one (the JAX front
    passes its own); the two are then checked against each other.
    """
    r0, v0 = state(r0, "r0", u.km), state(v0, "v0", _KM_PER_S)
    single = getattr(r0, "ndim", 2) == 1
    if (getattr(v0, "ndim", 2) == 1) != single:
        raise ValueError(f"r0, v0: shapes differ ({r0.shape} and {v0.shape})")
    if single:
        r0, v0 = r0[None, :], v0[None, :]
    if r0.shape[0] != v0.shape[0]:
        raise ValueError(f"r0, v0: number of objects differs ({r0.shape[0]} and {v0.shape[0]})")
    return r0, v0, single


def check_tofs(tofs, n_objects=None, front=None):
    """Times of flight (s): ``(M,)`` shared by all objects, or with ``n_objects`` also
    ``(N, M)``, one row per object (its own times, trailing NaN padding allowed: no
    output there). Each row (or the one row): finite, all of one sign (negative =
    backward), sorted away from 0. Errors name ``tofs`` and the first object at fault.
    ``front``: a front other than numpy's, which takes ``(M,)`` only."""
    array = np.atleast_1d(to_value(tofs, u.s, "tofs"))
    if array.ndim == 2 and n_objects is None:
        raise ValueError(f"tofs: per-object times of flight (N, M) are taken by the numpy "
                         f"front only for now (hapsira_cowell.cowell with numpy arrays), not "
                         f"by the {front or 'this'} front; give one (M,) row here")
    if array.ndim == 2:
        if array.shape[0] != n_objects or array.shape[1] == 0:
            raise ValueError(f"tofs: expected shape (M,) or ({n_objects}, M) with M >= 1 (one "
                             f"row per object), got {array.shape}")
        return _tofs_rows(array)
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


def _tofs_rows(rows):
    """`check_tofs` of ``(N, M)`` rows, each object's own."""
    nan = np.isnan(rows)

    def refuse(mask, what):
        if mask.any():
            i = int(np.argmax(mask))
            raise ValueError(f"tofs: {what} (object {i}: {rows[i]!r}; {int(mask.sum())} "
                             "objects in all)")

    refuse(np.isinf(rows).any(axis=1), "expected finite times or trailing NaN padding")
    refuse(nan[:, 0], "expected at least one time per row (NaN only as trailing padding)")
    refuse((nan[:, :-1] & ~nan[:, 1:]).any(axis=1),
           "expected NaN only as trailing padding of a row")
    with np.errstate(invalid="ignore"):
        refuse((rows > 0).any(axis=1) & (rows < 0).any(axis=1),
               "expected each row's times all of one sign (negative = backward)")
        refuse((np.diff(np.abs(rows), axis=1) < 0).any(axis=1),
               "expected each row sorted away from 0 (increasing, or decreasing when backward)")
    return np.ascontiguousarray(rows)


def tofs_end(tofs):
    """Where each object's integration ends: the last time of flight, a float for
    ``(M,)`` times, an ``(N,)`` array for per-object rows (each row's last finite time)."""
    if tofs.ndim == 1:
        return float(tofs[-1])
    last = np.count_nonzero(~np.isnan(tofs), axis=1) - 1
    return np.ascontiguousarray(tofs[np.arange(tofs.shape[0]), last])


def step_options(max_step, first_step, tofs):
    """scipy's ``max_step`` and ``first_step`` for ``cowell`` (s), checked as ``solve_ivp``
    checks them (`hapsira_core.ivp.checks.step_sizes`, its messages; ``first_step`` at
    most the shortest object's span). Quantities in time units are taken."""
    if max_step is not None and hasattr(max_step, "unit"):
        max_step = to_value(max_step, u.s, "max_step")
    if first_step is not None and hasattr(first_step, "unit"):
        first_step = to_value(first_step, u.s, "first_step")
    return checks.step_sizes(max_step, first_step, 0.0, tofs_end(tofs))


def check_gm(k):
    """GM as a 0-d float64 array: positive and finite."""
    k = to_value(k, _GM_UNIT, "k")
    if k.ndim != 0 or not np.isfinite(k) or k <= 0:
        raise ValueError(f"k: expected a positive finite GM in km^3/s^2, got {checks.shown(k)}")
    return k


def call_options(rtol, atol, f, events, max_steps, max_event_records, params_given,
                 stacklevel=5):
    """What every front of ``cowell`` (numpy, JAX, Dask) checks the same way, once.

    Call after the states, ``tofs`` and the params rows are checked;
    ``params_given``: the params as the user gave them (a numpy, JAX or Dask
    array, or None), whose width is checked against what ``f`` and the events
    read. Returns ``(rtol, atol, f, events, max_steps, records)`` with the
    numpy front's messages on every front; ``f`` and the events come back as
    given (each front that compiles applies `bounds_checked`).
    """
    rtol = checks.relative_tolerance(rtol, 6, stacklevel)
    atol = checks.tolerance(atol, "atol", 6)
    max_steps = checks.integer(max_steps, "max_steps", 1)
    records = checks.integer(max_event_records, "max_event_records", 0)
    events = checks.event_list(events, Event)
    f = two_body if f is None else f
    if not callable(f):
        raise ValueError(f"f: expected an hjit function, got {type(f).__name__}")
    checks.params_width(checks.columns_given(params_given), [f] + [e.g for e in events],
                        position=4)
    return rtol, atol, f, events, max_steps, records


def plausible_radii(k):
    """``(r_min, r_max)`` km: the distances from an attractor of GM ``k`` (km^3/s^2) that an
    orbit about it can plausibly have, both scaled as ``cbrt(k / K_EARTH)`` (as a Hill
    sphere is): 1 km to 1e9 km (6.7 AU) for the Earth, 69 km to 6.9e10 km (460 AU) for
    the Sun, r_max never below 1e7 km."""
    scale = float(np.cbrt(k / K_EARTH))
    return scale, max(1e9 * scale, 1e7)


@contextlib.contextmanager
def units_unchecked():
    """`check_units` and `warn_if_all_failed` say nothing inside: for callers whose numbers
    came from Quantities (Orbit objects) or were checked already (a Dask chunk)."""
    token = _CHECK_UNITS.set(False)
    try:
        yield
    finally:
        _CHECK_UNITS.reset(token)


def _squared_norms(states):
    """``|x|^2`` of each row of ``(..., 3)`` states: one pass, no square root (the checks
    compare squares, and take roots only for the rows a warning names): a norm per check
    would cost a large share of a many-object ``cowell`` call."""
    flat = np.asarray(states, dtype=np.float64).reshape(-1, 3)
    return np.einsum("ij,ij->i", flat, flat)


#: From this many objects on, `check_units` first decides in one compiled pass
#: (`_extremes`) whether any check can fire, much faster than the two squared-norm passes
#: and the comparisons. Below it numpy's passes are cheap and the compiled pass is not
#: loaded (a new process would pay for it in its first call).
EXTREMES_MIN_OBJECTS = 1 << 16


@numba.njit(cache=True, nogil=True)
def _extremes(r0, v0):
    """``(largest finite |r|^2, smallest positive |r|^2, largest finite |v|^2)`` of
    ``(N, 3)`` states, in one pass (NaN rows count in none)."""
    r2_max, r2_min, v2_max = -1.0, np.inf, -1.0
    for i in range(r0.shape[0]):
        r2 = r0[i, 0] * r0[i, 0] + r0[i, 1] * r0[i, 1] + r0[i, 2] * r0[i, 2]
        v2 = v0[i, 0] * v0[i, 0] + v0[i, 1] * v0[i, 1] + v0[i, 2] * v0[i, 2]
        if r2_max < r2 < np.inf:
            r2_max = r2
        if 0.0 < r2 < r2_min:
            r2_min = r2
        if v2_max < v2 < np.inf:
            v2_max = v2
    return r2_max, r2_min, v2_max


def _all_plausible(k, r0, v0, tofs):
    """True where no check of `check_units` can fire, decided from `_extremes` (many
    objects only); False sends `check_units` through its full passes, which name the
    objects."""
    r0, v0 = np.asarray(r0), np.asarray(v0)
    if r0.dtype != np.float64 or v0.dtype != np.float64 or r0.shape != v0.shape \
            or r0.ndim != 2 or r0.shape[1] != 3 or r0.shape[0] < EXTREMES_MIN_OBJECTS:
        return False
    if tofs is not None and _short_tofs(tofs) is not None:
        return False  # `_tofs_too_short` needs every object's period
    r2_max, r2_min, v2_max = _extremes(np.ascontiguousarray(r0), np.ascontiguousarray(v0))
    low, high = plausible_radii(k)
    return (r2_max <= high * high and r2_min >= low * low and v2_max <= SPEED_MAX * SPEED_MAX
            and not (_is_earth(k) and r2_max > EARTH_METRES_R * EARTH_METRES_R))


class UnitsCheck:
    """`check_units` begun before a propagation and finished after it. ``background``
    (the cuda target's calls): for many objects (`EXTREMES_MIN_OBJECTS`)
    `_all_plausible`'s pass over the states runs in a helper thread while the objects
    propagate, and `finish` issues the warnings; otherwise `finish` does it all.

    Run first, the pass would delay the first chunk's trip to the GPU; beside it, it
    overlaps the GPU's work, as the compiled pass releases the GIL and the launching
    thread mostly waits on the GPU. On the host targets the same pass is a few ms of a
    run of minutes, and a warning that the states look like metres is worth having
    before those minutes: there the check runs first, as before (``finish`` right after
    the constructor).
    ``after``: what starts the helper thread, through its ``then(callback)`` (the
    target's ``kernels_started``, since the pass beside the first chunk's copies to the
    GPU delays the first kernel); `finish` starts it where that never came (a call that
    raised first).
    Call `finish` from the frame that would have called `check_units` (``stacklevel``
    counts one frame more), also when the propagation raised: a unit mistake may be
    why."""

    def __init__(self, k, r0=None, v0=None, tofs=None, background=False, after=None):
        self._args = (k, r0, v0, tofs)
        self._plausible = None
        self._thread = None
        self._started = False
        self._lock = threading.Lock()
        if (background and _CHECK_UNITS.get() and k is not None and r0 is not None
                and v0 is not None and np.ndim(r0) == 2
                and np.shape(r0)[0] >= EXTREMES_MIN_OBJECTS):
            self._thread = threading.Thread(target=self._decide, name="hapsira-units",
                                            daemon=True)
            if after is None:
                self._start()
            else:
                after.then(self._start)

    def _start(self):
        with self._lock:
            if not self._started:
                self._started = True
                self._thread.start()

    def _decide(self):
        k, r0, v0, tofs = self._args
        try:
            self._plausible = _all_plausible(float(k), r0, v0, tofs)
        except Exception:  # the full passes in `finish` decide, and name what they find
            self._plausible = None

    @property
    def background(self):
        """Whether the check runs beside the propagation (its warnings come after it)."""
        return self._thread is not None

    def finish(self, stacklevel=5):
        """Issue the warnings (once)."""
        if self._args is None:
            return
        if self._thread is not None:
            self._start()  # (if nothing did: the call raised before its first kernel)
            self._thread.join()
        (k, r0, v0, tofs), self._args = self._args, None
        check_units(k, r0, v0, stacklevel=stacklevel, tofs=tofs, plausible=self._plausible)


def _is_earth(k):
    """Whether GM ``k`` (km^3/s^2) is the Earth's, within 1% (`_earth_state_in_metres`)."""
    return abs(k / K_EARTH - 1.0) < 0.01


def _objects(name, where, count, what):
    first = int(np.flatnonzero(where)[0])
    return f"{name}: {int(where.sum())} of {count} object(s) {what} ({name}[{first}]"


def check_units(k, r0=None, v0=None, stacklevel=4, tofs=None, plausible=None):
    """A `UnitsWarning` for each of ``k``, ``r0``, ``v0`` (plain numbers in km^3/s^2, km,
    km/s, already checked) outside what any orbit in the solar system has; and for
    plain-number ``tofs`` (s) that all end within 366 s and 1% of the shortest bound
    orbit's period (`_tofs_too_short`: days, hours or minutes given as numbers).

    Pass None for what is not to be checked: a Quantity (its unit was converted), a
    traced or lazy array. ``k`` sets the range of ``|r0|`` (`plausible_radii`). The
    speed of light is not the limit: ``|v0| > 1e3`` km/s (`SPEED_MAX`) is already no
    solar-system orbit's, and ``k > 1e12`` km^3/s^2 (`GM_MAX`) no solar-system body's.
    ``plausible``: `_all_plausible`'s answer when it was decided already (`UnitsCheck`).
    """
    if not _CHECK_UNITS.get():
        return
    if k is not None and float(k) > GM_MAX:
        warnings.warn(f"k: {float(k):.6g} km^3/s^2 is above any solar-system body's GM (the "
                      f"Sun's is 1.327e11 km^3/s^2): it looks like m^3/s^2 (hapsira's "
                      f"Earth.k.value is 3.986e14 m^3/s^2); hapsira_cowell expects km^3/s^2: "
                      f"divide by 1e9 or pass an astropy Quantity", UnitsWarning,
                      stacklevel=stacklevel)
    if plausible is None and r0 is not None and v0 is not None and k is not None:
        plausible = _all_plausible(float(k), r0, v0, tofs)
    if plausible:
        return
    r2 = _squared_norms(r0) if r0 is not None else None
    v2 = _squared_norms(v0) if v0 is not None else None
    if r2 is not None and k is not None:
        low, high = plausible_radii(float(k))
        with np.errstate(invalid="ignore"):
            far, near = r2 > high * high, (r2 < low * low) & (r2 > 0)
        if far.any():
            far &= np.isfinite(r2)  # an infinite state is not a unit mistake
        if far.any():
            warnings.warn(_objects("r0", far, r2.size, f"farther than {high:.3g} km from "
                                   "the attractor") +
                          f": |r| = {np.sqrt(r2[far][0]):.4g} km), beyond any orbit about a "
                          f"body of GM {float(k):.6g} km^3/s^2: it looks like metres; "
                          f"hapsira_cowell expects km (or pass an astropy Quantity)",
                          UnitsWarning, stacklevel=stacklevel)
        if near.any():
            warnings.warn(_objects("r0", near, r2.size, f"nearer than {low:.3g} km to the "
                                   "attractor's centre") +
                          f": |r| = {np.sqrt(r2[near][0]):.4g} km), inside any body of GM "
                          f"{float(k):.6g} km^3/s^2: it looks like a larger unit (AU, the "
                          f"body's radius?); hapsira_cowell expects km (or pass an astropy "
                          f"Quantity)", UnitsWarning, stacklevel=stacklevel)
    if r2 is not None and v2 is not None and k is not None and _is_earth(float(k)):
        _earth_state_in_metres(float(k), r2, v2, stacklevel + 1)
    if v2 is not None:
        with np.errstate(invalid="ignore"):
            fast = v2 > SPEED_MAX * SPEED_MAX
        if fast.any():
            fast &= np.isfinite(v2)
        if fast.any():
            warnings.warn(_objects("v0", fast, v2.size, f"faster than {SPEED_MAX:.0e} km/s") +
                          f": |v| = {np.sqrt(v2[fast][0]):.4g} km/s), faster than any orbit in "
                          f"the solar system: it looks like m/s; hapsira_cowell expects km/s "
                          f"(or pass an astropy Quantity)", UnitsWarning, stacklevel=stacklevel)
    if tofs is not None and r2 is not None and v2 is not None and k is not None:
        _tofs_too_short(float(k), r2, v2, tofs, stacklevel + 1)


#: A plain-number ``tofs`` whose longest |time| is below this share of the shortest
#: bound orbit's period, and at most `TOF_DAYS_MAX`, draws a `UnitsWarning`: 1, 2, 7 "s"
#: meant as days are 0.13% of a LEO period. A deliberate arc that short (under a minute
#: in LEO, under 6 minutes anywhere) is rare and can pass a Quantity or filter the
#: warning; a day of a heliocentric orbit (86,400 s) is never taken for days.
TOF_PERIOD_SHARE = 0.01
#: A year in days: no plain-number ``tofs`` longer than this is taken for days.
TOF_DAYS_MAX = 366.0


def _short_tofs(tofs):
    """The longest ``|tof|`` where it could be days taken as s (finite, non-zero, at most
    `TOF_DAYS_MAX`), else None."""
    longest = np.nanmax(np.abs(np.asarray(tofs, dtype=np.float64)))
    if not np.isfinite(longest) or longest == 0.0 or longest > TOF_DAYS_MAX:
        return None
    return float(longest)


def _tofs_too_short(k, r2, v2, tofs, stacklevel):
    """Times of flight in days, hours or minutes given as plain numbers (taken as s);
    ``r2``, ``v2``: the objects' squared ``|r0|``, ``|v0|``."""
    longest = _short_tofs(tofs)
    if longest is None:
        return  # (no object's period is needed: the common case, tofs of a day or more)
    with np.errstate(invalid="ignore", divide="ignore"):
        energy = 0.5 * v2 - k / np.sqrt(r2)
        a = -k / (2.0 * energy)
        periods = 2.0 * np.pi * np.sqrt(a ** 3 / k)
    periods = periods[np.isfinite(periods) & (energy < 0)]
    if periods.size == 0:
        return
    shortest = float(periods.min())
    if longest < TOF_PERIOD_SHARE * shortest:
        warnings.warn(f"tofs: the longest time of flight is {longest:.6g} s, "
                      f"{100 * longest / shortest:.2g}% of the shortest orbital period "
                      f"({shortest:.6g} s): it looks like days, hours or minutes; "
                      f"hapsira_cowell takes plain-number tofs in s (multiply by 86400 for "
                      f"days, or pass an astropy Quantity such as [1, 2] * u.day)",
                      UnitsWarning, stacklevel=stacklevel)


#: Beyond this distance from the Earth (km; twice its Hill sphere, about 1.5e6 km)
#: an Earth-centred state ten times faster than escape is a LEO-like state in metres.
EARTH_METRES_R = 3e6


def _earth_state_in_metres(k, r2, v2, stacklevel):
    """Positions in metres with velocities in km/s about the Earth: 6.8e6 "km" at 7.5
    km/s is far outside the Earth's sphere of influence and 22 times its escape
    speed there, a state no Earth-centred propagation has (an interplanetary
    departure that far out is propagated about the Sun). ``r2``, ``v2``: squared
    ``|r0|``, ``|v0|``."""
    with np.errstate(invalid="ignore"):
        out = r2 > EARTH_METRES_R * EARTH_METRES_R
    if not out.any():
        return  # (every object within 3e6 km: the common case, decided in one pass)
    r, v = np.sqrt(r2[out]), np.sqrt(v2[out])
    with np.errstate(invalid="ignore", divide="ignore"):
        escape = np.sqrt(2.0 * k / r)
        # (objects the other checks name already are left to them)
        picked = (r <= plausible_radii(k)[1]) & (v > 10.0 * escape) & (v <= SPEED_MAX)
    if picked.any():
        suspect = np.zeros(r2.shape, dtype=bool)
        suspect[np.flatnonzero(out)[picked]] = True
        i = int(np.flatnonzero(picked)[0])
        warnings.warn(_objects("r0", suspect, r2.size, f"farther than {EARTH_METRES_R:.0e} km "
                               "from the Earth and over ten times the escape speed there") +
                      f": |r| = {r[i]:.4g} km at |v| = {v[i]:.4g} km/s, {v[i] / escape[i]:.0f} "
                      f"times the escape speed): it looks like r0 in metres with v0 in km/s; "
                      f"hapsira_cowell expects km (or pass astropy Quantities)", UnitsWarning,
                      stacklevel=stacklevel)


def warn_if_all_failed(status, stacklevel=4):
    """A `UnitsWarning` when every object failed, some in flight (step size underflow or
    max_steps; initial states that are not finite explain themselves): what to check.
    Per-object statuses are left as they are."""
    if not _CHECK_UNITS.get():
        return
    status = np.atleast_1d(np.asarray(status))
    # some object succeeded: usually the first (which spares a pass over many strided
    # statuses); else one pass
    if status.size == 0 or status.flat[0] >= 0 or status.max() >= 0:
        return
    in_flight = (status == ivp.STEP_TOO_SMALL) | (status == ivp.MAX_STEPS)
    if not in_flight.any():
        return
    counts = ", ".join(f"{int((status == s).sum())} with status {int(s)}"
                       for s in np.unique(status))
    warnings.warn(f"all {status.size} object(s) failed ({counts}; see STATUS_MESSAGES): if "
                  f"that is not expected, check the units of the plain numbers given: k in "
                  f"km^3/s^2 (not m^3/s^2: the Earth's is 398600.4418), r0 in km, v0 in km/s, "
                  f"tofs in s", UnitsWarning, stacklevel=stacklevel)


def bounds_checked(f, events):
    """``f`` and the events' ``g`` bounds-checked where they index ``p`` at run time
    (`hapsira_core.ivp.checks.bounds_checked`); after the width checks, which
    name the user's functions."""
    return (checks.bounds_checked(checks.shared_reciprocals(f), 4),
            checks.bounds_checked_events(events, 4))


def _diagnose(f, events, y0, params, t0):
    """After a failed kernel: do ``f`` and the events' ``g`` return what they should?"""
    rr, vv = tuple(float(v) for v in y0[0, :3]), tuple(float(v) for v in y0[0, 3:])
    sample = (t0, rr, vv, float(params[0, 0]), params[0, 1:])
    check_returns(f, sample, lambda r: isinstance(r, tuple) and len(r) == 2
                  and all(is_state(part, 3) for part in r),
                  "(drr, dvv): two tuples of 3 floats")
    for event in events:
        check_returns(event.g, sample, is_real, "a float (the event function's value)")


def check_stm(stm):
    """``stm`` as a bool: True or False only (a matrix of 36 numbers per output time is
    not something to ask for by accident with a truthy value)."""
    if not isinstance(stm, (bool, np.bool_)):
        raise TypeError(f"stm: expected True or False, got {checks.shown(stm)}")
    return bool(stm)


def orbit_call(front, f, user_f, events, tofs, rtol, atol, max_steps, records, *, stm=False,
               single=False, max_step=float("inf"), first_step=None, progress=False, end=None):
    """The core's `Call` of an orbit propagation (`hapsira_core.ivp.call.Call.make`),
    shared by the numpy, JAX and Dask fronts of ``cowell``.

    DOP853 on ``y = (rr, vv)`` with GM first in the params row (``f`` as the core's
    ``fun``: `orbit_rhs`), from 0 to the last of ``tofs`` (``end``: where that is known
    otherwise, a traced JAX time), output at ``tofs`` (``(M,)`` or ``(N, M)``,
    `check_tofs`), no event states kept. ``stm``: ``y = (rr, vv, Phi)``, 42 numbers, Phi
    row-major with the variational equations of ``orbit_rhs(user_f)`` (its automatic
    Jacobian) and the state's derivatives from ``orbit_rhs(f)`` (``f`` the
    bounds-checked twin of ``user_f``), so that the state and the accepted steps are
    those of the call without. ``max_step``, ``first_step``: scipy's (`step_options`),
    data that never recompiles.
    """
    return Call.make(front, "DOP853", orbit_rhs(f), orbit_rhs(user_f), 6, 0, single, 0.0,
                     tofs_end(tofs) if end is None else end, tofs, rtol, atol, events,
                     max_steps, records, max_step, first_step,
                     functools.partial(_diagnose, f, events), stm=stm,
                     user_functions=[user_f if stm else f] + [e.g for e in events],
                     event_states=False, progress=progress)
