"""Conjunction screening (`hapsira_cowell.conjunctions.screen`): planted encounters found to
1e-3 s and 1 m, real debris equal to brute force, the table and the argument checks."""

import math

import numpy as np
import pytest
from astropy import units as u
from reference import DATA_DIR

from hapsira_core.jit import Arg, ObjectKernel, hjit
from hapsira_cowell import cowell, from_tle
from hapsira_cowell.conjunctions import ConjunctionTable, screen, two_body_j2
from hapsira_cowell.constants import K_EARTH
from hapsira_cowell.propagation import conjunctions
from hapsira_cowell.propagation.conjunctions import PERTURBATION_FRACTION, RADIUS_FRACTION

k = K_EARTH


def circular(a, inc, raan):
    """Position and velocity on a circular orbit at its ascending node."""
    speed = np.sqrt(k / a)
    r = a * np.array([np.cos(raan), np.sin(raan), 0.0])
    v = speed * np.array([-np.sin(raan) * np.cos(inc), np.cos(raan) * np.cos(inc), np.sin(inc)])
    return r, v


def planted_pair(tca, miss, a, inc_a, inc_b, raan):
    """Two objects whose closest approach is at ``tca`` (s) at ``miss`` (km): built at the
    meeting (separation perpendicular to the relative velocity, so the range rate is zero
    there) and integrated back to t = 0 under `two_body_j2`."""
    r_a, v_a = circular(a, inc_a, raan)
    r_b, v_b = circular(a, inc_b, raan)
    v_b = 1.02 * v_b  # another period: they meet once in the span
    side = np.cross(v_a - v_b, r_a)
    r_b = r_b + miss * side / np.linalg.norm(side)
    res = cowell(k, np.array([r_a, r_b]), np.array([v_a, v_b]), [-tca], f=two_body_j2)
    return res.rr[:, 0], res.vv[:, 0]


def background(n, seed):
    rng = np.random.default_rng(seed)
    states = [circular(rng.uniform(6800, 7600), rng.uniform(0, np.pi), rng.uniform(0, 2 * np.pi))
              for _ in range(n)]
    # spread along the orbit: a quarter period on at most
    r = np.array([s[0] for s in states])
    v = np.array([s[1] for s in states])
    res = cowell(k, r, v, [1500.0], f=two_body_j2)
    return res.rr[:, 0], res.vv[:, 0]


PLANTED = [(1234.5, 0.3), (2500.25, 2.0), (3000.0, 4.5), (400.125, 0.004)]


def crossing_pair(tca, miss, a, climb):
    """A circular object at radius ``a`` and one crossing its shell at ``climb`` km/s
    (radially, at the meeting) in another plane, meeting at ``tca`` at ``miss``; both
    integrated back to t = 0 under `two_body_j2`."""
    r_a, v_a = circular(a, 0.9, 0.2)
    _, v_b = circular(a, 1.6, 0.2)
    v_b = v_b + climb * r_a / np.linalg.norm(r_a)
    side = np.cross(v_a - v_b, r_a)
    r_b = r_a + miss * side / np.linalg.norm(side)
    res = cowell(k, np.array([r_a, r_b]), np.array([v_a, v_b]), [-tca], f=two_body_j2)
    return res.rr[:, 0], res.vv[:, 0]


def test_a_minimum_on_the_border_of_two_windows_is_found_once():
    """Each window starts from its own sample: rounding may leave g = range rate just
    negative at one window's end and just positive at the next one's start (an H100's
    fused multiply-adds did, and lost a planted approach). Two windows that miss the
    minimum by 1e-7 s on either side stand for that; the refinement's overlap finds it."""
    tca, miss = 600.0, 1.5
    r, v = planted_pair(tca, miss, 7000.0, 0.6, 1.4, 0.3)
    gap = 1e-7
    at = cowell(k, r, v, [tca - 60.0, tca - gap, tca + gap], f=two_body_j2)
    rows = np.zeros((2, 0))
    found = []
    for w, (t_a, t_b) in enumerate([(tca - 60.0, tca - gap), (tca + gap, tca + 60.0)]):
        c = 0 if w == 0 else 2
        found.append(conjunctions.refine(
            k, two_body_j2, rows, at.rr[0:1, c], at.vv[0:1, c], at.rr[1:2, c], at.vv[1:2, c],
            np.array([0]), np.array([1]), np.array([t_a]), np.array([t_b]), 5.0, 1e-11, 1e-12,
            t_end=tca + 60.0))
    i, j, t, m, speed = (np.concatenate(c) for c in zip(*found))
    i, j, t, m, speed = conjunctions._dedupe(i, j, t, m, speed)
    assert len(t) == 1
    assert abs(t[0] - tca) < 1e-6 and abs(m[0] - miss) < 1e-6


def test_planted_encounters_are_found_with_tca_to_a_millisecond_and_miss_to_a_metre(
        monkeypatch, simulated):
    # the simulator runs a Python thread per object and step (three screenings here):
    # 4 objects around the planted pairs there, 12 elsewhere
    r, v = background(4 if simulated else 12, seed=1)
    truth = []
    for q, (tca, miss) in enumerate(PLANTED):
        pair_r, pair_v = planted_pair(tca, miss, 6900 + 150 * q, 0.5 + 0.1 * q, 1.3 + 0.25 * q,
                                      0.9 * q)
        truth.append((len(r), tca, miss))
        r = np.concatenate((r, pair_r))
        v = np.concatenate((v, pair_v))
    stats = {}
    table = screen(k, r, v, (0.0, 3600.0), 5.0, stats=stats)
    assert isinstance(table, ConjunctionTable)
    assert np.all(np.diff(table.tca) >= 0)
    found = {(int(i), int(j)): (t, m) for i, j, t, m in zip(table.i, table.j, table.tca,
                                                             table.miss)}
    for first, tca, miss in truth:
        t, m = found[(first, first + 1)]
        assert abs(t - tca) < 1e-3
        assert abs(m - miss) < 1e-3  # km: 1 m
    # nothing else comes within 5 km of anything in this cloud
    assert len(table) == len(PLANTED)
    assert stats["candidates"] >= len(PLANTED) and stats["windows"] > 0
    assert np.all((table.speed > 4.0) & (table.speed < 9.0))
    # in chunks of 7 windows (the propagation restarts at each chunk's first sample)
    chunked = screen(k, r, v, (0.0, 3600.0), 5.0, chunk=7)
    np.testing.assert_array_equal(chunked.i, table.i)
    np.testing.assert_array_equal(chunked.j, table.j)
    np.testing.assert_allclose(chunked.tca, table.tca, rtol=0, atol=1e-6)
    np.testing.assert_allclose(chunked.miss, table.miss, rtol=0, atol=1e-6)
    # the chunks' candidates refined together (default) or a chunk at a time: the pairs
    # are integrated each on its own, the same numbers
    monkeypatch.setattr(conjunctions, "REFINE_BATCH", 1)
    each = screen(k, r, v, (0.0, 3600.0), 5.0, chunk=7)
    for column in ("i", "j", "tca", "miss", "speed"):
        np.testing.assert_array_equal(getattr(each, column), getattr(chunked, column))


def test_an_approach_across_shells_passes_the_radius_test():
    """Two objects whose radii differ by tens of km a window before and after they meet
    (one climbs through the other's shell at 0.6 km/s): the radius intervals of the
    meeting's window still overlap, the approach is found to 1e-3 s and 1 m."""
    tca, miss = 1000.0, 2.5
    pair_r, pair_v = crossing_pair(tca, miss, 7100.0, 0.6)
    r, v = background(6, seed=5)
    r, v = np.concatenate((pair_r, r)), np.concatenate((pair_v, v))
    stats = {}
    table = screen(k, r, v, (0.0, 2000.0), 5.0, stats=stats)
    assert len(table) == 1 and (table.i[0], table.j[0]) == (0, 1)
    assert abs(table.tca[0] - tca) < 1e-3 and abs(table.miss[0] - miss) < 1e-3
    # on different shells around the meeting: radii 2 windows off differ by > 10 km
    at = cowell(k, pair_r, pair_v, [tca - 2 * stats["dt"], tca + 2 * stats["dt"]],
                f=two_body_j2)
    shells = np.linalg.norm(at.rr, axis=-1)  # (2 objects, 2 times)
    assert np.all(np.abs(shells[0] - shells[1]) > 10.0)
    # and the boxes' overlap (the radius among it) drops most pairs the grid forms here
    assert stats["grid_pairs"] > stats["chord_tests"] >= stats["candidates"] >= 1


def _debris_mix(per_catalog):
    """``per_catalog`` objects of each of three catalogs (different shells)."""
    r, v = [], []
    for name in ("fengyun-1c-debris.tle", "cosmos-2251-debris.tle", "iridium-33-debris.tle"):
        catalog = from_tle(DATA_DIR / name)
        ri, vi, ok = catalog.states_at(catalog.epochs.max())
        r.append(ri[ok][:per_catalog])
        v.append(vi[ok][:per_catalog])
    return np.concatenate(r), np.concatenate(v)


def test_the_radius_test_is_conservative_on_real_debris(simulated):
    """On three real debris clouds (30 s sampling, 0.5 s dense): every object's radius
    over every window lies in its `radius_bounds`, and every pair the radius test drops
    stays farther than the threshold over the whole window (its densely sampled distance
    minus what can fall between two dense points)."""
    # (the simulator runs the GPU's code as Python threads: 8 objects a cloud, 300 s at 1 s
    # dense; 7 near pairs dropped there)
    n_each, threshold, dt, h, near, span = ((8, 50.0, 30.0, 1.0, 500.0, 300.0) if simulated
                                            else (150, 50.0, 30.0, 0.5, 200.0, 600.0))
    r, v = _debris_mix(n_each)
    n = len(r)
    per = int(dt / h)
    dense = np.linspace(0.0, span, int(span / h) + 1)
    pos_d, vel_d = conjunctions.sample_cloud(k, r, v, dense, two_body_j2, np.zeros((n, 0)),
                                             1e-11, 1e-12)
    pos, vel = pos_d[:, ::per], vel_d[:, ::per]
    windows = pos.shape[1] - 1
    m = conjunctions._chord_margin(k, pos[:, :-1], pos[:, 1:], vel[:, :-1], vel[:, 1:], dt)
    low, high = conjunctions.radius_bounds(pos[:, :-1], pos[:, 1:], m)  # (N, W)
    radii = np.linalg.norm(pos_d[:, :-1], axis=-1).reshape(n, windows, per)
    radii = np.concatenate((radii, np.linalg.norm(pos[:, 1:], axis=-1)[..., None]), axis=-1)
    assert np.all(radii >= low[..., None]) and np.all(radii <= high[..., None])
    # bounds not trivially wide: a few km on these near-circular orbits
    assert np.median(high - low) < 10.0
    i, j = np.triu_indices(n, 1)
    speed = np.linalg.norm(vel_d, axis=-1).max()
    slack = 2.0 * speed * h / 2.0  # both objects move at most speed * h / 2 off a point
    dropped_near = 0
    for w in range(windows):
        kept = conjunctions.radius_candidates(pos[i, w], pos[i, w + 1], pos[j, w],
                                              pos[j, w + 1], m[i, w], m[j, w], threshold)
        a, b = i[~kept], j[~kept]
        span = slice(w * per, (w + 1) * per + 1)
        d = np.linalg.norm(pos_d[a, span] - pos_d[b, span], axis=-1).min(axis=1)
        assert np.all(d > threshold + slack), (w, d.min())
        # pairs a 3-D grid of cells a few hundred km wide would form
        dropped_near += int(np.sum(d < near))
    assert dropped_near > 5  # not vacuous: the radius test removes pairs close in space


def test_the_result_on_a_time_axis_and_with_quantities():
    r, v = planted_pair(500.0, 1.0, 7000.0, 0.3, 1.2, 0.4)
    table = screen(k * u.km ** 3 / u.s ** 2, r * u.km, v * u.km / u.s, (100.0, 1100.0) * u.s,
                   2000 * u.m)
    # the states are at t0 = 100 s: the meeting is 500 s later
    assert len(table) == 1
    assert abs(table["tca"][0] - 600.0) < 1e-3 and abs(table.miss[0] - 1.0) < 1e-3
    assert table["i"][0] == 0 and table.j[0] == 1


def _catalog(n):
    catalog = from_tle(DATA_DIR / "fengyun-1c-debris.tle")
    r, v, ok = catalog.states_at(catalog.epochs.max())
    r, v = r[ok][:n], v[ok][:n]
    assert len(r) == n
    return r, v


def _brute_force(r, v, span, threshold, dt, rtol, atol):
    """Every pair and every window, flagged by the distance on a dense grid (1 s) with a
    margin for what falls between its points, then the same refinement as `screen`."""
    n = len(r)
    windows = int(np.ceil(span / dt - 1e-9))
    times = np.linspace(0.0, span, windows + 1)
    dt = span / windows
    dense_step = dt / max(1, int(np.ceil(dt / 1.0)))
    dense = np.linspace(0.0, span, round(span / dense_step) + 1)
    pos_dense, _ = conjunctions.sample_cloud(k, r, v, dense, two_body_j2,
                                                     np.zeros((n, 0)), rtol, atol)
    # between two dense points two objects close by at most |v_i - v_j| h / 2 plus curvature
    slack = 20.0 * dense_step / 2 + 1.0
    which = np.minimum(np.searchsorted(times, dense, side="right") - 1, windows - 1)
    ii, jj, ww = [], [], []
    for i in range(n - 1):
        d = np.linalg.norm(pos_dense[i + 1:] - pos_dense[i], axis=-1)  # (n - i - 1, M)
        close = d <= threshold + slack
        js, ks = np.nonzero(close)
        # a dense point on a window's edge belongs to both windows
        for w in (which[ks], np.clip(np.searchsorted(times, dense[ks], side="left") - 1,
                                     0, windows - 1)):
            ii.append(np.full(len(js), i))
            jj.append(js + i + 1)
            ww.append(w)
    key = np.unique((np.concatenate(ww) * n + np.concatenate(ii)) * n + np.concatenate(jj))
    w, rest = np.divmod(key, n * n)
    i, j = np.divmod(rest, n)
    pos, vel = conjunctions.sample_cloud(k, r, v, times, two_body_j2, np.zeros((n, 0)),
                                         rtol, atol)
    found = conjunctions.refine(k, two_body_j2, np.zeros((n, 0)), pos[i, w], vel[i, w],
                                pos[j, w], vel[j, w], i, j, times[w], times[w + 1], threshold,
                                rtol, atol)
    return ConjunctionTable(*conjunctions._dedupe(*found)), len(key)


def _group_pairs(keys, objects):
    """Every pair of entries that share a key: ``(first, second)`` entry positions."""
    order = np.argsort(keys, kind="stable")
    keys, objects = keys[order], objects[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    sizes = np.diff(np.r_[starts, keys.size])
    # entry at offset o in a group of size s pairs with the s - 1 - o entries after it
    offset = np.arange(keys.size) - np.repeat(starts, sizes)
    count = np.repeat(sizes, sizes) - 1 - offset
    total = int(count.sum())
    first = np.repeat(np.arange(keys.size), count)
    second = first + 1 + (np.arange(total) - np.repeat(np.cumsum(count) - count, count))
    return order[first], order[second]


def numpy_broad_phase(pos, vel, dt, k, threshold):
    """The broad phase as it was first written (numpy on the host, boxes in every cell
    they touch): candidate (object i, object j, window w) of one chunk of samples.

    ``pos``, ``vel``: ``(N, W + 1, 3)``, samples ``dt`` apart. Returns ``i``, ``j``,
    ``w`` (``i < j``), each (pair, window) once, and the number of grid pairs before
    the chord test.
    """
    n, m = pos.shape[:2]
    windows = m - 1
    p0, p1 = pos[:, :-1], pos[:, 1:]
    margin = conjunctions._chord_margin(k, p0, p1, vel[:, :-1], vel[:, 1:], dt)  # (N, W)
    lo = np.minimum(p0, p1) - margin[..., None]
    hi = np.maximum(p0, p1) + margin[..., None]
    cell = float(np.max(hi - lo)) + threshold
    # cells a..b per axis: hi + threshold so that boxes within threshold share one
    a = np.floor(lo / cell).astype(np.int64)
    b = np.floor((hi + threshold) / cell).astype(np.int64)
    base = a.reshape(-1, 3).min(axis=0)
    span = b.reshape(-1, 3).max(axis=0) - base + 1
    if float(np.prod(span.astype(float))) * windows >= 2.0 ** 62:
        raise ValueError("threshold: the screening grid does not fit 64-bit keys; "
                         "screen shorter chunks (chunk=) or a smaller dt")
    obj = np.broadcast_to(np.arange(n)[:, None], (n, windows))
    win = np.broadcast_to(np.arange(windows)[None, :], (n, windows))
    keys, objects, wins = [], [], []
    for ox in (0, 1):
        for oy in (0, 1):
            for oz in (0, 1):
                c = a + np.array([ox, oy, oz])
                inside = np.all(c <= b, axis=-1)
                c = c[inside] - base
                keys.append(((win[inside] * span[0] + c[:, 0]) * span[1] + c[:, 1])
                            * span[2] + c[:, 2])
                objects.append(obj[inside])
                wins.append(win[inside])
    keys, objects, wins = np.concatenate(keys), np.concatenate(objects), np.concatenate(wins)
    first, second = _group_pairs(keys, objects)
    i, j, w = objects[first], objects[second], wins[first]
    i, j = np.minimum(i, j), np.maximum(i, j)
    unique = np.unique((w * n + i) * n + j)
    grid_pairs = unique.size
    w, rest = np.divmod(unique, n * n)
    i, j = np.divmod(rest, n)
    keep = conjunctions.chord_candidates(p0[i, w], p1[i, w], p0[j, w], p1[j, w],
                            margin[i, w], margin[j, w], threshold)
    return i[keep], j[keep], w[keep], grid_pairs

def test_kernel_broad_phase_keeps_every_candidate_of_the_numpy_one(simulated):
    """On a random LEO cloud (shells 6,800-7,200 km, random planes, so that many boxes
    meet) the kernel's candidates contain the numpy grid's, and a row of room for two
    candidates per window (most windows overflow and run again) loses none."""
    rng = np.random.default_rng(3)
    n = 30 if simulated else 300  # the simulator: a thread per object and window
    r = rng.normal(size=(n, 3))
    r *= rng.uniform(6800, 7200, (n, 1)) / np.linalg.norm(r, axis=1)[:, None]
    v = np.cross(r, rng.normal(size=(n, 3)))
    v *= np.sqrt(k / np.linalg.norm(r, axis=1))[:, None] / np.linalg.norm(v, axis=1)[:, None]
    times = np.linspace(0.0, 600.0, 21)
    pos, vel = conjunctions.sample_cloud(k, r, v, times, two_body_j2, np.zeros((n, 0)),
                                         1e-11, 1e-12)
    threshold = 1000.0 if simulated else 200.0  # 25 radius candidates at 30 objects
    i0, j0, w0, _ = numpy_broad_phase(pos, vel, 30.0, k, threshold)
    # the kernel also drops pairs whose radius intervals are apart (its host twin here;
    # that this never loses an approach: test_the_radius_test_is_conservative...)
    m = conjunctions._chord_margin(k, pos[:, :-1], pos[:, 1:], vel[:, :-1], vel[:, 1:], 30.0)
    thin = conjunctions.radius_candidates(pos[i0, w0], pos[i0, w0 + 1], pos[j0, w0],
                                          pos[j0, w0 + 1], m[i0, w0], m[j0, w0], threshold)
    assert thin.sum() > 20  # not vacuous (it drops grid pairs, rarely chord candidates)
    old = set(zip(w0[thin].tolist(), i0[thin].tolist(), j0[thin].tolist()))
    for cap in (16, 2):
        i1, j1, w1, grid, chord = conjunctions.broad_phase(
            np.concatenate((pos, vel), axis=2), 30.0, k, threshold, cap=cap)
        new = list(zip(w1.tolist(), i1.tolist(), j1.tolist()))
        assert len(set(new)) == len(new) and np.all(i1 < j1)
        assert old <= set(new)
        assert grid >= chord >= len(new)  # (strictly fewer: the across-shells test)
    # what the kernel adds passes the same chord and radius tests (nothing is made up)
    for test in (conjunctions.chord_candidates, conjunctions.radius_candidates):
        keep = test(pos[i1, w1], pos[i1, w1 + 1], pos[j1, w1], pos[j1, w1 + 1], m[i1, w1],
                    m[j1, w1], threshold)
        assert np.all(keep)


def _spy(monkeypatch, name):
    """The arrays of every call of the kernel ``conjunctions.<name>`` (still run)."""
    calls = []
    kernel = getattr(conjunctions, name)

    def spy(*arrays):
        calls.append(arrays)
        return kernel(*arrays)

    monkeypatch.setattr(conjunctions, name, spy)
    return calls


def _same_as_the_reference(pos, vel, dt, threshold, monkeypatch):
    """broad_phase in both forms, with the default rows and rows of one and two
    candidates, gives `reference_broad_phase`'s candidates (w, i, j) bit for bit (the old
    3-D grid's: both keep exactly the pairs through the chord test), and both forms the
    same counts (grid pairs, pairs whose boxes overlap), whatever the rows; the host
    targets' kernel the same with its windows in batches of three. Returns the
    reference's candidates, the counts and how many times each form ran a row again
    (overflow)."""
    expected = reference_broad_phase(pos, vel, dt, K_EARTH, threshold)
    again, counts = {}, set()
    # (the kernel, where its pairs and counts are among its arrays)
    for per_slot, kernel, at in ((True, "_SCAN", 8), (False, "_GRID", 3)):
        for cap, batch in ((None, 1000), (1, 1000), (2, 1000), (None, 3)):
            with monkeypatch.context() as patch:
                patch.setattr(conjunctions, "HOST_BATCH", batch)  # (1000: one call a run)
                calls = _spy(patch, kernel)
                got = conjunctions.broad_phase(np.concatenate((pos, vel), axis=2), dt,
                                               K_EARTH, threshold, cap=cap, per_slot=per_slot)
            for a, b in zip(got[:3], expected[:3]):
                np.testing.assert_array_equal(a, b)
                assert a.dtype == np.int64
            counts.add(got[3:])
            if batch == 3:
                continue
            # a second call: the rows that overflowed, with room for all of theirs
            assert len(calls) in (1, 2)
            again[per_slot, cap] = len(calls) - 1
            if len(calls) == 2:
                pairs, rows = (conjunctions.active.to_host(a) for a in calls[1][at:at + 2])
                room = cap or (conjunctions.SLOT_CAP if per_slot
                               else conjunctions.window_cap(pos.shape[0]))
                assert pairs.shape[1] == rows[:, 0].max() > room
    (grid, overlapping), = counts
    assert grid >= overlapping >= len(expected[0])
    return expected[:3], (grid, overlapping), again


def test_both_forms_equal_the_one_kernel_per_window_on_real_debris(simulated, monkeypatch):
    """Three real debris clouds (30 s windows, a threshold wide enough for candidates that
    share a slot): the two kernels (one object per window, then per (window, slot)) and
    the host targets' one kernel give the reference's candidates and counts exactly."""
    # (the simulator: 24 objects, 5 windows, a thread per (window, slot))
    n_each, windows, threshold = (8, 5, 2000.0) if simulated else (100, 20, 150.0)
    r, v = _debris_mix(n_each)
    n = len(r)
    times = np.linspace(0.0, 30.0 * windows, windows + 1)
    pos, vel = conjunctions.sample_cloud(K_EARTH, r, v, times, two_body_j2,
                                         np.zeros((n, 0)), 1e-11, 1e-12)
    (i, _, _), (grid, overlapping), again = _same_as_the_reference(pos, vel, 30.0, threshold,
                                                                  monkeypatch)
    assert len(i) > 10 and grid >= overlapping >= len(i)  # not vacuous
    # rows of one candidate a slot overflow here: run again, none lost
    assert again[True, 1] == 1


def test_the_candidates_are_every_pair_through_the_chord_test_on_real_debris(simulated):
    """On real debris of three clouds, both forms' candidates are exactly the (window,
    pair)s of all N (N - 1) / 2 pairs that the chord test keeps (numpy, every pair: the
    grid and the boxes' overlap lose none and add none), and they hold every (window,
    pair) whose distance, sampled every second, comes within the threshold."""
    n_each, windows, threshold = (6, 3, 300.0) if simulated else (100, 20, 100.0)
    r, v = _debris_mix(n_each)
    n, dt = len(r), 30.0
    times = np.linspace(0.0, dt * windows, windows * 30 + 1)  # every second
    pos, vel = conjunctions.sample_cloud(K_EARTH, r, v, times, two_body_j2,
                                         np.zeros((n, 0)), 1e-11, 1e-12)
    coarse_p, coarse_v = pos[:, ::30], vel[:, ::30]
    m = conjunctions._chord_margin(K_EARTH, coarse_p[:, :-1], coarse_p[:, 1:],
                                   coarse_v[:, :-1], coarse_v[:, 1:], dt)
    i, j = np.triu_indices(n, 1)
    every = set()
    near = set()
    for w in range(windows):
        keep = conjunctions.chord_candidates(coarse_p[i, w], coarse_p[i, w + 1],
                                             coarse_p[j, w], coarse_p[j, w + 1], m[i, w],
                                             m[j, w], threshold)
        every |= {(w, a, b) for a, b in zip(i[keep].tolist(), j[keep].tolist())}
        # the distance at every second of the window
        d = np.linalg.norm(pos[i, 30 * w:30 * w + 31] - pos[j, 30 * w:30 * w + 31], axis=2)
        close = d.min(axis=1) < threshold
        near |= {(w, a, b) for a, b in zip(i[close].tolist(), j[close].tolist())}
    assert len(near) >= 5 and len(every) >= len(near)  # not vacuous
    for per_slot in (True, False):
        got = conjunctions.broad_phase(np.concatenate((coarse_p, coarse_v), axis=2), dt,
                                       K_EARTH, threshold, per_slot=per_slot)
        found = set(zip(got[2].tolist(), got[0].tolist(), got[1].tolist()))
        assert found == every
        assert near <= found


def test_the_per_window_arrays_made_per_object_are_the_one_thread_per_windows(simulated):
    """`_sorted_windows` (kernels per (window, object) and (window, entry) and the
    target's `row_max`, `row_offsets` and `bucket_sort`) gives `_sort_window`'s numbers on
    real debris: the margins, boxes and hash-slot starts bit for bit, and in each hash
    slot the same entries (cell keys, objects and home bits; their order there is the
    target's); past each window's entries, its row is filled with key -1 in an extra
    last slot."""
    n_each, windows = (6, 3) if simulated else (60, 8)
    r, v = _debris_mix(n_each)
    n = len(r)
    times = np.linspace(0.0, 30.0 * windows, windows + 1)
    states = conjunctions.sample_states(K_EARTH, r, v, times, two_body_j2, np.zeros((n, 0)),
                                        1e-11, 1e-12)
    size = conjunctions.table_size(n)
    conf = np.array([30.0, K_EARTH, 150.0, size])
    made = [conjunctions.active.to_host(a) for a in conjunctions._sorted_windows(
        conjunctions.active.to_device(states), conf, conjunctions.Items(), windows, n, size)]
    margin, box, sorted_keys, sorted_entries, starts = made
    row = sorted_keys.shape[1]
    assert starts.shape == (windows, size + 2)
    # the one thread per window: `_sort_window` as a kernel of one object per window
    one_per_window = ObjectKernel(conjunctions._sort_window, [
        Arg("window", np.int64, ("one",)), *conjunctions._SAMPLES,
        *(Arg(name, dtype, core, output=True)
          for name, dtype, core in conjunctions._WINDOW_ARRAYS)])
    sizes = {"n": n, "eight": 8, "e": conjunctions.CELLS * n, "h1": size + 1}
    expected = [np.empty((windows, *(sizes[d] for d in core)), dtype)
                for _, dtype, core in conjunctions._WINDOW_ARRAYS]
    one_per_window(np.arange(windows).reshape(-1, 1), states, conf, *expected)
    assert row == expected[4][:, size].max()  # as long as the longest window's entries
    for w in range(windows):
        rows = [a[w] for a in expected]
        np.testing.assert_array_equal(margin[w], rows[0])
        np.testing.assert_array_equal(box[w], rows[1])
        np.testing.assert_array_equal(starts[w, :size + 1], rows[4])
        total = rows[4][size]
        assert starts[w, size + 1] == row
        assert (sorted_keys[w, total:] == -1).all()
        for h in np.flatnonzero(np.diff(rows[4])):
            here = slice(rows[4][h], rows[4][h + 1])
            mine = np.lexsort((sorted_entries[w, here], sorted_keys[w, here]))
            theirs = np.lexsort((rows[3][here], rows[2][here]))
            np.testing.assert_array_equal(sorted_keys[w, here][mine], rows[2][here][theirs])
            np.testing.assert_array_equal(sorted_entries[w, here][mine],
                                          rows[3][here][theirs])
    assert (np.diff(starts[:, :size + 1], axis=1) > 1).any()  # a slot holds several entries
    # every object in at least one cell, some in several
    entries = np.concatenate([expected[3][w, :expected[4][w, size]] for w in range(windows)])
    objects = np.bincount(entries // conjunctions.CELLS, minlength=n)
    assert objects.min() >= windows and objects.max() > windows


def cluster(tca, a, count, miss, seed):
    """``count`` objects on circular orbits of radius ``a`` in as many planes through one
    node, each within ``miss / 2`` km of it at ``tca`` (every pair within ``miss``), all
    integrated back to t = 0 under `two_body_j2`."""
    rng = np.random.default_rng(seed)
    r, v = [], []
    for q in range(count):
        r_q, v_q = circular(a, 0.3 + 2.2 * q / count, 0.7)
        offset = rng.normal(size=3)
        r.append(r_q + 0.5 * miss * rng.uniform(0.2, 1.0) * offset / np.linalg.norm(offset))
        v.append(v_q)
    res = cowell(k, np.array(r), np.array(v), [-tca], f=two_body_j2)
    return res.rr[:, 0], res.vv[:, 0]


def test_a_cluster_overflows_the_rows_and_loses_no_pair(simulated, monkeypatch):
    """Eight objects pass within 3 km of one point at once (28 pairs, each within 3 km),
    among background objects: the entries and windows that hold them overflow rows of
    one and two candidates and run again; both forms equal the reference, every pair of
    the cluster is a candidate of the meeting's window, and the screen reports each
    pair."""
    tca, span, threshold, count = 812.5, 1200.0, 5.0, 8
    r, v = cluster(tca, 7050.0, count, 3.0, seed=2)
    back_r, back_v = background(6 if simulated else 40, seed=4)
    r, v = np.concatenate((r, back_r)), np.concatenate((v, back_v))
    n, dt = len(r), 30.0
    times = np.linspace(0.0, span, int(span / dt) + 1)
    pos, vel = conjunctions.sample_cloud(K_EARTH, r, v, times, two_body_j2,
                                         np.zeros((n, 0)), 1e-11, 1e-12)
    (i, j, w), _, again = _same_as_the_reference(pos, vel, dt, threshold, monkeypatch)
    meeting = {(a, b) for a, b, c in zip(i.tolist(), j.tolist(), w.tolist())
               if c == int(tca // dt)}
    pairs = {(a, b) for a in range(count) for b in range(a + 1, count)}
    assert pairs <= meeting
    # an entry's row of one, and of two, overflows (an entry with 3+ partners after it
    # in its cell, at their home cell); a window's row of two too
    assert again[True, 1] == again[True, 2] == again[False, 1] == again[False, 2] == 1
    table = screen(k, r, v, (0.0, span), threshold)
    found = {(a, b) for a, b, t, m in zip(table.i.tolist(), table.j.tolist(), table.tca,
                                          table.miss) if abs(t - tca) < 1.0 and m < 3.0}
    assert found == pairs


def test_the_per_window_arrays_stay_in_the_targets_memory(monkeypatch):
    """Two kernels: what the second reads of the first (and the positions) is in the
    target's memory (on cuda device arrays, the same objects the first wrote; on the host
    targets numpy arrays), and so are the second kernel's results, which are compacted
    there (`compact_rows`: on cuda only the candidates come to the host)."""
    r, v = background(6, seed=3)
    times = np.linspace(0.0, 90.0, 4)
    states = conjunctions.sample_states(K_EARTH, r, v, times, two_body_j2,
                                        np.zeros((6, 0)), 1e-11, 1e-12)
    made, scans = [], _spy(monkeypatch, "_SCAN")
    sorted_windows = conjunctions._sorted_windows

    def spy_windows(*arguments):
        made.append((arguments, sorted_windows(*arguments)))
        return made[-1][1]

    monkeypatch.setattr(conjunctions, "_sorted_windows", spy_windows)
    compacted = []
    compact_rows = conjunctions.active.compact_rows

    def spy(pairs, counts):
        compacted.append((pairs, counts))
        return compact_rows(pairs, counts)

    monkeypatch.setattr(conjunctions.active, "compact_rows", spy)
    conjunctions.broad_phase(states, 30.0, K_EARTH, 500.0, per_slot=True)
    ((arguments, windows),), (scan,) = made, scans
    own = conjunctions.active.device_memory() is not None
    # the states, the items, the per-window arrays
    for array in (arguments[0], arguments[2].column, *windows, scan[0], scan[1], *scan[3:8]):
        assert isinstance(array, np.ndarray) != own
    assert scan[1] is arguments[0] and all(a is b for a, b in zip(scan[3:8], windows))
    assert all(isinstance(a, np.ndarray) != own for a in scan[8:])  # the results
    assert compacted[0][0] is scan[8] and compacted[0][1] is scan[9]  # compacted there


def test_samples_stay_in_the_targets_memory_and_rows_are_gathered_there():
    """`sample_states` with ``on_device`` (as `screen` asks on cuda) gives the same numbers
    as on the host, in the target's own memory where it has one; `take_states` gathers
    the same rows from either."""
    r, v = background(5, seed=6)
    times = np.linspace(0.0, 60.0, 3)
    rows = np.zeros((5, 0))
    host = conjunctions.sample_states(K_EARTH, r, v, times, two_body_j2, rows, 1e-11, 1e-12)
    there = conjunctions.sample_states(K_EARTH, r, v, times, two_body_j2, rows, 1e-11, 1e-12,
                                       on_device=True)
    own = conjunctions.active.device_memory() is not None
    assert isinstance(host, np.ndarray) and conjunctions.in_target_memory(there) == own
    np.testing.assert_array_equal(conjunctions.active.to_host(there), host)
    objects, samples = np.array([4, 0, 2, 2]), np.array([0, 2, 1, 2])
    for states in (host, there):
        got = conjunctions.take_states(states, objects, samples)
        assert isinstance(got, np.ndarray) and got.shape == (4, 6)
        np.testing.assert_array_equal(got, host[objects, samples])
    assert conjunctions.take_states(there, [], []).shape == (0, 6)
    last = conjunctions.take_states(there, np.arange(5), 2)  # a sample for all: broadcast
    np.testing.assert_array_equal(last, host[:, 2])


def test_samples_go_to_one_buffer_chunk_after_chunk(monkeypatch):
    """`sample_states` with a ``buffer`` writes the same numbers to its start and returns
    them as a view of it; `screen` on the host targets samples every chunk into one
    buffer and keeps the broad phase's working rows (their pages faulted in once), with
    the table of fresh arrays bit for bit."""
    r, v = background(5, seed=6)
    times = np.linspace(0.0, 60.0, 3)
    rows = np.zeros((5, 0))
    fresh = conjunctions.sample_states(K_EARTH, r, v, times, two_body_j2, rows, 1e-11, 1e-12)
    buffer = np.full(5 * 4 * 6, np.nan)
    got = conjunctions.sample_states(K_EARTH, r, v, times, two_body_j2, rows, 1e-11, 1e-12,
                                     buffer=buffer)
    assert got.shape == (5, 3, 6) and np.shares_memory(got, buffer)
    np.testing.assert_array_equal(got, fresh)
    assert np.all(np.isnan(buffer[5 * 3 * 6:]))  # its start only
    with pytest.raises(ValueError, match=r"buffer: expected a host array of at least 90 "
                                         r"numbers \(5 objects x 3 times x 6\), got 60"):
        conjunctions.sample_states(K_EARTH, r, v, times, two_body_j2, rows, 1e-11, 1e-12,
                                   buffer=np.empty(60))
    with pytest.raises(ValueError, match="buffer: not with on_device"):
        conjunctions.sample_states(K_EARTH, r, v, times, two_body_j2, rows, 1e-11, 1e-12,
                                   on_device=True, buffer=buffer)
    for q, (tca, miss) in enumerate(PLANTED[:2]):
        pair_r, pair_v = planted_pair(tca, miss, 6900 + 150 * q, 0.5 + 0.1 * q, 1.3, 0.9 * q)
        r, v = np.concatenate((r, pair_r)), np.concatenate((v, pair_v))
    original, buffers = conjunctions.sample_states, []
    grid, works, rows = conjunctions.broad_phase, [], []

    def sampling(*args, buffer=None, **kwargs):
        buffers.append(buffer)
        return original(*args, buffer=buffer, **kwargs)

    def broad(*args, work=None, **kwargs):
        works.append(work)
        found = grid(*args, work=work, **kwargs)
        rows.append([id(a) for kept in work.values() for a in kept])
        return found

    monkeypatch.setattr(conjunctions, "sample_states", sampling)
    monkeypatch.setattr(conjunctions, "broad_phase", broad)
    chunked = screen(k, r, v, (0.0, 3600.0), 5.0, chunk=7)
    assert len(buffers) > 2 and all(b is buffers[0] for b in buffers)
    assert (buffers[0] is None) == conjunctions.two_kernels()
    assert len(works) == len(buffers) and all(w is works[0] for w in works)
    if not conjunctions.two_kernels():  # one set of rows, made at the first chunk
        assert len(works[0]) == 1 and all(ids == rows[0] for ids in rows)
    monkeypatch.setattr(conjunctions, "sample_states",
                        lambda *args, buffer=None, **kwargs: original(*args, **kwargs))
    monkeypatch.setattr(conjunctions, "broad_phase",
                        lambda *args, work=None, **kwargs: grid(*args, **kwargs))
    fresh = screen(k, r, v, (0.0, 3600.0), 5.0, chunk=7)
    assert len(fresh) == len(chunked) == 2
    for column in fresh.columns:
        assert getattr(fresh, column).tobytes() == getattr(chunked, column).tobytes()


def test_the_default_chunk_follows_the_targets_memory(monkeypatch):
    active = conjunctions.active
    monkeypatch.setattr(active, "device_memory", lambda: None)
    assert conjunctions.default_chunk(20000) == 100  # 2e6 object-windows
    assert not conjunctions.two_kernels()
    monkeypatch.setattr(active, "device_memory", lambda: (140e9, 140e9))
    assert conjunctions.default_chunk(20000) == 2000  # 4e7
    assert conjunctions.two_kernels()
    # a quarter of the free memory at DEVICE_BYTES an object-window
    monkeypatch.setattr(active, "device_memory", lambda: (4 * 512 * 2e6, 80e9))
    assert conjunctions.DEVICE_BYTES == 512 and conjunctions.default_chunk(20000) == 100


def test_real_debris_equal_brute_force(simulated):
    # simulated: one approach among 16 objects in five minutes (40 objects took 15 min there)
    n, span, threshold = (16, 300.0, 1000.0) if simulated else (1000, 1800.0, 10.0)
    r, v = _catalog(n)
    stats = {}
    table = screen(k, r, v, (0.0, span), threshold, stats=stats)
    brute, flagged = _brute_force(r, v, span, threshold, stats["dt"], 1e-11, 1e-12)
    assert len(table) > 0 and flagged > 0  # not vacuous
    assert np.all(table.miss < threshold) and np.all(table.i < table.j)
    for column in ConjunctionTable.columns:
        np.testing.assert_array_equal(table[column], brute[column])


def test_a_catalog_given_twice_or_thrice_has_its_approaches_once(simulated):
    """Review finding: an entry given twice gave 240 rows of miss 0 over an hour (events at
    the refinement's steps), three copies of a catalog 11,538 rows for its 2 approaches,
    without a word (here, half an hour: 123 rows, and 10,818 for three copies). Each
    group of identical objects is screened once, as its first row, the others named by a
    warning: the table is the catalog's without copies, bit for bit."""
    if simulated:  # the simulator is slow: two planted objects, one approach
        r, v = planted_pair(300.0, 1.0, 7000.0, 0.3, 1.2, 0.4)
        span, threshold, pairs = 600.0, 5.0, {(0, 1)}
    else:  # 30 Fengyun-1C fragments: two approaches within 100 km in half an hour
        r, v = _catalog(30)
        span, threshold, pairs = 1800.0, 100.0, {(6, 11), (22, 26)}
    n = len(r)
    base = screen(k, r, v, (0.0, span), threshold)
    assert set(zip(base.i.tolist(), base.j.tolist())) == pairs

    def same_as_base(table):
        for column in ConjunctionTable.columns:
            np.testing.assert_array_equal(table[column], base[column])

    tail = ("each group is screened once, as its first row, and its approaches are "
            "reported under that row only")
    head = ("r0, v0: {} object(s) repeat an earlier object's state (within the tolerances "
            "rtol, atol: one entry given twice?): ")
    # an object of an approach given again after the catalog (row n)
    again = min(pairs)[0]
    rows = np.r_[np.arange(n), again]
    stats = {}
    with pytest.warns(conjunctions.IdenticalObjectsWarning) as caught:
        table = screen(k, r[rows], v[rows], (0.0, span), threshold, stats=stats)
    assert [str(w.message) for w in caught] == [head.format(1) + f"row {n} = row {again}; "
                                                + tail]
    same_as_base(table)
    np.testing.assert_array_equal(stats["identical"], [[n, again]])
    # a copy one unit in the last place off (a unit conversion's rounding) is one object:
    # screened as two, they gave 10 rows of miss 1e-12 to 2e-12 km (Fengyun-1C's row 6)
    r_ulp = r[rows]
    r_ulp[n] = np.nextafter(r_ulp[n], np.inf)
    with pytest.warns(conjunctions.IdenticalObjectsWarning, match=f"row {n} = row {again};"):
        same_as_base(screen(k, r_ulp, v[rows], (0.0, span), threshold))
    # three copies of the catalog
    with pytest.warns(conjunctions.IdenticalObjectsWarning) as caught:
        table = screen(k, np.tile(r, (3, 1)), np.tile(v, (3, 1)), (0.0, span), threshold,
                       stats=stats)
    groups = "; ".join(f"rows {x + n}, {x + 2 * n} = row {x}" for x in range(min(n, 5)))
    more = f"; and {n - 5} more groups" if n > 5 else ""
    assert [str(w.message) for w in caught] == [head.format(2 * n) + groups + more + "; "
                                                + tail]
    same_as_base(table)
    copies = np.arange(n, 3 * n)
    np.testing.assert_array_equal(stats["identical"], np.column_stack((copies, copies % n)))
    # one object under two force models is refused, naming the rows
    with pytest.raises(ValueError, match=rf"params: rows {again} and {n} have the same state "
                                         r"\(r0, v0 within the tolerances rtol, atol\) but "
                                         r"different params rows \(1 such row\(s\)\)"):
        screen(k, r[rows], v[rows], (0.0, span), threshold, params=np.arange(n + 1.0)[:, None])


def test_the_refinement_reports_no_minimum_at_the_start_or_between_copies():
    """Two copies of one object have a range rate of 0 throughout: the solver reported its
    'crossings' at its steps (0, 0.043, 0.42, 4.2 s, ...), none a minimum. Nor is an event
    at the span's start one: two objects with the same velocity, 7 km apart radially,
    separate from t0 (it was reported at t0, miss 7 km)."""
    r, v = circular(7000.0, 0.3, 0.4)
    r, v = r[None], v[None]
    i, j, rows = np.array([0]), np.array([1]), np.zeros((2, 0))
    for r_j in (r, r * (1 + 1e-3)):
        found = conjunctions.refine(k, two_body_j2, rows, r, v, r_j, v, i, j, [0.0], [60.0],
                                    10.0, 1e-11, 1e-12)
        assert [len(column) for column in found] == [0] * 5
    # the same objects from 30 s on: the minimum at 30 s is no longer at the start
    back = cowell(k, np.concatenate((r, r * (1 + 1e-3))), np.concatenate((v, v)), [-30.0] * u.s,
                  f=two_body_j2)
    rr, vv = back.rr[:, 0].to_value(u.km), back.vv[:, 0].to_value(u.km / u.s)
    found = conjunctions.refine(k, two_body_j2, rows, rr[:1], vv[:1], rr[1:], vv[1:], i, j,
                                [0.0], [60.0], 10.0, 1e-11, 1e-12)
    assert len(found[2]) == 1 and abs(found[2][0] - 30.0) < 1e-3
    assert abs(found[3][0] - 7.0) < 1e-6

def test_table_columns_csv_and_errors(tmp_path):
    table = ConjunctionTable([3, 0], [5, 1], [20.0, 10.0], [1.5, 0.25], [7.0, 3.0])
    assert len(table) == 2 and list(table.i) == [0, 3] and list(table["tca"]) == [10.0, 20.0]
    table.to_csv(tmp_path / "t.csv")
    back = np.loadtxt(tmp_path / "t.csv", delimiter=",", skiprows=1)
    np.testing.assert_array_equal(back[:, 3], [0.25, 1.5])
    with pytest.raises(KeyError, match="'distance': not a column"):
        table["distance"]
    r, v = planted_pair(500.0, 1.0, 7000.0, 0.3, 1.2, 0.4)
    with pytest.raises(ValueError, match="threshold"):
        screen(k, r, v, (0.0, 10.0), -1.0)
    with pytest.raises(ValueError, match="t_span"):
        screen(k, r, v, (10.0, 0.0), 1.0)
    with pytest.raises(ValueError, match="r0, v0: screening needs"):
        screen(k, r[0], v[0], (0.0, 10.0), 1.0)
    with pytest.raises(ValueError, match="threshold"):
        screen(k, r, v, (0.0, 10.0), 1.0 * u.s)
    for chunk in (0, -1, 2.5, True):  # windows per chunk: a count, refused before any work
        with pytest.raises(ValueError, match=f"chunk: expected an integer from 1 to .*, "
                                             f"got {chunk!r}"):
            screen(k, r, v, (0.0, 10.0), 1.0, chunk=chunk)


# --- the broad phase as it was, one kernel object per window (a uniform 3-D grid, each
# object in the cell of its box's centre, pairs with the 13 neighbour cells after it, a
# radius test, the chord test): the reference whose candidates both forms of
# conjunctions.broad_phase (the per-(window, entry) kernels and the host targets' one
# kernel per window, a grid of 4-D cells) must equal, bit for bit. Its own copies of the
# helpers it used then, frozen.

_BITS = 21
_HALF = 1 << (_BITS - 1)
_MASK = (1 << _BITS) - 1
_CELL_SLACK = 1.0 + 1e-6
_RADIUS_PAD = 1e-12


@hjit
def _arc_margin(k, dt, x0, y0, z0, x1, y1, z1, dvx, dvy, dvz):
    r_low = RADIUS_FRACTION * min(math.sqrt(x0 * x0 + y0 * y0 + z0 * z0),
                                  math.sqrt(x1 * x1 + y1 * y1 + z1 * z1))
    a_max = max((1.0 + PERTURBATION_FRACTION) * k / (r_low * r_low),
                2.0 * math.sqrt(dvx * dvx + dvy * dvy + dvz * dvz) / dt)
    return dt * dt / 8.0 * a_max


@hjit
def _cell_coordinate(x, cell):
    c = int(math.floor(x / cell)) + _HALF  # noqa: RUF046
    return min(max(c, 0), _MASK)


@hjit
def _bucket(cx, cy, cz, size):
    return ((cx * 73856093) ^ (cy * 19349663) ^ (cz * 83492791)) & (size - 1)


@hjit
def _radius_low(x0, y0, z0, x1, y1, z1):
    """The chord's distance from the centre."""
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
def _chord_close(pos, a, b, o, q, limit):
    """`conjunctions._chord_close` as it was, on time-major positions ``(M, N, 3)``."""
    d0x = pos[a, o, 0] - pos[a, q, 0]
    d0y = pos[a, o, 1] - pos[a, q, 1]
    d0z = pos[a, o, 2] - pos[a, q, 2]
    ex = (pos[b, o, 0] - pos[b, q, 0]) - d0x
    ey = (pos[b, o, 1] - pos[b, q, 1]) - d0y
    ez = (pos[b, o, 2] - pos[b, q, 2]) - d0z
    ee = ex * ex + ey * ey + ez * ez
    s = -(d0x * ex + d0y * ey + d0z * ez) / (ee if ee > 0 else 1.0)
    s = min(max(s, 0.0), 1.0)
    cx = d0x + s * ex
    cy = d0y + s * ey
    cz = d0z + s * ez
    return cx * cx + cy * cy + cz * cz <= limit * limit


@hjit
def _grid_window(window, pos, vel, conf, pairs, counts, margin, radius, keys, sorted_keys,
                 order, starts):
    """The broad phase of one window: its candidate pairs in ``pairs`` (rows ``i, j``,
    ``i < j``), ``counts = (candidates, grid pairs, pairs through the radius test)``;
    candidates past ``pairs``' rows are counted, not written. ``margin``, ``radius``
    (low, high by object, then by slot order), ``keys`` (by object), ``sorted_keys``
    (by slot order), ``order``, ``starts``: working rows (N, (N, 4), N, N, N, table
    size + 1)."""
    a = window[0]
    b = a + 1
    dt = conf[0]
    k = conf[1]
    threshold = conf[2]
    n = pos.shape[1]
    size = starts.shape[0] - 1
    cap = pairs.shape[0]
    # the widest box of the window: the grid's cell; each object's radius interval
    widest = 0.0
    for o in range(n):
        m = _arc_margin(k, dt, pos[a, o, 0], pos[a, o, 1], pos[a, o, 2],
                        pos[b, o, 0], pos[b, o, 1], pos[b, o, 2],
                        vel[b, o, 0] - vel[a, o, 0], vel[b, o, 1] - vel[a, o, 1],
                        vel[b, o, 2] - vel[a, o, 2])
        margin[o] = m
        for axis in range(3):
            widest = max(widest, abs(pos[b, o, axis] - pos[a, o, axis]) + 2.0 * m)
        radius[o, 0] = _radius_low(pos[a, o, 0], pos[a, o, 1], pos[a, o, 2],
                                   pos[b, o, 0], pos[b, o, 1], pos[b, o, 2]) - m
        radius[o, 1] = max(
            math.sqrt(pos[a, o, 0] ** 2 + pos[a, o, 1] ** 2 + pos[a, o, 2] ** 2),
            math.sqrt(pos[b, o, 0] ** 2 + pos[b, o, 1] ** 2 + pos[b, o, 2] ** 2)) + m
    cell = (widest + threshold) * _CELL_SLACK
    # counting sort of the objects by the hash slot of their centre's cell
    for h in range(size + 1):
        starts[h] = 0
    for o in range(n):
        cx = _cell_coordinate(0.5 * (pos[a, o, 0] + pos[b, o, 0]), cell)
        cy = _cell_coordinate(0.5 * (pos[a, o, 1] + pos[b, o, 1]), cell)
        cz = _cell_coordinate(0.5 * (pos[a, o, 2] + pos[b, o, 2]), cell)
        keys[o] = (cx << (2 * _BITS)) | (cy << _BITS) | cz
        starts[_bucket(cx, cy, cz, size) + 1] += 1
    for h in range(1, size + 1):
        starts[h] += starts[h - 1]
    for o in range(n):
        key = keys[o]
        h = _bucket(key >> (2 * _BITS), (key >> _BITS) & _MASK, key & _MASK, size)
        slot = starts[h]
        order[slot] = o
        # what the pair loop reads of each object, in slot order: the scan of a slot
        # reads consecutive memory, and only pairs through the radius test read pos
        sorted_keys[slot] = key
        radius[slot, 2] = radius[o, 0]
        radius[slot, 3] = radius[o, 1]
        starts[h] += 1
    # each slot's count was moved one slot down by the filling: shift back
    for h in range(size, 0, -1):
        starts[h] = starts[h - 1]
    starts[0] = 0
    found = 0
    formed = 0
    thin = 0
    for here in range(n):
        o = order[here]
        key = sorted_keys[here]
        cx = key >> (2 * _BITS)
        cy = (key >> _BITS) & _MASK
        cz = key & _MASK
        low = radius[here, 2]
        high = radius[here, 3]
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
                gap = max(radius[slot, 2] - high, low - radius[slot, 3])
                if gap > threshold + _RADIUS_PAD * max(high, radius[slot, 3]):
                    continue
                thin += 1
                q = order[slot]
                if _chord_close(pos, a, b, o, q, threshold + margin[o] + margin[q]):
                    if found < cap:
                        pairs[found, 0] = min(o, q)
                        pairs[found, 1] = max(o, q)
                    found += 1
    counts[0] = found
    counts[1] = formed
    counts[2] = thin


_ONE_PER_WINDOW = ObjectKernel(_grid_window, [
    Arg("window", np.int64, ("one",)),
    Arg("pos", np.float64, ("m", "n", "three"), per_object=False),
    Arg("vel", np.float64, ("m", "n", "three"), per_object=False),
    Arg("conf", np.float64, ("c",), per_object=False),
    Arg("pairs", np.int64, ("cap", "two"), output=True),
    Arg("counts", np.int64, ("three",), output=True),
    Arg("margin", np.float64, ("n",), scratch=True),
    Arg("radius", np.float64, ("n", "four"), scratch=True),
    Arg("keys", np.int64, ("n",), scratch=True),
    Arg("sorted_keys", np.int64, ("n",), scratch=True),
    Arg("order", np.int64, ("n",), scratch=True),
    Arg("starts", np.int64, ("h1",), scratch=True),
])


def reference_broad_phase(pos, vel, dt, k, threshold, cap=16):
    """`conjunctions.broad_phase` as it was before its two kernels (one kernel object per
    window, which sorted and scanned it; GPU commit d8955b0): candidate (object i, object
    j, window w) of one chunk of samples.

    ``pos``, ``vel``: ``(N, W + 1, 3)``, samples ``dt`` apart. Returns ``i``, ``j``,
    ``w`` (``i < j``), each (pair, window) once, sorted by ``(w, i, j)``, the number
    of pairs the grid formed and the number of those that passed the radius test (and
    were chord-tested). ``cap``: candidates per window
    the first kernel call keeps room for; windows with more are run again with room
    for all of theirs.
    """
    n, m = pos.shape[:2]
    windows = m - 1
    # time-major, so that a window reads two contiguous (N, 3) blocks
    pos_t = np.ascontiguousarray(np.moveaxis(pos, 1, 0), dtype=np.float64)
    vel_t = np.ascontiguousarray(np.moveaxis(vel, 1, 0), dtype=np.float64)
    size = 1 << max(1, (2 * n - 1).bit_length())  # a power of two >= 2 N: short slots
    conf = np.array([dt, k, threshold], dtype=np.float64)

    def run(which, cap):
        count = len(which)
        pairs = np.empty((count, cap, 2), dtype=np.int64)
        counts = np.zeros((count, 3), dtype=np.int64)
        _ONE_PER_WINDOW(which[:, None], pos_t, vel_t, conf, pairs, counts,
              np.empty((count, n)), np.empty((count, n, 4)),
              np.empty((count, n), dtype=np.int64), np.empty((count, n), dtype=np.int64),
              np.empty((count, n), dtype=np.int64),
              np.empty((count, size + 1), dtype=np.int64))
        return pairs, counts

    which = np.arange(windows, dtype=np.int64)
    pairs, counts = run(which, cap)
    found = counts[:, 0]
    i, j, w = [], [], []
    full = found <= cap
    kept = np.arange(cap)[None, :] < found[:, None]
    kept &= full[:, None]
    i.append(pairs[..., 0][kept])
    j.append(pairs[..., 1][kept])
    w.append(np.broadcast_to(which[:, None], kept.shape)[kept])
    if not np.all(full):
        # the windows whose rows overflowed, again, with room for every candidate
        again = which[~full]
        more, more_counts = run(again, int(found.max()))
        kept = np.arange(more.shape[1])[None, :] < more_counts[:, 0][:, None]
        i.append(more[..., 0][kept])
        j.append(more[..., 1][kept])
        w.append(np.broadcast_to(again[:, None], kept.shape)[kept])
    i, j, w = np.concatenate(i), np.concatenate(j), np.concatenate(w)
    unique = np.unique((w * n + i) * n + j)
    w, rest = np.divmod(unique, n * n)
    i, j = np.divmod(rest, n)
    return i, j, w, int(counts[:, 1].sum()), int(counts[:, 2].sum())


SCREEN_SCRIPT = """
import sys
sys.setswitchinterval(5e-5)  # for the CUDA simulator's threads (tests/conftest.py)
import numpy as np
from hapsira_cowell.constants import K_EARTH
from hapsira_cowell.propagation import conjunctions

states = np.load(sys.argv[1])
n = len(states["r"])
needs = conjunctions.kernels(conjunctions.two_body_j2, conjunctions._rows(None, n).shape[1], n)
print(all(need.runs().on_disk() for need in needs))
table = conjunctions.screen(K_EARTH, states["r"], states["v"], (0.0, 3600.0), 5.0)
print(repr([table.i.tolist(), table.j.tolist(), table.tca.tolist(), table.miss.tolist()]))
print(all(need.runs().on_disk() for need in needs))
"""


def test_a_cold_screen_compiles_its_kernels_side_by_side_with_the_same_rows(tmp_path):
    """A screen on an empty cache compiles its solver and broad-phase kernels in
    worker processes (`hapsira_core.ivp.prepare`); the next process loads them, and
    the rows are those of the screen compiled in one process (``HAPSIRA_CACHE=0``)."""
    import os
    import subprocess
    import sys

    from hapsira_core import settings

    simulated = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
    r, v = planted_pair(1234.5, 0.3, 7000.0, 0.6, 1.4, 0.3)
    rb, vb = background(3, 7)
    np.savez(tmp_path / "states.npz", r=np.concatenate((r, rb)), v=np.concatenate((v, vb)))

    def run(cache):
        env = dict(os.environ, HAPSIRA_CACHE=cache, HAPSIRA_CACHE_DIR=str(tmp_path / "cache"))
        done = subprocess.run([sys.executable, "-c", SCREEN_SCRIPT, str(tmp_path / "states.npz")],
                              env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        before, rows, after = done.stdout.strip().splitlines()[-3:]
        return before, eval(rows), after, done.stderr

    before, rows, after, stderr = run("1")
    assert rows[0] == [0] and rows[1] == [1] and abs(rows[2][0] - 1234.5) < 1e-3
    if not simulated:  # (the simulator compiles nothing, and caches nothing to load)
        assert (before, after) == ("False", "True")
        # two solvers and the broad phase; on a GPU the broad phase is five kernels and
        # the gather of sampled states one more
        kernels = 8 if settings.TARGET == "cuda" else 3
        assert f"compiling {kernels} kernels side by side" in stderr or os.cpu_count() < 2
        again, rows_again, _, stderr_again = run("1")
        assert again == "True" and "compiling" not in stderr_again
        assert rows_again == rows
    _, alone, _, stderr_alone = run("0")
    assert "side by side" not in stderr_alone
    assert alone == rows  # bit for bit
