"""`CowellResult` (`hapsira_cowell.propagation.results`): the core's shared fields, and
``res[i]`` object by object, each the single-object call of that orbit, on every front."""

import numpy as np
import pytest
from extras import need
from astropy import units as u
from astropy.time import Time
from reference import K_EARTH, R_EARTH, varied_orbits

from hapsira_core import settings
from hapsira_core.ivp import results as core
from hapsira_cowell import STATUS_MESSAGES, CowellResult, OrbitsResult, cowell
from hapsira_cowell.models.events import AltitudeCrossEvent, NodeCrossEvent
from hapsira_cowell.propagation.orbits import _with_epoch

SIM = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
# a terminal re-entry crossing and a node crossing recorded fewer times than it occurs
EVENTS = (AltitudeCrossEvent(350.0, R_EARTH), NodeCrossEvent())
TOFS = np.array([300.0, 1200.0]) if SIM else np.array([600.0, 3000.0, 9000.0])


def _cloud(seed):
    """Named orbits, one falling from 400 km (stopped by the 350 km event on its way
    down) and one NaN state."""
    states = varied_orbits(seed)
    names = ["leo", "sso", "eccentric"] if SIM else ["leo", "sso", "eccentric", "molniya", "geo"]
    r0 = [states[name][0] for name in names]
    v0 = [states[name][1] for name in names]
    r = R_EARTH + 400.0  # its apoapsis: perigee below the ground
    r0 += [[r, 0.0, 0.0], [np.nan, 0.0, 0.0]]
    v0 += [[0.0, 0.98 * np.sqrt(K_EARTH / r), 1.0], [0.0, 7.5, 0.0]]
    return np.array(r0), np.array(v0)


def _propagate(r0, v0, **options):
    return cowell(K_EARTH, r0, v0, TOFS, events=EVENTS, max_event_records=2, **options)


@pytest.fixture(scope="module")
def cloud():
    r0, v0 = _cloud(seed=11)
    return r0, v0, _propagate(r0, v0)


def test_each_object_is_its_own_call(cloud):
    r0, v0, res = cloud
    n = r0.shape[0]
    assert len(res) == n and set(res.status.tolist()) == {0, 1, -3}
    for i in range(n):
        obj, alone = res[i], _propagate(r0[i], v0[i])
        assert alone.single and alone.rr.shape == (TOFS.size, 3)
        for name in ("rr", "vv", "n_events"):
            np.testing.assert_array_equal(getattr(obj, name), getattr(alone, name),
                                          err_msg=name)
        assert (obj.status, obj.nfev, obj.nsteps) == (alone.status, alone.nfev, alone.nsteps)
        assert obj.message == STATUS_MESSAGES[obj.status] == alone.messages()
        for e, times in enumerate(obj.t_events):  # the recorded occurrences only
            assert times.shape == (min(int(alone.n_events[e]), 2),)
            np.testing.assert_array_equal(times, alone.t_events[e][:times.size])
    assert res[-2].status == 1 and res[-2].t_events[0].size == 1
    assert res[-1].status == -3 and np.isnan(res[-1].rr).all() and not res[-1].success


def test_shared_fields_are_the_cores():
    shared = {f.name: f for f in CowellResult.FIELDS}
    for field in (core.STATUS, core.T_EVENTS, core.N_EVENTS, core.NFEV, core.NSTEPS):
        assert shared[field.name] is field
        assert f"``{field.name}``: {field.doc}" in CowellResult.__doc__
    assert CowellResult.MESSAGES is STATUS_MESSAGES
    assert [f.name for f in OrbitsResult.FIELDS] == list(shared) + ["epoch"]


def test_quantities_and_matrices_per_object(cloud):
    r0, v0, _ = cloud
    res = _propagate(r0[:2] * u.km, v0[:2] * u.km / u.s, stm=True)
    assert res.rr.unit == u.km and res[1].rr.unit == u.km and res[1].t_events[1].unit == u.s
    assert res.stm.shape == (2, TOFS.size, 6, 6) and res[1].stm.shape == (TOFS.size, 6, 6)
    np.testing.assert_array_equal(res[1].stm, res.stm[1])
    # propagate_orbits' result: the same fields, the matrices kept, and its epoch
    epoch = Time("2026-01-01T00:00:00", scale="utc")
    orbits = _with_epoch(res, epoch)
    assert isinstance(orbits, OrbitsResult) and orbits.stm is res.stm
    assert orbits[0].epoch is epoch and repr(orbits).endswith(
        "epoch=2026-01-01T00:00:00.000 UTC)")


def test_dask_view_indexes_and_computes_the_same(cloud):
    dask = need("dask")
    da = need("dask.array")
    from hapsira_cowell.dask import DaskCowellResult

    r0, v0, res = cloud
    with dask.config.set(scheduler="synchronous"):
        lazy = _propagate(da.from_array(r0, chunks=3), v0)
        assert isinstance(lazy, DaskCowellResult) and lazy.FIELDS is CowellResult.FIELDS
        assert repr(lazy).startswith(f"DaskCowellResult(objects={len(res)}, chunks=")
        for i in (0, -2, -1):
            got, want = lazy[i], res[i]
            np.testing.assert_array_equal(got.rr, want.rr)
            assert (got.status, got.nfev, got.message) == (want.status, want.nfev,
                                                           want.message)
            assert [t.tolist() for t in got.t_events] == [t.tolist() for t in want.t_events]
        done = lazy.compute()
        assert type(done) is CowellResult and repr(done) == repr(res)
        for name, array in res.arrays().items():
            np.testing.assert_array_equal(done.arrays()[name], array, err_msg=name)
