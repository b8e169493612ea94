"""Conjunction screening (`hapsira_cowell.conjunctions.screen`): planted encounters found to
1e-3 s and 1 m, real debris equal to brute force, the table and the argument checks."""

import numpy as np
import pytest
from astropy import units as u
from reference import DATA_DIR

from hapsira_cowell import cowell, from_tle
from hapsira_cowell.conjunctions import ConjunctionTable, screen, two_body_j2
from hapsira_cowell.constants import K_EARTH
from hapsira_cowell.propagation import conjunctions

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


def test_planted_encounters_are_found_with_tca_to_a_millisecond_and_miss_to_a_metre():
    r, v = background(12, seed=1)
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
    # and the radius test drops most pairs the grid forms in this cloud
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
        i1, j1, w1, grid, chord = conjunctions.broad_phase(pos, vel, 30.0, k, threshold,
                                                           cap=cap)
        new = list(zip(w1.tolist(), i1.tolist(), j1.tolist()))
        assert len(set(new)) == len(new) and np.all(i1 < j1)
        assert old <= set(new)
        assert grid >= chord >= len(new)  # (strictly fewer: the across-shells test)
    # what the kernel adds passes the same chord and radius tests (nothing is made up)
    for test in (conjunctions.chord_candidates, conjunctions.radius_candidates):
        keep = test(pos[i1, w1], pos[i1, w1 + 1], pos[j1, w1], pos[j1, w1 + 1], m[i1, w1],
                    m[j1, w1], threshold)
        assert np.all(keep)


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
