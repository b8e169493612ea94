"""Events for `hapsira_cowell.cowell()`: zeros of ``g(t, rr, vv, k, p)``.

Semantics follow ``scipy.integrate.solve_ivp``: an event occurs where ``g``
changes sign in the allowed ``direction`` (+1 upward only, -1 downward only,
0 both), its time is found with Brent's method on the dense output, and a
terminal event stops the object at that time. ``terminal`` may be ``True``
(stop at the first occurrence), ``False``, or an int n (stop at the n-th).

Built-in events keep their numbers (altitudes, radii, latitudes) as data, so
a new value never recompiles.
"""

import math

import numpy as np
from astropy import units as u

from hapsira_core import ivp
from hapsira_core.jit import factory
from hapsira_core.jit import hjit
from hapsira_core.vec import cross, dot, norm

from ..units import to_float
from .ephem import HEADER, position

__all__ = ["Event", "AltitudeCrossEvent", "LithobrakeEvent", "LatitudeCrossEvent",
           "NodeCrossEvent", "EclipseEvent", "UmbraEvent", "PenumbraEvent", "shadow_angle"]


@factory
def orbit_event(g):
    """``g(t, rr, vv, k, p, c) -> float`` as the core's ``g(t, y, p, c)`` (GM is ``p[0]``,
    the user's row follows: see `hapsira_cowell.propagation.forms`)."""
    @hjit
    def event(t, y, p, c):
        return g(t, (y[0], y[1], y[2]), (y[3], y[4], y[5]), p[0], p[1:], c)
    return event


@factory
def with_constants(g):
    """``g(t, rr, vv, k, p)`` as ``g(t, rr, vv, k, p, c)``: the built-in events' call form."""
    @hjit
    def adapted(t, rr, vv, k, p, c):
        return g(t, rr, vv, k, p)
    return adapted


class Event(ivp.EventBase):
    """A user event: ``g(t, rr, vv, k, p) -> float``, an ``hjit`` function.

    ``t`` s, ``rr`` km, ``vv`` km/s, ``k`` km^3/s^2, ``p`` the object's
    params row. See the module docstring for ``terminal`` and ``direction``.
    """

    def __init__(self, g, terminal=False, direction=0):
        if not callable(g):
            raise ValueError(f"g: expected an hjit function, got {type(g).__name__}")
        super().__init__(g, terminal, direction)
        self._device_function = None  # set by built-in events: g takes c

    @property
    def device_function(self):
        """The compiled ``g(t, y, p, c)`` the solver calls (``p[0]``: GM)."""
        return orbit_event(self._device_function or with_constants(self.g))

    @property
    def constants(self):
        """Numbers handed to `device_function` as ``c``."""
        return ()

    def check_params(self, params):
        """Raise ``ValueError`` if the params rows (``(1 or N, P)``, the user's
        columns) lack what this event reads; events that read none accept any."""

    def __repr__(self):
        return (f"{type(self).__name__}(terminal={self.terminal!r}, "
                f"direction={int(self.direction)})")


@hjit
def _altitude(t, rr, vv, k, p, c):
    return norm(rr) - c[1] - c[0]


class AltitudeCrossEvent(Event):
    """Crossing of the altitude ``alt`` above a sphere of radius ``R``.

    ``alt``, ``R``: km or length Quantities. Defaults detect a descent and
    stop there (re-entry).
    """

    def __init__(self, alt, R, terminal=True, direction=-1):
        super().__init__(_altitude, terminal, direction)
        self._device_function = _altitude
        self.alt = to_float(alt, u.km, "alt")
        self.R = to_float(R, u.km, "R")
        if self.R <= 0:
            raise ValueError(f"R: expected a positive radius, got {self.R} km")


    @property
    def constants(self):
        return (self.alt, self.R)


class LithobrakeEvent(AltitudeCrossEvent):
    """Impact on the surface of a sphere of radius ``R`` (km): stops the object."""

    def __init__(self, R, terminal=True):
        super().__init__(0.0, R, terminal=terminal, direction=-1)


@hjit
def _latitude(t, rr, vv, k, p, c):
    return math.asin(rr[2] / norm(rr)) - c[0]


class LatitudeCrossEvent(Event):
    """Crossing of the geocentric latitude ``lat`` (rad, or an angle Quantity).

    Latitude from the position in the attractor's equatorial frame:
    ``asin(z / r)``.
    """

    def __init__(self, lat, terminal=False, direction=0):
        super().__init__(_latitude, terminal, direction)
        self._device_function = _latitude
        self.lat = to_float(lat, u.rad, "lat")
        if abs(self.lat) > math.pi / 2:
            raise ValueError(f"lat: expected a latitude within +-90 deg, got {self.lat} rad")


    @property
    def constants(self):
        return (self.lat,)


@hjit
def _node(t, rr, vv, k, p, c):
    return rr[2]


class NodeCrossEvent(Event):
    """Crossing of the equatorial plane (``z = 0``): ``direction=+1`` ascending
    node, ``-1`` descending node, ``0`` both."""

    def __init__(self, terminal=False, direction=0):
        super().__init__(_node, terminal, direction)
        self._device_function = _node



@hjit
def shadow_angle(rr, rs, R, R_sun, umbra):
    """Signed angular distance (rad) of ``rr`` from the shadow's edge; < 0 inside.

    ``rr``: the object's position, ``rs``: the Sun's position, both km from the
    attractor's centre in one frame; ``R``, ``R_sun``: radii, km. ``umbra``:
    1.0 for the umbra (the Sun's disc wholly hidden), -1.0 for the penumbra
    (any part of it hidden). Seen from the object, the attractor's disc has
    the angular radius ``b = asin(R / |rr|)``, the Sun's ``a = asin(R_sun /
    |rs - rr|)``, and their centres are ``c`` apart; the result is
    ``c - b + a`` (umbra) or ``c - b - a`` (penumbra). Zero exactly on the
    surface of the umbra (penumbra) cone: the cone of lines tangent to both
    spheres on the same (opposite) sides. (For the *fraction* of the Sun's disc
    that is visible, see `hapsira_cowell.models.perturbations.shadow_function()`;
    it is constant outside the penumbra, so it cannot locate a crossing.)
    """
    d = (rs[0] - rr[0], rs[1] - rr[1], rs[2] - rr[2])
    r = norm(rr)
    # angle between -rr (to the attractor) and d (to the Sun); rr x d = rr x rs
    c = math.atan2(norm(cross(rr, rs)), -dot(rr, d))
    b = math.asin(min(1.0, R / r))
    a = math.asin(min(1.0, R_sun / norm(d)))
    return c - b + umbra * a


@hjit
def _eclipse(t, rr, vv, k, p, c):
    rs = position(p, int(c[2]), t)
    return shadow_angle(rr, rs, c[0], c[1], c[3])


_KINDS = {"umbra": 1.0, "penumbra": -1.0}


class EclipseEvent(Event):
    """Entry into or exit from the attractor's shadow (conical model).

    ``R``: the attractor's radius, ``R_sun``: the Sun's, km or length
    Quantities. ``offset``: where the Sun's ephemeris table
    (`hapsira_cowell.models.ephem.Ephemeris.to_params()`) starts in the params
    row ``p``; the table gives the Sun relative to the attractor, in the
    frame of the orbit. ``kind``: ``"umbra"`` (total eclipse) or
    ``"penumbra"`` (partial or total).

    ``g`` is `shadow_angle()` (rad): negative inside the shadow, so
    ``direction=-1`` detects entries, ``+1`` exits, ``0`` both.
    """

    def __init__(self, R, R_sun, offset, kind="umbra", terminal=False, direction=0):
        super().__init__(_eclipse, terminal, direction)
        self._device_function = _eclipse
        self.R = _radius(R, "R")
        self.R_sun = _radius(R_sun, "R_sun")
        if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or offset < 0:
            raise ValueError(f"offset: expected a non-negative int (index into the params "
                             f"row), got {offset!r}")
        self.offset = int(offset)
        if kind not in _KINDS:
            raise ValueError(f"kind: expected 'umbra' or 'penumbra', got {kind!r}")
        self.kind = kind

    @property
    def constants(self):
        return (self.R, self.R_sun, float(self.offset), _KINDS[self.kind])

    def check_params(self, params):
        """The Sun's table (`Ephemeris.to_params()`) must be whole in every row."""
        o, width = self.offset, params.shape[1]
        if width < o + HEADER:
            raise ValueError(f"params: {self!r} reads the Sun's ephemeris table at column {o} "
                             f"(Ephemeris.to_params()), but the rows have {width} columns")
        samples = params[:, o + 2]
        if not np.all((samples >= 2) & (samples == np.floor(samples))):
            raise ValueError(f"params: {self!r} expects the number of table samples in column "
                             f"{o + 2} (an integer >= 2), got {samples[~((samples >= 2) & (samples == np.floor(samples)))][0]!r}")
        needed = o + HEADER + 6 * int(samples.max())
        if width < needed:
            raise ValueError(f"params: {self!r} needs {needed} columns for its ephemeris table "
                             f"of {int(samples.max())} samples at column {o}, but the rows "
                             f"have {width}")

    def __repr__(self):
        return (f"{type(self).__name__}(R={self.R}, R_sun={self.R_sun}, offset={self.offset}, "
                f"kind={self.kind!r}, terminal={self.terminal!r}, "
                f"direction={int(self.direction)})")


class UmbraEvent(EclipseEvent):
    """Crossing of the umbra's edge: the Sun wholly hidden inside; see `EclipseEvent`."""

    def __init__(self, R, R_sun, offset, terminal=False, direction=0):
        super().__init__(R, R_sun, offset, "umbra", terminal, direction)


class PenumbraEvent(EclipseEvent):
    """Crossing of the penumbra's outer edge: the Sun at least partly hidden
    inside (the umbra included); see `EclipseEvent`."""

    def __init__(self, R, R_sun, offset, terminal=False, direction=0):
        super().__init__(R, R_sun, offset, "penumbra", terminal, direction)


def _radius(value, name):
    radius = to_float(value, u.km, name)
    if radius <= 0:
        raise ValueError(f"{name}: expected a positive radius, got {radius} km")
    return radius
