"""Conjunction screening: every pair of a cloud that comes within a threshold, when and how close.

`screen()` runs in three phases (docs/screening.md):

1. Propagation. The cloud is integrated once with the core's DOP853 (the
   orbit right-hand side `cowell` uses, on the active target) and its states
   are sampled every ``dt`` seconds, in chunks of time so that memory stays
   bounded for any span.
2. Broad phase, per window between two samples. Each object's arc over the
   window lies inside the box spanned by its two sampled positions, widened
   by the bound on the distance between a curve and its chord,
   ``|r(t) - L(t)| <= dt^2 / 8 * max|r''|`` (the linear interpolation error
   bound; e.g. Atkinson, *An Introduction to Numerical Analysis*, 2nd ed.,
   Theorem 3.2), with ``max|r''|`` bounded as described at `_chord_margin`; and
   its distance from the centre lies in ``[d - m, max(|p_a|, |p_b|) + m]``
   (``d`` a lower bound on the chord's distance from the centre,
   `radius_bounds`). These four intervals, x, y, z and the radius, make a 4-D
   box per object; since ``|r_i - r_j| >= ||r_i| - |r_j||``, two arcs that come
   within the threshold have boxes within the threshold along all four axes.
   Each window is a grid of 4-D cells as wide as its widest box (along the
   radius, its widest radius interval), and each object is entered in every
   cell its box (tops moved out by the threshold) touches: one or two along
   each axis. The entries are hashed into a table and counting-sorted by slot
   (`_sort_window`), and each entry looks at the later entries of its slot
   (`_pairs`): a pair is tested only in the one cell where its overlap begins
   (`_entry`'s home bits), if its boxes overlap. On cuda these are kernels of
   one GPU thread per (window, object) and per (window, entry), the scan one
   thread per (window, entry) (`_scan_entry`), the sorted arrays kept on the
   GPU between them; on the host targets one kernel runs both per window
   (`_grid_window`: a loop on cpu, a gufunc on parallel), while the window's
   arrays are in the core's cache (`broad_phase`). Pairs found so are kept
   only if the straight-line relative motion between the two samples comes
   within ``threshold + m_i + m_j`` (``m`` the chord margins), a test that
   never drops a true approach since ``|r_i - r_j| >= |L_i - L_j| - m_i -
   m_j``, and that implies the boxes' overlap: the candidates are exactly the
   pairs the chord test keeps, the grid only spares testing the rest. The
   radius is what separates objects of different shells that are near in
   space (docs/screening.md, "How it works").
3. Narrow phase. Each candidate (pair, window) is integrated as one ODE of 12
   components (both objects, the same force model) from the window's first
   sample to its last (and 5% past it: a minimum at a sample time is on two
   windows' border, `refine`), with an event on the relative range rate
   ``g = (r_i - r_j) . (v_i - v_j)`` crossing from negative to positive (a
   minimum of the distance), located on the solver's dense output as scipy
   does. The event's time is the time of closest approach (TCA), its state
   gives the miss distance and the relative speed. All candidates go in one
   `solve_ivp` call, on every target.

An approach is a local minimum of the distance inside ``(t0, tf)`` below the
threshold; a distance still falling at ``tf`` (or rising from ``t0``) is not one.

Why no apogee/perigee prefilter: the radius interval per window is that
filter made local (an object's radius over a window is a sliver of its
perigee-apogee range), with a bound that needs no osculating elements and so
holds under any perturbation the chord margin allows.
"""

import math
import warnings

import numba
import numpy as np
from astropy import units as u

from hapsira_core.fronts.numpy import states_at
from hapsira_core.ivp import STATUS_MESSAGES, Event, checks, solve_ivp
from hapsira_core.jit import Arg, ObjectKernel, factory, hjit
from hapsira_core.ivp import prepare as compile_ahead
from hapsira_core.targets import active

from ..constants import J2_EARTH, R_EARTH
from ..models.perturbations import J2_perturbation, two_body
from ..units import to_value
from .forms import check_gm, check_states, orbit_rhs

__all__ = [
    "ConjunctionTable",
    "IdenticalObjectsWarning",
    "identical_objects",
    "broad_phase",
    "chord_candidates",
    "radius_bounds",
    "radius_candidates",
    "refine",
    "sample_cloud",
    "sample_states",
    "take_states",
    "screen",
    "two_body_j2",
]

#: The columns of a `ConjunctionTable`, their units and meaning.
COLUMNS = {
    "i": ("", "index of the first object (i < j)"),
    "j": ("", "index of the second object"),
    "tca": ("s", "time of closest approach, on the time axis of t_span"),
    "miss": ("km", "distance at the TCA"),
    "speed": ("km/s", "relative speed at the TCA"),
}

#: The perturbations are assumed smaller than this fraction of the central attraction
#: (J2 is 1.6e-3 of it at the Earth's surface; drag, third bodies and radiation pressure
#: less) when bounding the acceleration of an arc: `_chord_margin`.
PERTURBATION_FRACTION = 0.5
#: An arc is assumed to stay above this fraction of the smaller radius of its two
#: samples; `screen` chooses dt so that it does (an arc of length v dt from a sample).
RADIUS_FRACTION = 0.9
#: Occurrences of the minimum kept per candidate window (two minima of one pair less than
#: a window apart happen only for objects flying in formation).
RECORDS = 4


@hjit
def two_body_j2(t, rr, vv, k, p):
    """Two-body plus the Earth's J2 (EGM96's, `hapsira_cowell.constants`): `screen`'s
    default force model."""
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, J2_EARTH, R_EARTH)
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])


@factory
def pair_rhs(f, width):
    """Two objects under ``f`` as one state of 12: ``y = (r_i, v_i, r_j, v_j)``; the
    params row is ``(k, p_i, p_j)``, each object's row ``width`` numbers."""
    @hjit
    def fun(t, y, p):
        k = p[0]
        da, dva = f(t, (y[0], y[1], y[2]), (y[3], y[4], y[5]), k, p[1:1 + width])
        db, dvb = f(t, (y[6], y[7], y[8]), (y[9], y[10], y[11]), k,
                    p[1 + width:1 + 2 * width])
        return (da[0], da[1], da[2], dva[0], dva[1], dva[2],
                db[0], db[1], db[2], dvb[0], dvb[1], dvb[2])
    return fun


@hjit
def range_rate(t, y, p):
    """``(r_i - r_j) . (v_i - v_j)``: half the derivative of the squared distance."""
    return ((y[0] - y[6]) * (y[3] - y[9]) + (y[1] - y[7]) * (y[4] - y[10])
            + (y[2] - y[8]) * (y[5] - y[11]))


#: A minimum of the distance: the range rate crosses zero upwards.
CLOSEST_APPROACH = Event(range_rate, terminal=False, direction=1)


class ConjunctionTable:
    """The approaches `screen` found, one row each, sorted by ``tca``.

    Columns (numpy arrays, read as ``table.miss`` or ``table["miss"]``): ``i``,
    ``j`` (object indices, ``i < j``), ``tca`` (s, on the axis of ``t_span``),
    ``miss`` (km), ``speed`` (relative speed, km/s). ``len(table)`` rows;
    ``table.to_csv(path)`` writes them with a header.
    """

    columns = tuple(COLUMNS)

    def __init__(self, i, j, tca, miss, speed):
        order = np.lexsort((np.asarray(j), np.asarray(i), np.asarray(tca)))
        self._data = {"i": np.asarray(i, dtype=np.int64)[order],
                      "j": np.asarray(j, dtype=np.int64)[order],
                      "tca": np.asarray(tca, dtype=np.float64)[order],
                      "miss": np.asarray(miss, dtype=np.float64)[order],
                      "speed": np.asarray(speed, dtype=np.float64)[order]}

    def __getitem__(self, name):
        try:
            return self._data[name]
        except KeyError:
            raise KeyError(f"{name!r}: not a column; the columns are {self.columns}") from None

    def __getattr__(self, name):
        data = self.__dict__.get("_data", {})
        if name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __len__(self):
        return len(self._data["i"])

    def __repr__(self):
        closest = f", closest {self.miss.min():.3f} km" if len(self) else ""
        return f"ConjunctionTable({len(self)} approaches{closest})"

    def to_csv(self, path):
        """Write the table as CSV: a header ``i,j,tca_s,miss_km,speed_km_s`` and one line
        per approach (times and distances with 17 significant digits)."""
        header = "i,j,tca_s,miss_km,speed_km_s"
        rows = np.column_stack([self[c] for c in ("i", "j", "tca", "miss", "speed")])
        np.savetxt(path, rows, delimiter=",", header=header, comments="",
                   fmt=["%d", "%d", "%.17g", "%.17g", "%.17g"])


def _rows(params, n):
    """Each object's params row (N, P) (a shared row repeated)."""
    rows = checks.params(params, n)
    return np.ascontiguousarray(np.broadcast_to(rows, (n, rows.shape[1])))


def sample_cloud(k, r0, v0, times, f, rows, rtol, atol):
    """Positions and velocities ``(N, M, 3)`` of the cloud at ``times``: the two halves of
    `sample_states`."""
    states = sample_states(k, r0, v0, times, f, rows, rtol, atol)
    return states[:, :, :3], states[:, :, 3:]


def sample_states(k, r0, v0, times, f, rows, rtol, atol, on_device=False, buffer=None):
    """States ``(N, M, 6)`` (km, km/s; C-ordered, as the solver writes them) of the cloud
    at ``times`` (s from the screen's t0), from ``r0``, ``v0`` at ``times[0]``, integrated
    as `cowell` does (DOP853 on ``orbit_rhs(f)``, GM first in the params row),
    continuously over ``times``. ``on_device``: left in the target's own memory (cuda:
    a device array, which `broad_phase` reads there and `take_states` gathers from):
    the 48 bytes per object and sample never cross to the host and back. ``buffer``: a
    float64 numpy array of at least ``N * M * 6`` numbers (C-ordered, flat or not) whose
    start the states are written to and returned as a view of (not with
    ``on_device``): `screen` samples every chunk into one, whose pages are faulted in
    once rather than each chunk (docs/log.md, "the screen's samples and working rows")."""
    n = r0.shape[0]
    y0 = np.concatenate((r0, v0), axis=1)
    p = np.concatenate((np.full((n, 1), float(k)), rows), axis=1)
    out = None
    if buffer is not None:
        size = n * len(times) * 6
        if on_device:
            raise ValueError("buffer: not with on_device (the states stay in the target's "
                             "memory)")
        if buffer.size < size:
            raise ValueError(f"buffer: expected a host array of at least {size} numbers "
                             f"({n} objects x {len(times)} times x 6), got {buffer.size}")
        out = buffer.reshape(-1)[:size].reshape(n, len(times), 6)
    states, status = states_at(orbit_rhs(f), (float(times[0]), float(times[-1])), y0,
                               times, rtol=rtol, atol=atol, params=p, on_device=on_device,
                               out=out)
    if np.any(status < 0):
        bad = np.flatnonzero(status < 0)
        raise ValueError(f"r0, v0: objects {bad[:10].tolist()} failed to propagate "
                         f"({STATUS_MESSAGES[int(status[bad[0]])]}); remove them before "
                         f"screening")
    return states


@hjit
def _take(item, states, out):
    """Object ``item[0]``'s state at sample ``item[1]``."""
    for c in range(6):
        out[c] = states[item[0], item[1], c]


_TAKE = ObjectKernel(_take, [Arg("item", np.int64, ("two",)),
                             Arg("states", np.float64, ("n", "m", "six"), per_object=False),
                             Arg("out", np.float64, ("six",), output=True)])


def in_target_memory(array):
    """Whether ``array`` is in the active target's own memory (a cuda device array, the
    simulator's too): never on the host targets."""
    return (not isinstance(array, np.ndarray) and hasattr(array, "shape")
            and active.device_memory() is not None and active.to_device(array) is array)


def take_states(states, objects, samples):
    """``states[objects, samples]``, ``(K, 6)`` on the host, from states on the host or
    in the target's memory (a kernel gathers those rows there: only they cross)."""
    objects, samples = np.broadcast_arrays(np.asarray(objects, dtype=np.int64),
                                           np.asarray(samples, dtype=np.int64))
    if not in_target_memory(states):
        return np.asarray(states)[objects, samples]
    out = np.empty((objects.size, 6))
    if objects.size:
        _TAKE(np.stack((objects.ravel(), samples.ravel()), axis=1), states, out)
    return out


def _chord_margin(k, p0, p1, v0, v1, dt):
    """Upper bound ``m`` on ``|r(t) - L(t)|`` over each window, ``(N, W)`` km.

    ``dt^2 / 8 * a_max`` with ``a_max`` the larger of (1 + PERTURBATION_FRACTION)
    times the central attraction at RADIUS_FRACTION of the smaller sampled radius,
    and twice the mean acceleration ``|v1 - v0| / dt`` the samples show.
    """
    r_low = RADIUS_FRACTION * np.minimum(np.linalg.norm(p0, axis=-1),
                                         np.linalg.norm(p1, axis=-1))
    a_max = np.maximum((1.0 + PERTURBATION_FRACTION) * k / r_low ** 2,
                       2.0 * np.linalg.norm(v1 - v0, axis=-1) / dt)
    return dt * dt / 8.0 * a_max


def chord_candidates(p0i, p1i, p0j, p1j, mi, mj, threshold):
    """Where the straight-line relative motion comes within ``threshold + mi + mj``."""
    d0 = p0i - p0j
    e = (p1i - p1j) - d0
    ee = np.einsum("...k,...k->...", e, e)
    s = np.clip(-np.einsum("...k,...k->...", d0, e) / np.where(ee > 0, ee, 1.0), 0.0, 1.0)
    closest = d0 + s[..., None] * e
    return np.einsum("...k,...k->...", closest, closest) <= (threshold + mi + mj) ** 2


def radius_bounds(p0, p1, m):
    """``(lo, hi)``: bounds on ``|r(t)|`` over each window, from its samples ``p0``,
    ``p1`` (..., 3) and chord margin ``m``: along the chord ``L(s) = (1 - s) p0 + s p1``,
    ``|L(s)|^2 = (1 - s)|p0|^2 + s|p1|^2 - s(1 - s)|p1 - p0|^2``, so ``|L(s)|`` is at
    most its larger end and at least ``sqrt(min(|p0|^2, |p1|^2) - |p1 - p0|^2 / 4)``
    (the chord's dip below its ends: equal radii, its distance from the centre), and
    ``|r(t)|`` is within ``m`` of ``|L(t)|``."""
    square0 = np.einsum("...k,...k->...", p0, p0)
    square1 = np.einsum("...k,...k->...", p1, p1)
    e = p1 - p0
    low = np.sqrt(np.maximum(np.minimum(square0, square1)
                             - 0.25 * np.einsum("...k,...k->...", e, e), 0.0)) - m
    high = np.maximum(np.sqrt(square0), np.sqrt(square1)) + m
    return low, high


def radius_candidates(p0i, p1i, p0j, p1j, mi, mj, threshold):
    """Where the radius intervals of `radius_bounds` come within ``threshold`` (the
    kernel's radius test, on the host: each interval's top moved out by the threshold
    and `_BOX_PAD` of itself, as `_object_box` does)."""
    lo_i, hi_i = radius_bounds(p0i, p1i, mi)
    lo_j, hi_j = radius_bounds(p0j, p1j, mj)
    return ((lo_j <= hi_i + (threshold + _BOX_PAD * hi_i))
            & (lo_i <= hi_j + (threshold + _BOX_PAD * hi_j)))


#: Rounding of the boxes and radius intervals (a few units in the last place of a
#: coordinate) is covered by this fraction of the radius, added to their reach.
_BOX_PAD = 1e-9


# --- the broad phase: per window, a grid of 4-D cells (x, y, z, radius) ---
#
# Each object's arc over a window lies in a 4-D box (`_object_box`): its chord's bounding
# box widened by the chord margin m along x, y and z, and its radius interval
# (`radius_bounds`) along the radius; each box's tops are moved out by the threshold (and
# `_BOX_PAD` of its radius), so that two arcs that come within the threshold have
# overlapping boxes. A window's cells are as wide as its widest box along x, y and z (one
# width for the three) and as its widest radius interval along the radius: a box touches
# one or two cells along each axis, at most 16, and its object is entered in each
# (`_cells`, `_entry`; a few on average). Overlapping boxes share the cell of the lower
# corner of their overlap, max(low_i, low_j) along each axis (the same floor of the same
# numbers: cells are counted alike for both, whatever the rounding), and are tested
# there only: in that cell, along each axis, one of the two boxes starts (the entries'
# "home" bits), and in no other cell they share is that so. The radius is what
# separates most objects that are near in space (shells tens of km apart): a 3-D grid
# pairs them up; and looking up neighbour cells (rather than entering each object in
# every cell it touches) costs more than the entries (docs/screening.md and
# docs/log.md say how much).
#
# The cells are hashed into a table (spatial hashing: Teschner et al., "Optimized
# Spatial Hashing for Collision Detection of Deformable Objects", VMV 2003, whose three
# primes are used below, and a fourth) and the entries counting-sorted by slot; each
# entry then looks at the entries after it in its slot (`_pairs`): same cell, home bits,
# the boxes' overlap, then the chord test. Candidates go to a bounded output row with a
# counter that keeps counting past the row's end (the caller runs such rows again with
# room for all: no pair is lost).
#
# Written once, in halves: `_sort_window` (boxes, cell sizes, entries and the counting
# sort of one window) and `_pairs` (the pair scan of one sorted entry). On the host
# targets one kernel object per window runs both (`_grid_window`: slot by slot), while the
# window's arrays are in the core's cache. On a target with memory of its own (cuda) the
# same numbers come from kernels of one object per (window, object) and per (window,
# entry) around the target's `row_max`, `row_offsets` and `bucket_sort`
# (`_sorted_windows`), and `_SCAN` runs one "object" per (window, entry)
# (`_scan_entry`); the arrays between them stay in the target's memory.

#: Bits per cell coordinate in a packed cell key (four in an int64, none in its sign
#: bit: -1 is no cell); coordinates are offset by half the range and clamped into it
#: (clamping merges far cells: more pairs tested, none lost).
_BITS = 15
_HALF = 1 << (_BITS - 1)
_MASK = (1 << _BITS) - 1
#: The cell widths are the widest box's times this, so that rounding of the divisions
#: never puts a box in three cells along an axis.
_CELL_SLACK = 1.0 + 1e-6
#: Cells an object is entered in at most (two along each of the four axes), and the
#: bits of an entry's home flags (one per axis) in its packed entry ``o * CELLS + home``.
CELLS = 16


@hjit(inline="always")
def _arc_margin(k, dt, r0, r1, dvx, dvy, dvz):
    """`_chord_margin` of one object and window (the same bound, scalar form), from the
    sampled radii ``r0``, ``r1`` and the change of velocity."""
    r_low = RADIUS_FRACTION * min(r0, r1)
    a_max = max((1.0 + PERTURBATION_FRACTION) * k / (r_low * r_low),
                2.0 * math.sqrt(dvx * dvx + dvy * dvy + dvz * dvz) / dt)
    return dt * dt / 8.0 * a_max


@hjit(inline="always")
def _cell_coordinate(x):
    """The cell of ``x`` in cell widths (``x`` times the inverse width: a product, the
    same for every box, so boxes are counted alike), offset by `_HALF`, clamped."""
    c = int(math.floor(max(min(x, float(_HALF)), -float(_HALF + 1)))) + _HALF  # noqa: RUF046
    return min(max(c, 0), _MASK)


@hjit(inline="always")
def _bucket(cx, cy, cz, cr, size):
    """The hash table slot of a cell (``size`` a power of two)."""
    return ((cx * 73856093) ^ (cy * 19349663) ^ (cz * 83492791) ^ (cr * 50331653)) & (size - 1)


@hjit(inline="always")
def _key_bucket(key, size):
    """`_bucket` of a packed cell key."""
    return _bucket(key >> (3 * _BITS), (key >> (2 * _BITS)) & _MASK, (key >> _BITS) & _MASK,
                   key & _MASK, size)


@hjit(inline="always")
def _chord_close(samples, a, b, o, q, limit):
    """`chord_candidates` for objects ``o`` and ``q`` between samples ``a`` and ``b``:
    whether their straight-line relative motion comes within ``limit``."""
    d0x = samples[o, a, 0] - samples[q, a, 0]
    d0y = samples[o, a, 1] - samples[q, a, 1]
    d0z = samples[o, a, 2] - samples[q, a, 2]
    ex = (samples[o, b, 0] - samples[q, b, 0]) - d0x
    ey = (samples[o, b, 1] - samples[q, b, 1]) - d0y
    ez = (samples[o, b, 2] - samples[q, b, 2]) - d0z
    ee = ex * ex + ey * ey + ez * ez
    s = -(d0x * ex + d0y * ey + d0z * ez) / (ee if ee > 0 else 1.0)
    s = min(max(s, 0.0), 1.0)
    cx = d0x + s * ex
    cy = d0y + s * ey
    cz = d0z + s * ez
    return cx * cx + cy * cy + cz * cz <= limit * limit


@hjit(inline="always")
def _object_box(samples, o, a, b, k, dt, threshold, margin, box, at):
    """Object ``o``'s arc in the window of samples ``a``, ``b``: its chord margin
    (`_arc_margin`) to ``margin[at]``, its 4-D box to ``box[at]``: ``(low x, y, z, radius
    low, top x, y, z, radius top)``, the chord's bounds widened by the margin (the
    radius: `radius_bounds`), each top moved out by the threshold and `_BOX_PAD` of the
    radius top (which bounds every coordinate). Returns the box's widest side along x,
    y, z and its side along the radius (the window's widest set its cells)."""
    x0 = samples[o, a, 0]
    y0 = samples[o, a, 1]
    z0 = samples[o, a, 2]
    x1 = samples[o, b, 0]
    y1 = samples[o, b, 1]
    z1 = samples[o, b, 2]
    square0 = x0 * x0 + y0 * y0 + z0 * z0
    square1 = x1 * x1 + y1 * y1 + z1 * z1
    r0 = math.sqrt(square0)
    r1 = math.sqrt(square1)
    m = _arc_margin(k, dt, r0, r1, samples[o, b, 3] - samples[o, a, 3],
                    samples[o, b, 4] - samples[o, a, 4], samples[o, b, 5] - samples[o, a, 5])
    ex = x1 - x0
    ey = y1 - y0
    ez = z1 - z0
    low = math.sqrt(max(min(square0, square1) - 0.25 * (ex * ex + ey * ey + ez * ez),
                        0.0)) - m
    high = max(r0, r1) + m
    reach = threshold + _BOX_PAD * high
    margin[at] = m
    box[at, 0] = min(x0, x1) - m
    box[at, 1] = min(y0, y1) - m
    box[at, 2] = min(z0, z1) - m
    box[at, 3] = low
    box[at, 4] = max(x0, x1) + m + reach
    box[at, 5] = max(y0, y1) + m + reach
    box[at, 6] = max(z0, z1) + m + reach
    box[at, 7] = high + reach
    side = max(box[at, 4] - box[at, 0], box[at, 5] - box[at, 1], box[at, 6] - box[at, 2])
    return side, box[at, 7] - box[at, 3]


@hjit(inline="always")
def _cells(box, o, inverse, inverse_r):
    """The cells of object ``o``'s box, ``(x, y, z, r, sx, sy, sz, sr)``, cells
    ``1 / inverse`` wide along x, y, z and ``1 / inverse_r`` along the radius: its first
    cell's coordinates and, along each axis, 1 where it reaches the next cell too (never
    two more: cells are wider than any box, `_CELL_SLACK`)."""
    cx = _cell_coordinate(box[o, 0] * inverse)
    cy = _cell_coordinate(box[o, 1] * inverse)
    cz = _cell_coordinate(box[o, 2] * inverse)
    cr = _cell_coordinate(box[o, 3] * inverse_r)
    return (cx, cy, cz, cr,
            min(_cell_coordinate(box[o, 4] * inverse) - cx, 1),
            min(_cell_coordinate(box[o, 5] * inverse) - cy, 1),
            min(_cell_coordinate(box[o, 6] * inverse) - cz, 1),
            min(_cell_coordinate(box[o, 7] * inverse_r) - cr, 1))


@hjit(inline="always")
def _inverse_width(widest):
    """The inverse of the cells' width along an axis, from the window's widest box
    there (the same number for every target: cuda computes it per thread)."""
    return 1.0 / (widest * _CELL_SLACK)


@hjit(inline="always")
def _count(cells):
    """How many cells `_cells` lists (1 to 16)."""
    return (1 + cells[4]) * (1 + cells[5]) * (1 + cells[6]) * (1 + cells[7])


@hjit(inline="always")
def _entry(cells, bx, by, bz, br, size):
    """A cell of `_cells` ``cells``: the first along each axis, or the next where ``bx``,
    ``by``, ``bz``, ``br`` (x, y, z, radius) are 1 (0 to ``cells[4:8]``): ``(packed key,
    hash slot of a table of size slots, home bits)``. Home bit ``d``: the box starts in
    this cell along axis ``d``."""
    x = cells[0] + bx
    y = cells[1] + by
    z = cells[2] + bz
    r = cells[3] + br
    key = (x << (3 * _BITS)) | (y << (2 * _BITS)) | (z << _BITS) | r
    home = (1 - bx) | ((1 - by) << 1) | ((1 - bz) << 2) | ((1 - br) << 3)
    return key, _bucket(x, y, z, r, size), home


@hjit(inline="always")
def _sort_window(window, samples, conf, margin, box, sorted_keys, sorted_entries, starts):
    """The per-window half of the broad phase: what `_pairs` reads of window ``window[0]``
    (samples ``a``, ``a + 1`` of ``samples``, ``(N, M, 6)`` states; ``conf = (dt, k,
    threshold)``). Returns the number of entries.

    Outputs: by object, ``margin`` (chord margins) and ``box`` (`_object_box`); by entry
    in slot order, ``sorted_keys`` (the cell's packed key) and ``sorted_entries`` (``o *
    CELLS + home bits``); by hash slot, ``starts``, where each slot's entries begin (``size
    + 1``, the last the end). (The host targets' form, one window per core at a time; on
    cuda the same numbers come from kernels per (window, object) and per (window, entry)
    and the target's `bucket_sort`: `_sorted_windows`.)"""
    a = window[0]
    b = a + 1
    dt = conf[0]
    k = conf[1]
    threshold = conf[2]
    n = samples.shape[0]
    size = starts.shape[0] - 1
    widest = 0.0
    widest_r = 0.0
    for o in range(n):
        side, side_r = _object_box(samples, o, a, b, k, dt, threshold, margin, box, o)
        widest = max(widest, side)
        widest_r = max(widest_r, side_r)
    inverse = _inverse_width(widest)
    inverse_r = _inverse_width(widest_r)
    # counting sort of the entries by hash slot: each slot's count, their running sums
    # (each slot's end), and each entry put before its slot's end, moved down
    for h in range(size + 1):
        starts[h] = 0
    for o in range(n):
        cells = _cells(box, o, inverse, inverse_r)
        for bx in range(cells[4] + 1):
            for by in range(cells[5] + 1):
                for bz in range(cells[6] + 1):
                    for br in range(cells[7] + 1):
                        key, h, home = _entry(cells, bx, by, bz, br, size)
                        starts[h] += 1
    for h in range(1, size):
        starts[h] += starts[h - 1]
    starts[size] = starts[size - 1]
    for o in range(n):
        cells = _cells(box, o, inverse, inverse_r)
        for bx in range(cells[4] + 1):
            for by in range(cells[5] + 1):
                for bz in range(cells[6] + 1):
                    for br in range(cells[7] + 1):
                        key, h, home = _entry(cells, bx, by, bz, br, size)
                        starts[h] -= 1
                        slot = starts[h]
                        sorted_keys[slot] = key
                        sorted_entries[slot] = o * CELLS + home
    return starts[size]


@hjit(inline="always")
def _pairs(here, end, a, b, threshold, samples, margin, box, sorted_keys, sorted_entries,
           pairs, found):
    """Sorted entry ``here`` of one window (samples ``a``, ``b`` of ``samples``; its rows
    of `_sort_window`'s outputs) against the entries after it in its hash slot (to
    ``end``): those in its cell, at the pair's home cell (`_entry`), whose boxes overlap
    and whose straight-line relative motion passes the chord test. Candidates go to
    ``pairs`` from row ``found`` on (rows ``i, j``, ``i < j``; past its end counted, not
    written). Returns ``(candidates, grid pairs, pairs whose boxes overlap)``, the first
    with ``found``: grid pairs are pairs of entries that share a cell (a pair sharing
    several counted in each)."""
    cap = pairs.shape[0]
    formed = 0
    thin = 0
    key = sorted_keys[here]
    packed = sorted_entries[here]
    o = packed // CELLS
    home = packed - o * CELLS
    low_x = box[o, 0]
    low_y = box[o, 1]
    low_z = box[o, 2]
    low_r = box[o, 3]
    top_x = box[o, 4]
    top_y = box[o, 5]
    top_z = box[o, 6]
    top_r = box[o, 7]
    for there in range(here + 1, end):
        # another cell in the same slot
        if sorted_keys[there] != key:
            continue
        formed += 1
        other = sorted_entries[there]
        q = other // CELLS
        # not both boxes' home cell: the pair is tested in another cell, or its boxes do
        # not overlap
        if (home | (other - q * CELLS)) != CELLS - 1:
            continue
        if (box[q, 3] > top_r or low_r > box[q, 7] or box[q, 0] > top_x
                or low_x > box[q, 4] or box[q, 1] > top_y or low_y > box[q, 5]
                or box[q, 2] > top_z or low_z > box[q, 6]):
            continue
        thin += 1
        if _chord_close(samples, a, b, o, q, threshold + margin[o] + margin[q]):
            if found < cap:
                pairs[found, 0] = min(o, q)
                pairs[found, 1] = max(o, q)
            found += 1
    return found, formed, thin


@hjit
def _grid_window(window, samples, conf, pairs, counts, margin, box, sorted_keys,
                 sorted_entries, starts):
    """Both halves in one object, one window (the host targets' form, `broad_phase`):
    `_sort_window`, then `_pairs` of all its entries while the window's rows are in cache.
    ``counts`` as for `_scan_entry`, of the whole window; the rest: working rows."""
    _sort_window(window, samples, conf, margin, box, sorted_keys, sorted_entries, starts)
    a = window[0]
    found = 0
    formed = 0
    thin = 0
    # slot by slot: a slot of fewer than two entries holds no pair
    for h in range(starts.shape[0] - 1):
        end = starts[h + 1]
        for here in range(starts[h], end - 1):
            found, more, through = _pairs(here, end, a, a + 1, conf[2], samples, margin, box,
                                          sorted_keys, sorted_entries, pairs, found)
            formed += more
            thin += through
    counts[0] = found
    counts[1] = formed
    counts[2] = thin


@hjit
def _window_object(item, samples, conf, margin, box, side, side_r):
    """`_sort_window`'s first pass for one (window, object), ``item[0] = w * N + o``:
    its margin and box (`_object_box`, rows of this item), and its box's sides."""
    n = samples.shape[0]
    w = item[0] // n
    s, s_r = _object_box(samples, item[0] - w * n, w, w + 1, conf[1], conf[0], conf[2],
                         margin, box, 0)
    side[0] = s
    side_r[0] = s_r


@hjit
def _window_count(item, box, widest, widest_r, count):
    """How many cells object ``o`` of window ``w`` is entered in (``item[0] = w * N +
    o``), with the cells of its window's widest box."""
    n = box.shape[1]
    w = item[0] // n
    count[0] = _count(_cells(box[w], item[0] - w * n, _inverse_width(widest[w]),
                             _inverse_width(widest_r[w])))


@hjit
def _window_entry(item, box, widest, widest_r, offsets, conf, keys, buckets, entries):
    """Entry ``p`` of window ``w`` (``item[0] = w * C + p``, ``C = conf[3]`` entries a
    row): its cell's key, hash slot and packed entry (`_entry`, the cells of the object
    whose entries ``offsets[w]`` (`row_offsets` of the counts) puts there; cells in
    `_sort_window`'s order). Past the window's entries (rows are as long as the longest
    window's): key -1 in the hash table's last slot, ``conf[2]``."""
    n = box.shape[1]
    size = int(conf[2])
    row = int(conf[3])
    # (int64 on every target: the cell arithmetic below overflows int32)
    w = int(item[0]) // row
    p = int(item[0]) - w * row
    if p >= offsets[w, n]:
        keys[0] = -1
        buckets[0] = size
        entries[0] = 0
        return
    # the object whose entries hold p: offsets[w, low] <= p < offsets[w, high]
    low = 0
    high = n
    while high - low > 1:
        middle = (low + high) // 2
        if offsets[w, middle] <= p:
            low = middle
        else:
            high = middle
    cells = _cells(box[w], low, _inverse_width(widest[w]), _inverse_width(widest_r[w]))
    # the rank-th of its cells, in `_sort_window`'s order (radius fastest)
    rank = p - int(offsets[w, low])
    spans = (cells[4] + 1, cells[5] + 1, cells[6] + 1, cells[7] + 1)
    br = rank % spans[3]
    rank //= spans[3]
    bz = rank % spans[2]
    rank //= spans[2]
    by = rank % spans[1]
    key, h, home = _entry(cells, rank // spans[1], by, bz, br, size)
    keys[0] = key
    buckets[0] = h
    entries[0] = low * CELLS + home


@hjit
def _window_slot(item, order, keys, entries, sorted_keys, sorted_entries):
    """`_sort_window`'s rows of sorted entry ``s`` of window ``w`` (``item[0] = w * C +
    s``): the key and packed entry that `bucket_sort` put there."""
    row = order.shape[1]
    w = item[0] // row
    e = order[w, item[0] - w * row]
    sorted_keys[0] = keys[w, e]
    sorted_entries[0] = entries[w, e]


@hjit
def _scan_entry(item, samples, conf, margin, box, sorted_keys, sorted_entries, starts, pairs,
                counts):
    """The second kernel's object: `_pairs` of sorted entry ``here`` of window ``w``,
    ``item[0] = w * C + here`` (the per-window arrays of `_sorted_windows`, ``(W, ...)``,
    whole). ``counts = (candidates, grid pairs, pairs whose boxes overlap)``."""
    row = sorted_keys.shape[1]
    w = item[0] // row
    here = item[0] - w * row
    key = sorted_keys[w, here]
    found = 0
    formed = 0
    thin = 0
    if key >= 0:  # (not the filling of a row)
        end = starts[w, _key_bucket(key, int(conf[3])) + 1]
        found, formed, thin = _pairs(here, end, w, w + 1, conf[2], samples, margin[w], box[w],
                                     sorted_keys[w], sorted_entries[w], pairs, 0)
    counts[0] = found
    counts[1] = formed
    counts[2] = thin


#: The per-window arrays: name, dtype, the dimensions of a window's row (``n`` objects,
#: ``e`` entries, ``h1`` hash slots + 1).
_WINDOW_ARRAYS = (("margin", np.float64, ("n",)), ("box", np.float64, ("n", "eight")),
                  ("sorted_keys", np.int64, ("e",)), ("sorted_entries", np.int32, ("e",)),
                  ("starts", np.int32, ("h1",)))
_SAMPLES = [Arg("samples", np.float64, ("n", "m", "six"), per_object=False),
            Arg("conf", np.float64, ("c",), per_object=False)]

#: the per-window half where the target has memory of its own, as kernels of one
#: object per (window, object) or (window, entry) and the target's `row_max`,
#: `row_offsets` and `bucket_sort`
_ITEM = Arg("item", np.int32, ("one",))
_OBJECT = ObjectKernel(_window_object, [
    _ITEM, *_SAMPLES, Arg("margin", np.float64, ("one",), output=True),
    Arg("box", np.float64, ("one", "eight"), output=True),
    Arg("side", np.float64, ("one",), output=True),
    Arg("side_r", np.float64, ("one",), output=True)])
_COUNT = ObjectKernel(_window_count, [
    _ITEM, Arg("box", np.float64, ("w", "n", "eight"), per_object=False),
    Arg("widest", np.float64, ("w",), per_object=False),
    Arg("widest_r", np.float64, ("w",), per_object=False),
    Arg("count", np.int32, ("one",), output=True)])
_ENTRY = ObjectKernel(_window_entry, [
    _ITEM, Arg("box", np.float64, ("w", "n", "eight"), per_object=False),
    Arg("widest", np.float64, ("w",), per_object=False),
    Arg("widest_r", np.float64, ("w",), per_object=False),
    Arg("offsets", np.int32, ("w", "n1"), per_object=False),
    Arg("conf", np.float64, ("c",), per_object=False),
    Arg("keys", np.int64, ("one",), output=True),
    Arg("buckets", np.int32, ("one",), output=True),
    Arg("entries", np.int32, ("one",), output=True)])
_SLOT = ObjectKernel(_window_slot, [
    _ITEM, Arg("order", np.int32, ("w", "e"), per_object=False),
    Arg("keys", np.int64, ("w", "e"), per_object=False),
    Arg("entries", np.int32, ("w", "e"), per_object=False),
    Arg("sorted_keys", np.int64, ("one",), output=True),
    Arg("sorted_entries", np.int32, ("one",), output=True)])

#: the second kernel: one object per (window, entry), the per-window arrays whole
_SCAN = ObjectKernel(_scan_entry, [
    Arg("item", np.int32, ("one",)), *_SAMPLES,
    *(Arg(name, dtype, ("w", *core), per_object=False) for name, dtype, core in _WINDOW_ARRAYS),
    Arg("pairs", np.int32, ("cap", "two"), output=True),
    Arg("counts", np.int32, ("three",), output=True)])

#: both in one kernel, one object per window (the host targets)
_GRID = ObjectKernel(_grid_window, [
    Arg("window", np.int64, ("one",)), *_SAMPLES,
    Arg("pairs", np.int32, ("cap", "two"), output=True),
    Arg("counts", np.int64, ("three",), output=True),
    *(Arg(name, dtype, core, scratch=True) for name, dtype, core in _WINDOW_ARRAYS)])

for _kernel in (_OBJECT, _COUNT, _ENTRY, _SLOT, _SCAN, _GRID):  # (the notice of a long compile)
    _kernel.description = "the screen's broad phase"
_TAKE.description = "the screen's gather of sampled states"
del _kernel

#: Items (window, entry) of one `broad_phase` call at most: their index is an int32.
MAX_ITEMS = 2 ** 31 - 1
#: Candidates per entry (`_SCAN`) and per window (`_GRID`) that the first run of a
#: kernel keeps room for; rows with more run again with room for all of theirs.
SLOT_CAP = 1
WINDOW_CAP = 16
#: Windows per call of the host targets' kernel and thread (`broad_phase`): each holds a
#: window's working rows, room for 16 entries an object (about 280 bytes an object, of
#: which a window touches about 130), so that a chunk's windows reuse a few rows rather
#: than each having its own.
HOST_BATCH = 8


def window_cap(n):
    """Candidates per window that the host targets' kernel keeps room for at first
    (`WINDOW_CAP`, or ``n // 16`` for a larger cloud): the candidates of a window grow
    with the square of the objects (about 80 at 20,000 objects, a 5 km threshold and
    dt = 35 s), and a window that overflows its row runs again whole."""
    return max(WINDOW_CAP, n // 16)


def two_kernels():
    """Whether the broad phase runs as two kernels (`broad_phase`): where the target has
    memory of its own (cuda)."""
    return active.device_memory() is not None


def table_size(n):
    """Hash slots of a window of ``n`` objects: a power of two >= 4 N (short slots for a
    few entries an object)."""
    return 1 << max(1, (4 * n - 1).bit_length())


def _candidates(run, cap):
    """``(i, j, row)`` of every candidate, ``row`` the kernel row (window or item) that
    found it, from ``run(rows, cap) -> (pairs, counts)`` (``rows``: None, all of them,
    or those to run again; its arrays where the kernel wrote them, compacted there by
    `compact_rows`); the rows whose candidates overflowed ``cap`` run again with room
    for all of theirs. Also the sums of the first run's counts (int64)."""
    entries, overflow, sums = active.compact_rows(*run(None, cap))
    if len(overflow):
        over = overflow[:, 0]
        more, _, _ = active.compact_rows(*run(over, int(overflow[:, 1].max())))
        more[:, 2] = over[more[:, 2]]  # the row of the first run
        entries = np.concatenate((entries, more))
    return entries[:, 0], entries[:, 1], entries[:, 2], sums


class Items:
    """The ``(K, 1)`` int32 column ``0, 1, ...`` in the target's memory that the
    per-(window, object) and per-(window, entry) kernels take as their objects, made
    longer when a call needs more (`screen` keeps one for all its chunks)."""

    def __init__(self):
        self.column = None

    def __call__(self, count):
        if self.column is None or self.column.shape[0] < count:
            # (a quarter more: the next chunk's entries may be a few more)
            longer = min(MAX_ITEMS, count + count // 4)
            self.column = active.item_column(longer)
        return self.column[:count]


def _sorted_windows(samples, conf, items, windows, n, size):
    """`_sort_window`'s outputs for every window, ``[margin, box, sorted_keys,
    sorted_entries, starts]`` (`_WINDOW_ARRAYS`, ``(W, ...)``), in the target's memory,
    made by one GPU thread per (window, object) or (window, entry) rather than one per
    window: `_OBJECT` (margins, boxes and their sides), the target's ``row_max`` (each
    window's widest box: its cells), `_COUNT` (each object's cells), the target's
    ``row_offsets`` (where each object's entries start in its window's row, rows as long
    as the longest window's), `_ENTRY` (each entry's key, hash slot and packed entry;
    the rest of a row key -1 in an extra last slot), the target's ``bucket_sort`` (the
    counting sort by hash slot, and where each slot starts) and `_SLOT` (keys and
    entries in slot order). The same numbers as `_sort_window`'s but for the order of
    the entries within a hash slot (the target's), which no candidate or count depends
    on, and the filling of each row past its window's entries. ``items``: an `Items`.
    One thread per window would run each window's O(N) passes one after another, which
    is slower."""
    empty = active.device_empty
    objects = windows * n
    margin, box = empty((objects, 1), np.float64), empty((objects, 1, 8), np.float64)
    side, side_r = empty((objects, 1), np.float64), empty((objects, 1), np.float64)
    _OBJECT(items(objects), samples, conf, margin, box, side, side_r)
    box = box.reshape(windows, n, 8)
    widest = active.row_max(side.reshape(windows, n))
    widest_r = active.row_max(side_r.reshape(windows, n))
    count = empty((objects, 1), np.int32)
    _COUNT(items(objects), box, widest, widest_r, count)
    offsets, row = active.row_offsets(count.reshape(windows, n))
    if windows * row > MAX_ITEMS:
        raise ValueError(f"broad_phase: {windows} windows of {row} entries are more than "
                         f"{MAX_ITEMS} (window, entry) items; screen fewer windows at once")
    # (the table's size and the rows' length, for `_ENTRY`)
    entry_conf = np.array([conf[0], conf[1], size, row], dtype=np.float64)
    keys, buckets = empty((windows * row, 1), np.int64), empty((windows * row, 1), np.int32)
    entries = empty((windows * row, 1), np.int32)
    _ENTRY(items(windows * row), box, widest, widest_r, offsets, entry_conf, keys, buckets,
           entries)
    order, starts = active.bucket_sort(buckets.reshape(windows, row), size + 1)
    sorted_keys = empty((windows * row, 1), np.int64)
    sorted_entries = empty((windows * row, 1), np.int32)
    _SLOT(items(windows * row), order, keys.reshape(windows, row),
          entries.reshape(windows, row), sorted_keys, sorted_entries)
    return [margin.reshape(windows, n), box, sorted_keys.reshape(windows, row),
            sorted_entries.reshape(windows, row), starts]


def broad_phase(samples, dt, k, threshold, cap=None, per_slot=None, items=None, work=None):
    """Candidate (object i, object j, window w) of one chunk of samples.

    ``samples``: ``(N, W + 1, 6)`` states (positions, velocities) ``dt`` apart, as
    `sample_states` gives them (read in place: each window's two samples of an object
    are 96 consecutive bytes; no transposed copy, which took 1.8 s per 2e7
    object-windows on the GPU's host). Returns ``i``, ``j``,
    ``w`` (``i < j``), each (pair, window) once, sorted by ``(w, i, j)``, the number
    of grid pairs (pairs of entries that share a cell) and the number of pairs whose
    boxes overlap (and were chord-tested).

    No approach is lost: two arcs that come within the threshold have 4-D boxes
    (`_object_box`: bounds on each arc's x, y, z and radius over the window, tops moved
    out by the threshold) that overlap, so both objects are entered in the cell of
    the overlap's lower corner, where the pair is tested; and every pair the chord
    test keeps passes the box test (the chord test implies it, rounding covered by
    `_BOX_PAD`): the candidates are exactly the pairs that the chord test keeps.

    ``per_slot`` (default `two_kernels`: where the target has memory of its own): the
    per-window arrays made per (window, object) and (window, entry) (`_sorted_windows`),
    then `_scan_entry` per (window, entry), all left in the target's memory
    (``samples`` moved there once); otherwise (the host targets) one kernel per
    window, `_grid_window`, which runs the same two halves while the window's arrays
    are in the core's cache, `HOST_BATCH` windows a call and thread. Same candidates,
    same counts. ``cap``: candidates per kernel row that the first run keeps room for
    (`SLOT_CAP`, `WINDOW_CAP`); rows with more run again with room for all of theirs.
    The rows stay where the kernel wrote them and are compacted there
    (``active.compact_rows``: on cuda only the candidates cross to the host, not an
    entry's 20 bytes of row and counts). ``items``: an `Items`, for ``per_slot`` (made
    here without it: `screen` keeps one for all its chunks). ``work``: a dict the host
    targets' working rows are kept in from call to call (`screen` keeps one for all its
    chunks, so that their pages are faulted in once); without it they are made here.
    """
    if not in_target_memory(samples):
        samples = np.ascontiguousarray(samples, dtype=np.float64)
    if len(samples.shape) != 3 or samples.shape[2] != 6:
        raise ValueError(f"samples: expected (N, W + 1, 6) states, got {samples.shape}")
    n, m = samples.shape[:2]
    windows = m - 1
    count = windows * n
    per_slot = two_kernels() if per_slot is None else per_slot
    cap = (SLOT_CAP if per_slot else window_cap(n)) if cap is None else cap
    if count > MAX_ITEMS:
        raise ValueError(f"broad_phase: {windows} windows of {n} objects are more than "
                         f"{MAX_ITEMS} (window, object) items; screen fewer windows at once")
    size = table_size(n)
    conf = np.array([dt, k, threshold, size], dtype=np.float64)
    empty = active.device_empty
    if per_slot:
        samples_d = active.to_device(samples)
        items = Items() if items is None else items
        window_arrays = _sorted_windows(samples_d, conf, items, windows, n, size)
        row = window_arrays[2].shape[1]

        def run(rows, cap):
            which = (items(windows * row) if rows is None
                     else active.to_device(rows.astype(np.int32).reshape(-1, 1)))
            # in the target's memory, compacted there (`_candidates`)
            pairs = empty((which.shape[0], cap, 2), np.int32)
            counts = empty((which.shape[0], 3), np.int32)
            _SCAN(which, samples_d, conf, *window_arrays, pairs, counts)
            return pairs, counts
    else:
        row = n
        sizes = {"n": n, "eight": 8, "e": CELLS * n, "h1": size + 1}
        batch = min(HOST_BATCH * numba.get_num_threads(), windows)
        work = _working_rows(work, batch, sizes)
        every = np.arange(windows, dtype=np.int64).reshape(-1, 1)

        def run(rows, cap):
            which = every if rows is None else rows.astype(np.int64).reshape(-1, 1)
            pairs = empty((which.shape[0], cap, 2), np.int32)
            counts = empty((which.shape[0], 3), np.int64)
            for first in range(0, which.shape[0], batch):
                last = min(first + batch, which.shape[0])
                _GRID(which[first:last], samples, conf, pairs[first:last], counts[first:last],
                      *(a[:last - first] for a in work))
            return pairs, counts

    i, j, item, sums = _candidates(run, cap)
    w = item // row if per_slot else item
    # each (window, pair) once, in (w, i, j) order (np.unique's answer without its hash
    # pass, which costs more than this sort and comparison)
    keys = np.sort((w * n + i) * n + j)
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys
    w, rest = np.divmod(keys, n * n)
    i, j = np.divmod(rest, n)
    return i, j, w, int(sums[1]), int(sums[2])


def _working_rows(kept, batch, sizes):
    """`_grid_window`'s working rows (`_WINDOW_ARRAYS`) for ``batch`` windows of the
    ``sizes`` of `broad_phase`: those in ``kept`` (a dict) where they have room (the
    kernel takes their first rows), else new ones, put there."""
    key = tuple(sorted(sizes.items()))
    if kept is not None and key in kept and kept[key][0].shape[0] >= batch:
        return kept[key]
    rows = [active.device_empty((batch, *(sizes[d] for d in core)), dtype)
            for _, dtype, core in _WINDOW_ARRAYS]
    if kept is not None:
        kept.clear()  # another cloud's rows: not needed again
        kept[key] = rows
    return rows


#: how far past its end (a fraction of its length) each window's refinement runs
OVERLAP = 0.05


def refine(k, f, rows, r_i, v_i, r_j, v_j, i, j, t_a, t_b, threshold, rtol, atol,
           t_end=None, t_start=None):
    """The narrow phase: each (pair, window) integrated as one 12-component ODE from
    ``t_a`` to ``t_b`` (s from the epoch), the minima of distance found as events.

    Returns the arrays ``i, j, tca, miss, speed`` of the minima below ``threshold``
    inside ``(t_start, t_end]`` (default: the first window's start, the last one's
    end). Not minima, so never returned: an event at ``t_start`` (the distance rises
    from the span's start: the range rate is 0 there and grows), and one where the two
    states are the same, bit for bit (the range rate is 0 throughout: two copies of
    one object, `identical_objects`).
    """
    empty = np.empty(0)
    if len(i) == 0:
        return empty.astype(np.int64), empty.astype(np.int64), empty, empty, empty
    y0 = np.concatenate((r_i, v_i, r_j, v_j), axis=1)
    width = rows.shape[1]
    p = np.concatenate((np.full((len(i), 1), float(k)), rows[i], rows[j]), axis=1)
    # A minimum at a sample time sits on the border of two windows, and each window
    # starts from its own sample: rounding can put g's sign change in neither (a GPU's
    # fused multiply-adds round otherwise, and can lose an approach at a sample time).
    # Each window runs on past its end by OVERLAP of its
    # length, where g has grown by about |v_rel|^2 per s: such a minimum is found at
    # least once (twice: `_dedupe`). Minima past ``t_end`` (default: the last window's
    # end) are not the screen's.
    t_a, t_b = np.asarray(t_a, dtype=float), np.asarray(t_b, dtype=float)
    if t_end is None:
        t_end = float(t_b.max())
    if t_start is None:
        t_start = float(t_a.min())
    res = solve_ivp(pair_rhs(f, width), (t_a, t_b + OVERLAP * (t_b - t_a)), y0, rtol=rtol,
                    atol=atol, params=p, events=[CLOSEST_APPROACH], max_event_records=RECORDS)
    # (pairs, RECORDS) times, NaN past each pair's minima, and (pairs, RECORDS, 12) states:
    # the distances of the minima found only (norms of every record, NaN ones too, cost
    # a pass over all the records)
    pair, record = np.nonzero(np.isfinite(res.t_events[0]))
    tca = res.t_events[0][pair, record]
    at = res.y_events[0][pair, record]
    rel, rel_v = at[:, 0:3] - at[:, 6:9], at[:, 3:6] - at[:, 9:12]
    # np.linalg.norm's own arithmetic: the square root of the reduced squares
    miss = np.sqrt(np.add.reduce(rel * rel, axis=1))
    apart = np.any(at[:, 0:6] != at[:, 6:12], axis=1)
    keep = (miss < threshold) & (tca <= t_end) & (tca > t_start) & apart
    rel_v = rel_v[keep]
    speed = np.sqrt(np.add.reduce(rel_v * rel_v, axis=1))
    return i[pair[keep]], j[pair[keep]], tca[keep], miss[keep], speed


def _dedupe(i, j, tca, miss, speed, tolerance=1e-3):
    """One row per approach: a minimum at a sample time can be found in both windows
    that share the sample (within ``tolerance`` s); the smaller miss is kept."""
    if len(i) < 2:
        return i, j, tca, miss, speed
    order = np.lexsort((tca, j, i))
    i, j, tca, miss, speed = i[order], j[order], tca[order], miss[order], speed[order]
    same = (i[1:] == i[:-1]) & (j[1:] == j[:-1]) & (np.diff(tca) < tolerance)
    drop = np.zeros(len(i), dtype=bool)
    # of two rows of one approach drop the one with the larger miss
    later_worse = same & (miss[1:] >= miss[:-1])
    drop[1:][later_worse] = True
    drop[:-1][same & ~later_worse] = True
    keep = ~drop
    return i[keep], j[keep], tca[keep], miss[keep], speed[keep]


class IdenticalObjectsWarning(UserWarning):
    """`screen` was given objects that it cannot tell apart (the same state within the
    solver's tolerances: one catalog entry given twice); each group is screened once."""


def identical_objects(r0, v0, rtol, atol):
    """Each object's first row among the objects whose states it cannot be told from.

    Two objects are identical when every one of their six components (km, km/s) differs
    by at most ``atol + rtol * max(|a|, |b|)``: the error the solver is allowed per step
    (scipy's error scale), so within the accuracy asked for they are one object. Groups
    are the connected sets of identical pairs (a chain of pairs is one group).

    Returns ``(N,)`` int64: for each object the smallest row of its group (itself when
    it has no twin).
    """
    y = np.concatenate((r0, v0), axis=1)
    n = len(y)
    rtol = checks.tolerance(rtol, "rtol", 6)
    atol = checks.tolerance(atol, "atol", 6)
    # sorted along one projection, twins are within the projected tolerance of each
    # other; the gap between sorted neighbours only grows with their distance in the
    # order, so the offsets stop at the first one where no gap is that small
    weights = np.array([1.0, math.sqrt(2.0), math.sqrt(3.0), 1e3, 1e3 * math.sqrt(5.0),
                        1e3 * math.sqrt(7.0)])
    projection = y @ weights
    largest = np.abs(y).max(axis=0)
    # (and the projections' own rounding: a few units in the last place of their terms)
    reach = float(weights @ (atol + (rtol + 8 * checks.EPS) * largest))
    order = np.argsort(projection, kind="stable")
    sorted_projection = projection[order]
    a_rows, b_rows = [], []
    for offset in range(1, n):
        near = np.flatnonzero(sorted_projection[offset:] - sorted_projection[:-offset]
                              <= reach)
        if len(near) == 0:
            break
        a, b = order[near], order[near + offset]
        scale = atol + rtol * np.maximum(np.abs(y[a]), np.abs(y[b]))
        same = np.all(np.abs(y[a] - y[b]) <= scale, axis=1)
        a_rows.append(a[same])
        b_rows.append(b[same])
    first = np.arange(n, dtype=np.int64)
    if not a_rows or not sum(len(a) for a in a_rows):
        return first
    a, b = np.concatenate(a_rows), np.concatenate(b_rows)
    while True:  # the smallest row of each group spread along its pairs
        low = np.minimum(first[a], first[b])
        before = first.copy()
        np.minimum.at(first, a, low)
        np.minimum.at(first, b, low)
        first = first[first]
        if np.array_equal(first, before):
            return first


def _identical_message(first, shown=5):
    """The warning naming the rows that repeat an earlier row."""
    repeats = np.flatnonzero(first != np.arange(len(first)))
    groups = {}
    for row in repeats:
        groups.setdefault(int(first[row]), []).append(int(row))
    listed = "; ".join(f"{'rows' if len(rows) > 1 else 'row'} "
                       f"{', '.join(map(str, rows))} = row {kept}"
                       for kept, rows in list(groups.items())[:shown])
    more = f"; and {len(groups) - shown} more groups" if len(groups) > shown else ""
    return (f"r0, v0: {len(repeats)} object(s) repeat an earlier object's state (within "
            f"the tolerances rtol, atol: one entry given twice?): {listed}{more}; each "
            f"group is screened once, as its first row, and its approaches are reported "
            f"under that row only")


def default_dt(k, r, v, threshold):
    """Sampling interval (s): the chord margin at the largest acceleration of the cloud
    is kept below half the threshold (so the chord test stays sharp), within 2-60 s,
    and an arc stays above RADIUS_FRACTION of its sampled radius."""
    radius = np.linalg.norm(r, axis=1)
    a_max = (1.0 + PERTURBATION_FRACTION) * k / (RADIUS_FRACTION * radius.min()) ** 2
    dt = math.sqrt(8.0 * 0.5 * threshold / a_max)
    speed = float(np.linalg.norm(v, axis=1).max())
    dt = min(dt, 2.0 * (1.0 - RADIUS_FRACTION) * float(radius.min()) / speed)
    return float(min(max(dt, 2.0), 60.0))


#: Object-windows per chunk by default on the host targets, and at most on a target with
#: memory of its own (cuda): there each chunk's first kernel runs its windows' O(N) passes
#: one thread per window, so larger chunks run fewer of those passes one after another
#: (its time per launch hardly grows with the windows).
CHUNK_HOST = 2_000_000
CHUNK_DEVICE = 40_000_000
#: Candidates refined at once (`screen`): several chunks' together, so that the solver
#: runs once for many rather than once per chunk, which is slower; at most this many
#: (the events' states, 0.4 kB a candidate, bound the host memory to about 1 GB).
REFINE_BATCH = 2_500_000

#: Bytes of the target's own memory per object-window of a chunk, two kernels
#: (`broad_phase`), at 6 entries an object (fewer in the benchmark's population,
#: docs/screening.md; 16 at most, objects all of the same motion): the states 48 (moved once
#: for all), per object 96 (margin, box, its sides, its count of cells and offset), the
#: hash table's starts 16 to 32 (4 bytes a slot, 4 to 8 slots an object), per entry 56
#: (keys, hash slots, packed entries, the sort's order, the sorted keys and entries,
#: items 4, the second kernel's rows 20: a candidate's 8 at `SLOT_CAP`, counts 12,
#: compacted there, `_candidates`).
DEVICE_BYTES = 512


def default_chunk(n):
    """Windows per chunk for ``n`` objects: `CHUNK_HOST` object-windows on the host
    targets; on a target with memory of its own `CHUNK_DEVICE`, or what fits in a
    quarter of its free memory (`DEVICE_BYTES` each)."""
    memory = active.device_memory()
    if memory is None:
        per_chunk = CHUNK_HOST
    else:
        per_chunk = min(CHUNK_DEVICE, memory[0] / (4 * DEVICE_BYTES))
    return max(1, int(per_chunk // n))


def screen(k, r0, v0, t_span, threshold, *, f=None, params=None, rtol=1e-11, atol=1e-12,
           dt=None, chunk=None, stats=None):
    """Every pair of objects that comes within ``threshold`` in ``t_span``.

    Parameters
    ----------
    k : float or Quantity
        GM of the attractor, km^3/s^2.
    r0, v0 : array_like or Quantity, (N, 3)
        Positions (km) and velocities (km/s) at ``t_span[0]``.
    t_span : (t0, tf)
        Times (s, or Quantities), ``tf > t0``; the states are given at ``t0``, and
        ``f`` sees ``t`` counted from ``t0`` (as in `cowell`).
    threshold : float or Quantity
        Distance (km) below which an approach is reported.
    f : hjit function, optional
        ``f(t, rr, vv, k, p)`` as for `cowell`; default `two_body_j2` (two-body
        plus the Earth's J2).
    params : array_like, (P,) or (N, P), optional
        Handed to ``f`` as each object's row ``p``.
    rtol, atol : float
        Tolerances of both the propagation and the refinement (DOP853).
    dt : float, optional
        Sampling interval of the broad phase (s); default `default_dt`. Every
        approach is found whatever dt is (the bounds are rigorous under the
        assumptions of `_chord_margin`); dt trades grid work for refinements.
    chunk : int, optional
        Windows screened at once (at least 1): bounds memory, about 100 bytes of host
        memory per object and window on the host targets (samples 48, the candidates'
        rows of the broad phase, beside the solver's own; its working rows are
        `HOST_BATCH` windows' a thread, about 300 bytes an object each) and on cuda
        512 bytes of GPU memory (`DEVICE_BYTES`). Default (`default_chunk`): 2e6
        object-windows on the host targets; 4e7 on cuda, or fewer if a quarter of the
        GPU's free memory holds less. The candidates of several chunks, up to
        `REFINE_BATCH`, are refined in one solver call.
    stats : dict, optional
        Filled with the time per phase (s), the number of windows, grid pairs (pairs
        of entries that share a cell), pairs chord-tested (whose boxes overlap) and
        candidates (the benchmark reads it),
        and ``identical``: ``(M, 2)`` rows ``(row, first row)`` of the objects screened
        as an earlier one (below).

    Returns
    -------
    ConjunctionTable
        Columns ``i``, ``j``, ``tca`` (s, on the axis of ``t_span``), ``miss`` (km),
        ``speed`` (km/s), sorted by ``tca``.

    Warns
    -----
    IdenticalObjectsWarning
        Some objects repeat an earlier object's state (`identical_objects`: every
        component within ``atol + rtol * |y|``, what the solver cannot tell apart; one
        catalog entry given twice, as merged catalogs often hold). The warning names
        them (``row 12 = row 0``). Each group is screened once, as its first row: the
        table holds the approaches the catalog without the copies has, under the first
        row's index, bit for bit, and no row for the copies (two copies of one object
        are never an approach: their distance is 0 throughout). With all the objects
        one, the table is empty.

    Raises
    ------
    ValueError
        Bad arguments, named; and identical objects with different ``params`` rows.

    Notes
    -----
    An approach is a minimum of the distance inside the span: none is reported at
    ``t0`` itself (a distance rising from ``t0``: two objects with the same velocity
    there), nor one where the two states coincide bit for bit.
    """
    import time

    clock = time.perf_counter
    stats = {} if stats is None else stats
    k = float(check_gm(k))
    r0, v0, single = check_states(r0, v0)
    if single or r0.shape[0] < 2:
        raise ValueError(f"r0, v0: screening needs (N, 3) states of at least two objects, "
                         f"got {r0.shape[0]}")
    try:
        t0, tf = t_span
    except (TypeError, ValueError):
        raise ValueError(f"t_span: expected (t0, tf), got {t_span!r}") from None
    t0 = float(to_value(t0, u.s, "t_span"))
    tf = float(to_value(tf, u.s, "t_span"))
    if not (math.isfinite(t0) and math.isfinite(tf) and tf > t0):
        raise ValueError(f"t_span: expected finite t0 < tf, got ({t0}, {tf})")
    threshold = float(to_value(threshold, u.km, "threshold"))
    if not (math.isfinite(threshold) and threshold > 0):
        raise ValueError(f"threshold: expected a positive distance in km, got {threshold}")
    if not (np.all(np.isfinite(r0)) and np.all(np.isfinite(v0))):
        raise ValueError("r0, v0: expected finite states (NaN rows: drop the objects SGP4 "
                         "could not place)")
    f = two_body_j2 if f is None else f
    rows = _rows(params, r0.shape[0])
    kept = _distinct(r0, v0, rows, rtol, atol, stats)
    r0, v0, rows = r0[kept], v0[kept], rows[kept]
    n = len(kept)
    if n >= 2:
        prepare(f, rows.shape[1], n)
    if dt is None:
        dt = default_dt(k, r0, v0, threshold)
    dt = float(dt)
    if not (math.isfinite(dt) and dt > 0):
        raise ValueError(f"dt: expected a positive sampling interval in s, got {dt}")
    span = tf - t0
    windows = max(1, math.ceil(span / dt - 1e-9))
    times = np.linspace(0.0, span, windows + 1)
    dt = span / windows
    chunk = default_chunk(n) if chunk is None else checks.integer(chunk, "chunk", 1)
    chunk = max(1, min(chunk, MAX_ITEMS // n))
    if n < 2:  # the objects are all one
        stats.update(propagate_s=0.0, broad_s=0.0, broad_cpu_s=0.0, narrow_s=0.0,
                     windows=0, grid_pairs=0, chord_tests=0, candidates=0, dt=dt)
        empty = np.empty(0)
        return ConjunctionTable(empty, empty, empty, empty, empty)
    out = [], [], [], [], []
    pending = [], [], [], [], [], []  # candidates of chunks not refined yet
    stats.update(propagate_s=0.0, broad_s=0.0, broad_cpu_s=0.0, narrow_s=0.0,
                 windows=windows, grid_pairs=0, chord_tests=0, candidates=0, dt=dt)
    r, v = r0, v0
    items = None
    # on the host every chunk's samples go to one buffer (fresh ones were faulted in
    # each chunk, mostly as system time); no chunk keeps a view of the last one's
    buffer = None if two_kernels() else np.empty(n * (min(chunk, windows) + 1) * 6)
    work = {}  # the broad phase's working rows on the host, likewise
    for start in range(0, windows, chunk):
        stop = min(windows, start + chunk)
        now = clock()
        local = times[start:stop + 1]
        # each chunk on from the last one's final sample, f's t on the screen's axis
        # on cuda the samples stay in the GPU's memory for the broad phase
        states = sample_states(k, r, v, local, f, rows, rtol, atol, on_device=two_kernels(),
                               buffer=buffer)
        last = take_states(states, np.arange(n), len(local) - 1)
        r, v = last[:, :3], last[:, 3:]
        stats["propagate_s"] += clock() - now
        now, used = clock(), time.process_time()
        if items is None and two_kernels():
            # the (window, object) and (window, entry) items of the broad phase's
            # kernels, in the target's memory once for all chunks
            items = Items()
        i, j, w, grid, chord = broad_phase(states, dt, k, threshold, items=items,
                                           work=work)
        stats["broad_s"] += clock() - now
        stats["broad_cpu_s"] += time.process_time() - used
        stats["grid_pairs"] += grid
        stats["chord_tests"] += chord
        stats["candidates"] += len(i)
        now = clock()
        # each candidate's two states at its window's start, refined with other chunks'
        for column, values in zip(pending, (take_states(states, i, w),
                                            take_states(states, j, w), i, j,
                                            local[w], local[w + 1])):
            column.append(values)
        if sum(len(c) for c in pending[2]) >= REFINE_BATCH or stop == windows:
            at_i, at_j, i, j, t_a, t_b = (np.concatenate(c) for c in pending)
            for column in pending:
                column.clear()
            found = refine(k, f, rows, at_i[:, :3], at_i[:, 3:], at_j[:, :3], at_j[:, 3:],
                           i, j, t_a, t_b, threshold, rtol, atol, t_end=span,
                           t_start=0.0)
            for column, values in zip(out, found):
                column.append(values)
        stats["narrow_s"] += clock() - now
    i, j, tca, miss, speed = _dedupe(*(np.concatenate(c) for c in out))
    return ConjunctionTable(kept[i], kept[j], tca + t0, miss, speed)


def kernels(f, width, n):
    """The kernels a `screen` of ``n`` objects under ``f`` (params rows ``width`` wide)
    runs, as `hapsira_core.ivp.prepare.Need`: the sampling solver (`sample_states`),
    the broad phase's (`broad_phase`) and the refining solver (`refine`)."""
    names = ("_OBJECT", "_COUNT", "_ENTRY", "_SLOT", "_SCAN", "_TAKE") if two_kernels() \
        else ("_GRID",)
    return ([compile_ahead.solver(orbit_rhs(f), 6, "DOP853", objects=n)]
            + [compile_ahead.named(__name__, name) for name in names]
            + [compile_ahead.solver(pair_rhs(f, width), 12, "DOP853", events=[CLOSEST_APPROACH],
                                    event_states=True, objects=n)])


def prepare(f, width, n):
    """Compile the kernels of a `screen` (`kernels`) that the disk cache lacks side by side
    (`hapsira_core.ivp.prepare`); where ``f`` cannot make them (an error of its own),
    nothing: the screen's first kernel raises that error, as without this step."""
    try:
        needs = kernels(f, width, n)
    except Exception:
        return 0
    return compile_ahead.prepare(needs)


def _distinct(r0, v0, rows, rtol, atol, stats):
    """The rows `screen` screens: one of each group of `identical_objects` (its first),
    with an `IdenticalObjectsWarning` naming the others; ``stats["identical"]`` gets
    their ``(row, first row)`` pairs. Copies with other params are refused."""
    n = len(r0)
    first = identical_objects(r0, v0, rtol, atol)
    repeats = np.flatnonzero(first != np.arange(n))
    stats["identical"] = np.column_stack((repeats, first[repeats]))
    if len(repeats) == 0:
        return np.arange(n)
    a, b = rows[first[repeats]], rows[repeats]
    differ = np.flatnonzero(np.any((a != b) & ~(np.isnan(a) & np.isnan(b)), axis=1))
    if len(differ):
        row = int(repeats[differ[0]])
        raise ValueError(f"params: rows {int(first[row])} and {row} have the same state "
                         f"(r0, v0 within the tolerances rtol, atol) but different params "
                         f"rows ({len(differ)} such row(s)); one object has one force "
                         f"model: drop the copies or give them the same params")
    warnings.warn(_identical_message(first), IdenticalObjectsWarning, stacklevel=3)
    return np.flatnonzero(first == np.arange(n))

