"""Positions of other bodies (Sun, Moon, ...) as data the kernels interpolate.

A kernel cannot call astropy, and a body's position must not be a compile-time
constant. So the position is sampled on the host (astropy, built-in
ephemeris, no downloads) into a table of positions and velocities, the table is
appended to the objects' ``params``, and `position()` evaluates it inside
the kernel by cubic Hermite interpolation::

    eph = Ephemeris.from_body("moon", epoch, 0.0, 86400.0)
    params = np.concatenate([[C_R, A_over_m], eph.to_params()])   # table at offset 2

    @hjit
    def f(t, rr, vv, k, p):
        r_moon = position(p, 2, t)
        ...

Positions are geocentric and geometric (no light time, no aberration: what
gravity and radiation pressure need), in GCRS axes (ICRS-aligned), km; times
are seconds since ``epoch`` (the t = 0 of the propagation).

Accuracy. The interpolation error against astropy at the default steps is
below 0.5 m for the Sun (6 h samples) and 2 m for the Moon (1 h samples),
measured over 30 days (``tests/cowell/models/test_ephem.py`` asserts 1 m and 5 m). The built-in
ephemeris itself is the limit: ERFA ``epv00`` (Earth, hence the Sun: RMS
3.7 km, max 11 km against JPL DE406 over 1900-2100) and ``moon98`` (Moon:
RMS 6.1 km, max 32 km against ELP/MPP02 over 1950-2100), per their
documentation. The interpolation error falls only linearly with the step:
the built-in velocities differ from the derivatives of the positions (by
about 3 mm/s for the Moon, 1 mm/s for the Sun), and cubic Hermite
interpolation takes both at face value.

Outside the table the position is clamped: the first (last) sample holds
before (after) it. `Ephemeris.from_body()` adds one sample beyond each
end of the requested span.
"""

import math

import numpy as np
from astropy import units as u
from astropy.time import Time

from hapsira_core.jit import hjit

from ..units import to_float

__all__ = ["Ephemeris", "position", "interpolate", "HEADER"]

#: Numbers before the samples in a table: t0 (s), dt (s), number of samples.
HEADER = 3

#: Default sampling step per body (s); other bodies: one day. Interpolation
#: error at these steps: Sun < 0.5 m, Moon < 2 m (see the module's docstring).
DEFAULT_STEP = {"sun": 6 * 3600.0, "moon": 3600.0}


class Ephemeris:
    """Samples ``(t0 + i dt)`` of a body's position (km) and velocity (km/s)."""

    def __init__(self, t0, dt, positions, velocities):
        self.t0 = float(t0)
        self.dt = float(dt)
        self.positions = np.asarray(positions, dtype=np.float64)
        self.velocities = np.asarray(velocities, dtype=np.float64)
        if self.positions.ndim != 2 or self.positions.shape[1] != 3 or len(self.positions) < 2:
            raise ValueError(f"positions: expected shape (n, 3) with n >= 2, "
                             f"got {self.positions.shape}")
        if self.velocities.shape != self.positions.shape:
            raise ValueError(f"velocities: expected shape {self.positions.shape}, "
                             f"got {self.velocities.shape}")
        if not self.dt > 0:
            raise ValueError(f"dt: expected a positive step in s, got {dt}")

    @classmethod
    def from_samples(cls, t0, dt, positions, velocities):
        """A table from samples at ``t0 + i * dt`` (s); positions km, velocities km/s."""
        return cls(t0, dt, positions, velocities)

    @classmethod
    def from_body(cls, body, epoch, tof_min, tof_max, step=None):
        """Sample ``body`` relative to the Earth's centre around ``epoch``.

        ``body``: an astropy solar-system body name (``"sun"``, ``"moon"``,
        ``"jupiter"``, ...); ``epoch``: astropy ``Time``, the t = 0 of the
        propagation; ``tof_min``, ``tof_max``: the span in s after ``epoch``
        (floats, Quantities or TimeDelta; negative for backward runs), covered
        with one extra sample each side; ``step``: s between samples (default
        `DEFAULT_STEP`). Positions km and velocities km/s in GCRS axes,
        from astropy's built-in ephemeris (no downloads).
        """
        tof_min = to_float(tof_min, u.s, "tof_min")
        tof_max = to_float(tof_max, u.s, "tof_max")
        if tof_max < tof_min:
            tof_min, tof_max = tof_max, tof_min
        step = DEFAULT_STEP.get(body.lower(), 86400.0) if step is None else \
            to_float(step, u.s, "step")
        n = int(math.ceil((tof_max - tof_min) / step)) + 3
        t0 = tof_min - step
        times = Time(epoch) + (t0 + step * np.arange(n)) * u.s
        # imported here: astropy.coordinates takes 0.35 s to import, a third of a warm start
        from astropy.coordinates import get_body_barycentric_posvel

        body_pv = get_body_barycentric_posvel(body, times, ephemeris="builtin")
        earth_pv = get_body_barycentric_posvel("earth", times, ephemeris="builtin")
        positions = (body_pv[0] - earth_pv[0]).xyz.to_value(u.km).T
        velocities = (body_pv[1] - earth_pv[1]).xyz.to_value(u.km / u.s).T
        return cls(t0, step, positions, velocities)

    def to_params(self):
        """The table as a 1-D float64 array: ``[t0, dt, n, x, y, z, vx, vy, vz, ...]``."""
        samples = np.concatenate([self.positions, self.velocities], axis=1).ravel()
        return np.concatenate([[self.t0, self.dt, len(self.positions)], samples])

    def position(self, t):
        """Host-side evaluation at ``t`` (s; scalar or array) with the kernel's rule."""
        table = self.to_params()
        scalar = np.ndim(t) == 0
        out = np.array([interpolate(table, 0, ti) for ti in np.atleast_1d(t).astype(np.float64)])
        return out[0] if scalar else out


def interpolate(p, offset, t):
    """Cubic Hermite interpolation of the table at ``p[offset:]``; time clamped to its span.

    Plain Python, callable on the host on every target (``position`` is the
    same function compiled for kernels; on a GPU it cannot be called from the host).
    """
    o = int(offset)
    t0 = p[o]
    dt = p[o + 1]
    n = int(p[o + 2])
    s = (t - t0) / dt
    i = int(math.floor(s))
    if i < 0:
        i = 0
    if i > n - 2:
        i = n - 2
    x = s - i
    if x < 0.0:
        x = 0.0
    if x > 1.0:
        x = 1.0
    x2 = x * x
    x3 = x2 * x
    h00 = 2.0 * x3 - 3.0 * x2 + 1.0
    h10 = (x3 - 2.0 * x2 + x) * dt
    h01 = 3.0 * x2 - 2.0 * x3
    h11 = (x3 - x2) * dt
    a = o + HEADER + 6 * i
    b = a + 6
    return (h00 * p[a] + h10 * p[a + 3] + h01 * p[b] + h11 * p[b + 3],
            h00 * p[a + 1] + h10 * p[a + 4] + h01 * p[b + 1] + h11 * p[b + 4],
            h00 * p[a + 2] + h10 * p[a + 5] + h01 * p[b + 2] + h11 * p[b + 5])


#: ``position(p, offset, t) -> (x, y, z)`` km: the table at ``p[offset:]`` at ``t`` s.
position = hjit(interpolate)
