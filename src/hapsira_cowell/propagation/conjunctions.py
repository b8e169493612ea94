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
   Theorem 3.2), with ``max|r''|`` bounded as described at `_chord_margin`.
   Each box's centre goes in one cell of a uniform grid whose cells are as
   wide as the widest box plus the threshold, so that boxes closer than the
   threshold have centres in the same or adjacent cells; the cells are hashed
   into a table and the objects counting-sorted by slot (`_sort_window`, one
   "object" of a kernel per window), and each object looks at its own cell and
   the 13 neighbours after it (`_scan`). On cuda these are two kernels, the
   scan one GPU thread per (window, slot) (`_scan_slot`), the sorted arrays
   kept on the GPU between them; on the host targets one kernel runs both per
   window (`_grid_window`: a loop on cpu, a gufunc on parallel), while the
   window's arrays are in the core's cache (`broad_phase`). Pairs found so are
   kept only if the straight-line relative motion between the two samples comes within
   ``threshold + m_i + m_j`` (``m`` the chord margins), a test that never
   drops a true approach since ``|r_i - r_j| >= |L_i - L_j| - m_i - m_j``.
   Before the chord test, a radius test: each arc's distance from the centre
   lies in ``[d - m, max(|p_a|, |p_b|) + m]`` (``d`` the chord's distance from
   the centre), and since ``|r_i - r_j| >= ||r_i| - |r_j||`` two objects whose
   radius intervals are more than the threshold apart cannot meet in the window
   (`radius_candidates`). The chord test implies it (same chords, same margins: it
   removes no candidate), but the radius test is cheaper: it reads two numbers per object stored
   in the order the grid scans them, and drops most grid pairs (objects on
   different shells) before their positions are read.
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

import numpy as np
from astropy import units as u

from hapsira_core.fronts.numpy import states_at
from hapsira_core.ivp import STATUS_MESSAGES, Event, checks, solve_ivp
from hapsira_core.jit import Arg, ObjectKernel, factory, hjit
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


def sample_states(k, r0, v0, times, f, rows, rtol, atol, on_device=False):
    """States ``(N, M, 6)`` (km, km/s; C-ordered, as the solver writes them) of the cloud
    at ``times`` (s from the screen's t0), from ``r0``, ``v0`` at ``times[0]``, integrated
    as `cowell` does (DOP853 on ``orbit_rhs(f)``, GM first in the params row),
    continuously over ``times``. ``on_device``: left in the target's own memory (cuda:
    a device array, which `broad_phase` reads there and `take_states` gathers from):
    the 48 bytes per object and sample never cross to the host and back."""
    n = r0.shape[0]
    y0 = np.concatenate((r0, v0), axis=1)
    p = np.concatenate((np.full((n, 1), float(k)), rows), axis=1)
    states, status = states_at(orbit_rhs(f), (float(times[0]), float(times[-1])), y0,
                               times, rtol=rtol, atol=atol, params=p, on_device=on_device)
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
    ``p1`` (..., 3) and chord margin ``m``: ``|L(t)|`` is convex along the chord, so it
    is at most its larger end and at least the chord's distance from the centre, and
    ``|r(t)|`` is within ``m`` of ``|L(t)|``."""
    e = p1 - p0
    ee = np.einsum("...k,...k->...", e, e)
    s = np.clip(-np.einsum("...k,...k->...", p0, e) / np.where(ee > 0, ee, 1.0), 0.0, 1.0)
    low = np.linalg.norm(p0 + s[..., None] * e, axis=-1) - m
    high = np.maximum(np.linalg.norm(p0, axis=-1), np.linalg.norm(p1, axis=-1)) + m
    return low, high


def radius_candidates(p0i, p1i, p0j, p1j, mi, mj, threshold):
    """Where the radius intervals of `radius_bounds` come within ``threshold`` (the
    kernel's test, on the host)."""
    lo_i, hi_i = radius_bounds(p0i, p1i, mi)
    lo_j, hi_j = radius_bounds(p0j, p1j, mj)
    return np.maximum(lo_i - hi_j, lo_j - hi_i) <= threshold + _RADIUS_PAD * np.maximum(hi_i, hi_j)


#: Rounding of the radius bounds (a few ulps of the radius) is covered by this
#: fraction of the radius added to the threshold in the radius test.
_RADIUS_PAD = 1e-12


# --- the broad phase as two kernels: one per window, then one per (window, slot) ---
#
# A uniform grid per window, hashed (spatial hashing: Teschner et al., "Optimized Spatial
# Hashing for Collision Detection of Deformable Objects", VMV 2003, whose three primes
# are used below) and sorted by counting: every object goes in the one cell of its box's
# centre, cells at least as wide as the widest box plus the threshold, so that two boxes
# closer than the threshold have centres in the same or adjacent cells. Each object then
# looks at its own cell and the 13 neighbours "ahead" of it (half of the 26: a pair in
# two adjacent cells is seen from one side only), pairs pass the radius test (on copies
# in slot order: a slot's scan reads consecutive memory) and the chord test, and the
# survivors go to a bounded output row with a counter that keeps counting past the row's
# end (the caller runs such rows again with room for all: no pair is lost).
#
# Two halves, written once: `_sort_window` (margins, the cell size, keys and the counting
# sort of one window: O(N) passes) and `_scan` (the pair scan of a range of its slots).
# On a target with memory of its own (cuda) they are separate kernels: the per-window half
# as kernels per (window, object) and the target's `bucket_sort` (`_sorted_windows`: the
# same numbers), and `_SCAN` with one "object" per (window, slot) (`_scan_slot`), so that
# all of it runs on W * N GPU threads rather than W; the per-window
# arrays between them stay in the target's memory (`hapsira_core.targets.active.
# device_empty`: nothing of them crosses to the host), and so do the scan's rows, which
# the target compacts there (`compact_rows`, `_candidates`). On the host targets one
# kernel, `_GRID`, runs both halves per window (`_grid_window`): the two kernels there
# took 1.5 to 1.6 times its broad-phase CPU (2,000 objects, 624 windows, cpu target,
# 2-core box), the scan reading each window's arrays back from memory after all windows
# were sorted, and paying a kernel object's overhead per slot.

#: Bits per cell coordinate in a packed cell key (three in an int64); coordinates are
#: offset by half the range and clamped into it (clamping merges far cells: more pairs
#: tested, none lost).
_BITS = 21
_HALF = 1 << (_BITS - 1)
_MASK = (1 << _BITS) - 1
#: The cell width is the bound times this, so that rounding of the centres never puts
#: two boxes closer than the threshold two cells apart.
_CELL_SLACK = 1.0 + 1e-6


@hjit
def _arc_margin(k, dt, x0, y0, z0, x1, y1, z1, dvx, dvy, dvz):
    """`_chord_margin` of one object and window (the same bound, scalar form)."""
    r_low = RADIUS_FRACTION * min(math.sqrt(x0 * x0 + y0 * y0 + z0 * z0),
                                  math.sqrt(x1 * x1 + y1 * y1 + z1 * z1))
    a_max = max((1.0 + PERTURBATION_FRACTION) * k / (r_low * r_low),
                2.0 * math.sqrt(dvx * dvx + dvy * dvy + dvz * dvz) / dt)
    return dt * dt / 8.0 * a_max


@hjit
def _cell_coordinate(x, cell):
    c = int(math.floor(x / cell)) + _HALF  # noqa: RUF046 (an int64 on every target)
    return min(max(c, 0), _MASK)


@hjit
def _bucket(cx, cy, cz, size):
    """The hash table slot of a cell (``size`` a power of two)."""
    return ((cx * 73856093) ^ (cy * 19349663) ^ (cz * 83492791)) & (size - 1)


@hjit
def _radius_low(x0, y0, z0, x1, y1, z1):
    """The chord's distance from the centre (`radius_bounds` before the margin)."""
    ex = x1 - x0
    ey = y1 - y0
    ez = z1 - z0
    ee = ex * ex + ey * ey + ez * ez
    s = -(x0 * ex + y0 * ey + z0 * ez) / (ee if ee > 0 else 1.0)
    s = min(max(s, 0.0), 1.0)
    cx = x0 + s * ex
    cy = y0 + s * ey
    cz = z0 + s * ez
    return math.sqrt(cx * cx + cy * cy + cz * cz)


@hjit
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


@hjit
def _object_window(samples, o, a, b, k, dt):
    """What the broad phase needs of object ``o`` in the window of samples ``a``, ``b``:
    ``(margin, extent, low, high)``, its chord margin (`_arc_margin`), its box's widest
    side with the margins (the window's widest sets the cell) and its radius interval."""
    m = _arc_margin(k, dt, samples[o, a, 0], samples[o, a, 1], samples[o, a, 2],
                    samples[o, b, 0], samples[o, b, 1], samples[o, b, 2],
                    samples[o, b, 3] - samples[o, a, 3], samples[o, b, 4] - samples[o, a, 4],
                    samples[o, b, 5] - samples[o, a, 5])
    extent = 0.0
    for axis in range(3):
        extent = max(extent, abs(samples[o, b, axis] - samples[o, a, axis]) + 2.0 * m)
    low = _radius_low(samples[o, a, 0], samples[o, a, 1], samples[o, a, 2],
                      samples[o, b, 0], samples[o, b, 1], samples[o, b, 2]) - m
    high = max(
        math.sqrt(samples[o, a, 0] ** 2 + samples[o, a, 1] ** 2 + samples[o, a, 2] ** 2),
        math.sqrt(samples[o, b, 0] ** 2 + samples[o, b, 1] ** 2 + samples[o, b, 2] ** 2)) + m
    return m, extent, low, high


@hjit
def _cell_key(samples, o, a, b, cell, size):
    """Object ``o``'s cell in the window (its centre's, cells of side ``cell``):
    ``(packed key, hash slot of a table of size slots)``."""
    cx = _cell_coordinate(0.5 * (samples[o, a, 0] + samples[o, b, 0]), cell)
    cy = _cell_coordinate(0.5 * (samples[o, a, 1] + samples[o, b, 1]), cell)
    cz = _cell_coordinate(0.5 * (samples[o, a, 2] + samples[o, b, 2]), cell)
    return (cx << (2 * _BITS)) | (cy << _BITS) | cz, _bucket(cx, cy, cz, size)


@hjit
def _sort_window(window, samples, conf, margin, order, sorted_keys, radius, starts, keys,
                 bounds):
    """The per-window half of the broad phase: what `_scan` reads of window
    ``window[0]`` (samples ``a``, ``a + 1`` of ``samples``, ``(N, M, 6)`` states;
    ``conf = (dt, k, threshold)``).

    Outputs (by object: ``margin``, the chord margins; by slot of the sort: ``order``,
    the object in each slot, ``sorted_keys``, its cell key, ``radius``, its radius
    interval (low, high); by hash slot: ``starts``, where each slot's entries begin
    (``size + 1``, the last the end)). ``keys`` (the cell key) and ``bounds`` (the radius
    interval) by object: working rows. (The host targets' form, one window per core at
    a time; on cuda the same numbers come from kernels per (window, object) and the
    target's `bucket_sort`: `broad_phase`.)"""
    a = window[0]
    b = a + 1
    dt = conf[0]
    k = conf[1]
    threshold = conf[2]
    n = samples.shape[0]
    size = starts.shape[0] - 1
    # the widest box of the window: the grid's cell; each object's radius interval
    widest = 0.0
    for o in range(n):
        m, extent, low, high = _object_window(samples, o, a, b, k, dt)
        margin[o] = m
        widest = max(widest, extent)
        bounds[o, 0] = low
        bounds[o, 1] = high
    cell = (widest + threshold) * _CELL_SLACK
    # counting sort of the objects by the hash slot of their centre's cell
    for h in range(size + 1):
        starts[h] = 0
    for o in range(n):
        key, h = _cell_key(samples, o, a, b, cell, size)
        keys[o] = key
        starts[h + 1] += 1
    for h in range(1, size + 1):
        starts[h] += starts[h - 1]
    for o in range(n):
        key = keys[o]
        h = _bucket(key >> (2 * _BITS), (key >> _BITS) & _MASK, key & _MASK, size)
        slot = starts[h]
        order[slot] = o
        # what the pair scan reads of each object, in slot order: the scan of a slot
        # reads consecutive memory, and only pairs through the radius test read samples
        sorted_keys[slot] = key
        radius[slot, 0] = bounds[o, 0]
        radius[slot, 1] = bounds[o, 1]
        starts[h] += 1
    # each slot's count was moved one slot down by the filling: shift back
    for h in range(size, 0, -1):
        starts[h] = starts[h - 1]
    starts[0] = 0


@hjit
def _window_object(item, samples, conf, margin, bounds, extent):
    """`_sort_window`'s first pass for one (window, object), ``item[0] = w * N + o``:
    its margin, radius interval and box extent (rows of this item)."""
    n = samples.shape[0]
    w = item[0] // n
    m, e, low, high = _object_window(samples, item[0] - w * n, w, w + 1, conf[1], conf[0])
    margin[0] = m
    extent[0] = e
    bounds[0] = low
    bounds[1] = high


@hjit
def _window_key(item, samples, conf, widest, keys, buckets):
    """`_sort_window`'s cell key and hash slot of one (window, object), ``item[0] = w *
    N + o``, with the cell of its window's ``widest`` box (``conf[3]``: the table's
    slots)."""
    n = samples.shape[0]
    w = item[0] // n
    cell = (widest[w] + conf[2]) * _CELL_SLACK
    key, h = _cell_key(samples, item[0] - w * n, w, w + 1, cell, int(conf[3]))
    keys[0] = key
    buckets[0] = h


@hjit
def _window_slot(item, order, keys, bounds, sorted_keys, radius):
    """`_sort_window`'s rows of slot ``s`` of window ``w`` (``item[0] = w * N + s``):
    the key and radius interval of the object that `bucket_sort` put there."""
    n = order.shape[1]
    w = item[0] // n
    o = order[w, item[0] - w * n]
    sorted_keys[0] = keys[w, o]
    radius[0] = bounds[w, o, 0]
    radius[1] = bounds[w, o, 1]


@hjit
def _scan(start, stop, a, b, threshold, samples, margin, order, sorted_keys, radius, starts,
          pairs):
    """The pair scan of slots ``start`` to ``stop`` of one window (samples ``a``, ``b`` of
    ``samples``; its rows of `_sort_window`'s outputs): the object in each slot against the
    entries after it in its own cell and those of the 13 neighbour cells after it.
    Candidates go to ``pairs`` (rows ``i, j``, ``i < j``; past its end counted, not
    written). Returns ``(candidates, grid pairs, pairs through the radius test)``."""
    size = starts.shape[0] - 1
    cap = pairs.shape[0]
    found = 0
    formed = 0
    thin = 0
    for here in range(start, stop):
        o = order[here]
        key = sorted_keys[here]
        cx = key >> (2 * _BITS)
        cy = (key >> _BITS) & _MASK
        cz = key & _MASK
        low = radius[here, 0]
        high = radius[here, 1]
        # offsets 13..26 of the 27 in lexicographic order: the cell itself and the
        # 13 neighbours after it
        for index in range(13, 27):
            nx = cx + index // 9 - 1
            ny = cy + (index // 3) % 3 - 1
            nz = cz + index % 3 - 1
            if nx < 0 or ny < 0 or nz < 0 or nx > _MASK or ny > _MASK or nz > _MASK:
                continue
            wanted = (nx << (2 * _BITS)) | (ny << _BITS) | nz
            h = _bucket(nx, ny, nz, size)
            # own cell: the entries after this one in its slot (each pair seen once)
            first = here + 1 if index == 13 else starts[h]
            for slot in range(first, starts[h + 1]):
                # another cell in the same slot
                if sorted_keys[slot] != wanted:
                    continue
                formed += 1
                # radius intervals more than the threshold apart: never within it
                gap = max(radius[slot, 0] - high, low - radius[slot, 1])
                if gap > threshold + _RADIUS_PAD * max(high, radius[slot, 1]):
                    continue
                thin += 1
                q = order[slot]
                if _chord_close(samples, a, b, o, q, threshold + margin[o] + margin[q]):
                    if found < cap:
                        pairs[found, 0] = min(o, q)
                        pairs[found, 1] = max(o, q)
                    found += 1
    return found, formed, thin


@hjit
def _scan_slot(item, samples, conf, margin, order, sorted_keys, radius, starts, pairs, counts):
    """The second kernel's object: `_scan` of slot ``here`` of window ``w``, ``item[0] =
    w * N + here`` (the per-window arrays of `_sort_window`, ``(W, ...)``, whole).
    ``counts = (candidates, grid pairs, pairs through the radius test)``."""
    n = order.shape[1]
    w = item[0] // n
    here = item[0] - w * n
    found, formed, thin = _scan(here, here + 1, w, w + 1, conf[2], samples, margin[w], order[w],
                                sorted_keys[w], radius[w], starts[w], pairs)
    counts[0] = found
    counts[1] = formed
    counts[2] = thin


@hjit
def _grid_window(window, samples, conf, pairs, counts, margin, order, sorted_keys, radius,
                 starts, keys, bounds):
    """Both halves in one object, one window (the host targets' form, `broad_phase`):
    `_sort_window`, then `_scan` of all its slots while the window's rows are in cache.
    ``counts`` as for `_scan_slot`, of the whole window; the rest: working rows."""
    _sort_window(window, samples, conf, margin, order, sorted_keys, radius, starts, keys,
                 bounds)
    a = window[0]
    found, formed, thin = _scan(0, order.shape[0], a, a + 1, conf[2], samples, margin, order,
                                sorted_keys, radius, starts, pairs)
    counts[0] = found
    counts[1] = formed
    counts[2] = thin


#: The per-window arrays: name, dtype, the dimensions of a window's row (``n`` objects,
#: ``h1`` hash slots + 1).
_WINDOW_ARRAYS = (("margin", np.float64, ("n",)), ("order", np.int32, ("n",)),
                  ("sorted_keys", np.int64, ("n",)), ("radius", np.float64, ("n", "two")),
                  ("starts", np.int32, ("h1",)))
_WORK = (("keys", np.int64, ("n",)), ("bounds", np.float64, ("n", "two")))
_SAMPLES = [Arg("samples", np.float64, ("n", "m", "six"), per_object=False),
            Arg("conf", np.float64, ("c",), per_object=False)]

#: the per-window half where the target has memory of its own, as kernels of one
#: object per (window, object) or (window, slot) and the target's `bucket_sort`
_ITEM = Arg("item", np.int32, ("one",))
_OBJECT = ObjectKernel(_window_object, [
    _ITEM, *_SAMPLES, Arg("margin", np.float64, ("one",), output=True),
    Arg("bounds", np.float64, ("two",), output=True),
    Arg("extent", np.float64, ("one",), output=True)])
_KEY = ObjectKernel(_window_key, [
    _ITEM, *_SAMPLES, Arg("widest", np.float64, ("w",), per_object=False),
    Arg("keys", np.int64, ("one",), output=True),
    Arg("buckets", np.int32, ("one",), output=True)])
_SLOT = ObjectKernel(_window_slot, [
    _ITEM, Arg("order", np.int32, ("w", "n"), per_object=False),
    Arg("keys", np.int64, ("w", "n"), per_object=False),
    Arg("bounds", np.float64, ("w", "n", "two"), per_object=False),
    Arg("sorted_keys", np.int64, ("one",), output=True),
    Arg("radius", np.float64, ("two",), output=True)])

#: the second kernel: one object per (window, slot), the per-window arrays whole
_SCAN = ObjectKernel(_scan_slot, [
    Arg("item", np.int32, ("one",)), *_SAMPLES,
    *(Arg(name, dtype, ("w", *core), per_object=False) for name, dtype, core in _WINDOW_ARRAYS),
    Arg("pairs", np.int32, ("cap", "two"), output=True),
    Arg("counts", np.int32, ("three",), output=True)])

#: both in one kernel, one object per window (the host targets)
_GRID = ObjectKernel(_grid_window, [
    Arg("window", np.int64, ("one",)), *_SAMPLES,
    Arg("pairs", np.int32, ("cap", "two"), output=True),
    Arg("counts", np.int64, ("three",), output=True),
    *(Arg(name, dtype, core, scratch=True) for name, dtype, core in _WINDOW_ARRAYS + _WORK)])

#: Items (window, slot) of one `broad_phase` call at most: their index is an int32.
MAX_ITEMS = 2 ** 31 - 1
#: Candidates per slot (`_SCAN`) and per window (`_GRID`) that the first run of a
#: kernel keeps room for; rows with more run again with room for all of theirs.
SLOT_CAP = 1
WINDOW_CAP = 16


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
    """Hash slots of a window of ``n`` objects: a power of two >= 2 N (short slots)."""
    return 1 << max(1, (2 * n - 1).bit_length())


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


def _sorted_windows(samples, conf, items, windows, n, size):
    """`_sort_window`'s outputs for every window, ``[margin, order, sorted_keys, radius,
    starts]`` (`_WINDOW_ARRAYS`, ``(W, ...)``), in the target's memory, made by one
    GPU thread per (window, object) rather than one per window: `_OBJECT` (margins,
    radius intervals, box extents), the target's ``row_max`` (each window's widest box:
    its cell), `_KEY` (cell keys and hash slots), the target's ``bucket_sort`` (the
    counting sort: objects by hash slot, and where each slot starts) and `_SLOT` (keys
    and radius intervals in slot order). The same numbers as `_sort_window`'s, but for
    the order of the objects within a hash slot (the target's), which no candidate or
    count depends on. ``items``: the ``(W N, 1)`` column ``0, 1, ...``. One thread per
    window would run each window's O(N) passes one after another, which is slower."""
    empty = active.device_empty
    margin, bounds, extent = (empty((windows * n, width), np.float64) for width in (1, 2, 1))
    _OBJECT(items, samples, conf, margin, bounds, extent)
    widest = active.row_max(extent.reshape(windows, n))
    keys, buckets = empty((windows * n, 1), np.int64), empty((windows * n, 1), np.int32)
    _KEY(items, samples, conf, widest, keys, buckets)
    order, starts = active.bucket_sort(buckets.reshape(windows, n), size)
    sorted_keys, radius = empty((windows * n, 1), np.int64), empty((windows * n, 2), np.float64)
    _SLOT(items, order, keys.reshape(windows, n), bounds.reshape(windows, n, 2), sorted_keys,
          radius)
    return [margin.reshape(windows, n), order, sorted_keys.reshape(windows, n),
            radius.reshape(windows, n, 2), starts]


def broad_phase(samples, dt, k, threshold, cap=None, per_slot=None, items=None):
    """Candidate (object i, object j, window w) of one chunk of samples.

    ``samples``: ``(N, W + 1, 6)`` states (positions, velocities) ``dt`` apart, as
    `sample_states` gives them (read in place: each window's two samples of an object
    are 96 consecutive bytes; no transposed copy, which took 1.8 s per 2e7
    object-windows on the GPU's host). Returns ``i``, ``j``,
    ``w`` (``i < j``), each (pair, window) once, sorted by ``(w, i, j)``, the number
    of pairs the grid formed and the number of those that passed the radius test (and
    were chord-tested).

    ``per_slot`` (default `two_kernels`: where the target has memory of its own): the
    per-window arrays made per (window, object) (`_sorted_windows`), then `_scan_slot`
    per (window, slot), all left in the target's memory (``samples`` moved there once);
    otherwise (the host targets) one kernel per window, `_grid_window`, which runs the
    same two halves while the window's arrays are in the core's cache. Same candidates,
    same counts. ``cap``: candidates per kernel row that the first run keeps room for
    (`SLOT_CAP`, `WINDOW_CAP`); rows with more run again with room for all of theirs.
    The rows stay where the kernel wrote them and are compacted there
    (``active.compact_rows``: on cuda only the candidates cross to the host, not a
    slot's 20 bytes of row and counts). ``items``: the ``(K, 1)``
    int32 column ``0, 1, ...`` (K >= W N) in the target's memory, for ``per_slot``
    (made here without it: `screen` makes it once for all its chunks).
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
                         f"{MAX_ITEMS} (window, slot) items; screen fewer windows at once")
    size = table_size(n)
    conf = np.array([dt, k, threshold, size], dtype=np.float64)
    empty = active.device_empty
    if per_slot:
        samples_d = active.to_device(samples)
        if items is None or items.shape[0] < count:
            items = active.to_device(np.arange(count, dtype=np.int32).reshape(-1, 1))
        window_arrays = _sorted_windows(samples_d, conf, items[:count], windows, n, size)

        def run(rows, cap):
            which = (items[:count] if rows is None
                     else active.to_device(rows.astype(np.int32).reshape(-1, 1)))
            # in the target's memory, compacted there (`_candidates`)
            pairs = empty((which.shape[0], cap, 2), np.int32)
            counts = empty((which.shape[0], 3), np.int32)
            _SCAN(which, samples_d, conf, *window_arrays[:len(_WINDOW_ARRAYS)], pairs, counts)
            return pairs, counts
    else:
        sizes = {"n": n, "two": 2, "h1": size + 1}
        window_arrays = [empty((windows, *(sizes[d] for d in core)), dtype)
                         for _, dtype, core in _WINDOW_ARRAYS + _WORK]
        every = np.arange(windows, dtype=np.int64).reshape(-1, 1)

        def run(rows, cap):
            which = every if rows is None else rows.astype(np.int64).reshape(-1, 1)
            pairs = empty((which.shape[0], cap, 2), np.int32)
            counts = empty((which.shape[0], 3), np.int64)
            # each call's objects their own rows of the working arrays
            work = window_arrays if rows is None else [a[:len(rows)] for a in window_arrays]
            _GRID(which, samples, conf, pairs, counts, *work)
            return pairs, counts

    i, j, row, sums = _candidates(run, cap)
    w = row // n if per_slot else row
    # each (window, pair) once, in (w, i, j) order (np.unique's answer without its hash
    # pass, which costs more than this sort and comparison)
    keys = np.sort((w * n + i) * n + j)
    keys = keys[np.concatenate(([True], keys[1:] != keys[:-1]))] if len(keys) else keys
    w, rest = np.divmod(keys, n * n)
    i, j = np.divmod(rest, n)
    return i, j, w, int(sums[1]), int(sums[2])


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
#: (`broad_phase`): the states 48 (moved once for all), the per-window arrays 36 and the
#: hash table's starts 8 to 16 (4 bytes a slot, 2 to 4 slots an object), the working
#: rows of `_sorted_windows` 36 (keys, buckets, radius intervals, extents), items 4; the
#: second kernel's rows 20 (a candidate's 8 at `SLOT_CAP`, counts 12: compacted there,
#: `_candidates`).
DEVICE_BYTES = 160


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
        Windows screened at once (at least 1): bounds memory, about 150 bytes of host memory per
        object and window on the host targets (samples 48, the broad phase's
        per-window arrays 76, beside the solver's own) and on cuda 160 bytes of GPU
        memory (`DEVICE_BYTES`). Default (`default_chunk`): 2e6 object-windows on the
        host targets; 4e7 on cuda, or fewer if a quarter of the GPU's free memory holds
        less. The candidates of several chunks, up to `REFINE_BATCH`, are refined in
        one solver call.
    stats : dict, optional
        Filled with the time per phase (s), the number of windows, grid pairs, pairs
        chord-tested (through the radius test) and candidates (the benchmark reads it),
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
    for start in range(0, windows, chunk):
        stop = min(windows, start + chunk)
        now = clock()
        local = times[start:stop + 1]
        # each chunk on from the last one's final sample, f's t on the screen's axis
        # on cuda the samples stay in the GPU's memory for the broad phase
        states = sample_states(k, r, v, local, f, rows, rtol, atol, on_device=two_kernels())
        last = take_states(states, np.arange(n), len(local) - 1)
        r, v = last[:, :3], last[:, 3:]
        stats["propagate_s"] += clock() - now
        now, used = clock(), time.process_time()
        if items is None and two_kernels():
            # the (window, object) and (window, slot) items of the broad phase's kernels,
            # in the target's memory once for all chunks
            items = active.to_device(np.arange(min(chunk, windows) * n,
                                               dtype=np.int32).reshape(-1, 1))
        i, j, w, grid, chord = broad_phase(states, dt, k, threshold, items=items)
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

