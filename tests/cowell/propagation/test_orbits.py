"""Orbit objects in (hapsira_cowell.propagation.orbits): a duck-typed Orbit made of astropy
Quantities and Times, at one or at mixed epochs, against scipy; a real hapsira/poliastro Orbit when installed.

hapsira 0.18 does not import with astropy 8 (and poliastro is archived), so the stand-in
`FakeOrbit` is what tests the feature on every target: it has exactly the attributes that
hapsira's and poliastro's ``Orbit`` have and that ``states_from_orbits`` reads (``r``, ``v``
Quantities, ``attractor.k`` Quantity, ``epoch`` Time), nothing else."""

import math
import warnings

import numpy as np
import pytest
from astropy import units as u
from astropy.time import Time, TimeDelta

from hapsira_core import settings
from hapsira_cowell import cowell
from hapsira_cowell import CowellResult, OrbitsResult
from hapsira_cowell.inputs.elements import from_classical
from hapsira_cowell.inputs.tle import from_tle
from hapsira_cowell.propagation.orbits import propagate_orbits, states_from_orbits
from reference import DATA_DIR, K_EARTH, Reference, relative_error, two_body_rhs

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
EPOCH = Time("2025-02-15T12:00:00", scale="utc")


class Body:
    __slots__ = ("k",)

    def __init__(self, k):
        self.k = k


class NamedBody:
    """A body as hapsira's bodies are: k and a name (read only for error messages)."""

    __slots__ = ("k", "name")

    def __init__(self, k, name):
        self.k, self.name = k, name


class FakeOrbit:
    """What hapsira's and poliastro's Orbit offer us: r, v, attractor.k, epoch (their
    ``Orbit.r``, ``Orbit.v``, ``Orbit.attractor`` and ``Orbit.epoch`` properties, and
    ``Body.k``); __slots__: reading anything else fails."""

    __slots__ = ("r", "v", "epoch", "attractor")

    def __init__(self, r, v, epoch, k=K_EARTH * u.km ** 3 / u.s ** 2):
        self.r, self.v, self.epoch, self.attractor = r, v, epoch, Body(k)


def fake_orbits(count, seed=0, spread_s=0.0, scale="utc"):
    rng = np.random.default_rng(seed)
    r, v = from_classical(K_EARTH, rng.uniform(6800.0, 12000.0, count),
                          rng.uniform(0.0, 0.2, count), rng.uniform(0.1, 3.0, count),
                          *rng.uniform(0.0, 2 * math.pi, (3, count)))
    offsets = -rng.uniform(0.0, spread_s, count) if spread_s else np.zeros(count)
    offsets[0] = 0.0  # the latest epoch
    epochs = [getattr(EPOCH + TimeDelta(dt, format="sec"), scale) for dt in offsets]
    # GM, r and v in other units than the package's: converted
    return [FakeOrbit(ri * 1000 * u.m, vi * u.km / u.s, epoch,
                      k=K_EARTH * 1e9 * u.m ** 3 / u.s ** 2)
            for ri, vi, epoch in zip(r, v, epochs)], r, v, offsets


def test_one_epoch_gives_the_states_as_they_are():
    orbits, r, v, _ = fake_orbits(5)
    k, r0, v0, epoch = states_from_orbits(orbits)
    assert k == pytest.approx(K_EARTH, rel=1e-15)
    np.testing.assert_allclose(r0, r, rtol=1e-15)
    np.testing.assert_allclose(v0, v, rtol=1e-15)
    assert epoch == EPOCH
    # a single orbit, not in a list
    k, r1, v1, _ = states_from_orbits(orbits[2])
    np.testing.assert_allclose(r1, r[2:3], rtol=1e-15)


@pytest.mark.parametrize("scale", ["utc", "tdb"])
def test_mixed_epochs_are_brought_to_the_latest(scale):
    count = 3 if SIMULATED else 8
    orbits, r, v, offsets = fake_orbits(count, seed=1, spread_s=3 * 86400.0, scale=scale)
    k, r0, v0, epoch = states_from_orbits(orbits)
    assert abs((epoch - EPOCH).sec) < 1e-6
    for i in range(count):
        if offsets[i] == 0:
            np.testing.assert_allclose(r0[i], r[i], rtol=1e-15)
            continue
        ref = Reference(two_body_rhs(K_EARTH), r[i], v[i], np.array([-offsets[i]]))
        assert relative_error(r0[i:i + 1], ref.rr) < 1e-9
        assert relative_error(v0[i:i + 1], ref.vv) < 1e-9


def test_an_earlier_common_epoch_propagates_backward():
    orbits, r, v, offsets = fake_orbits(3, seed=2, spread_s=86400.0)
    target = EPOCH - 2 * u.day
    k, r0, v0, epoch = states_from_orbits(orbits, epoch=target.isot)
    assert abs((epoch - target).sec) < 1e-6
    for i in range(3):
        tof = -(2 * 86400.0 + offsets[i])
        ref = Reference(two_body_rhs(K_EARTH), r[i], v[i], np.array([tof]))
        assert relative_error(r0[i:i + 1], ref.rr) < 1e-9


def test_propagate_orbits_runs_cowell_from_the_common_epoch():
    orbits, r, v, offsets = fake_orbits(4, seed=3, spread_s=6 * 3600.0)
    tofs = np.array([600.0, 3600.0])
    res = propagate_orbits(orbits, tofs)
    k, r0, v0, _ = states_from_orbits(orbits)
    direct = cowell(k, r0, v0, tofs)
    np.testing.assert_array_equal(res.rr, direct.rr)
    assert np.all(res.status == 0) and res.epoch == EPOCH
    # the same as propagating each orbit from its own epoch to epoch + tofs
    for i in range(4):
        ref = Reference(two_body_rhs(K_EARTH), r[i], v[i], tofs - offsets[i])
        assert relative_error(res.rr[i], ref.rr) < 1e-9


def test_propagate_orbits_returns_cowells_result_with_the_epoch():
    orbits, r, v, offsets = fake_orbits(2, seed=5, spread_s=600.0)
    res = propagate_orbits(orbits, [60.0, 120.0])
    assert isinstance(res, OrbitsResult) and isinstance(res, CowellResult)
    assert res.rr.shape == (2, 2, 3) and res.vv.shape == (2, 2, 3)
    assert res.success.all() and res.messages() == ["reached the last time of flight"] * 2
    assert res.epoch == EPOCH and "epoch=2025-02-15T12:00:00.000 UTC" in repr(res)
    # the (result, epoch) tuple of earlier versions still unpacks, with a warning
    with pytest.warns(DeprecationWarning, match=r"use res\.epoch"):
        old, epoch = res
    assert old is res and epoch == EPOCH


def test_tle_states_as_stand_in_orbits_at_their_own_epochs():
    """Real objects: Iridium 33 debris, each at its own TLE epoch (TEME, km, km/s), as
    Orbit stand-ins; propagate_orbits from the latest epoch against scipy from each own one."""
    count = 2 if SIMULATED else 4
    catalog = from_tle(DATA_DIR / "iridium-33-debris.tle")
    chosen = np.argsort(catalog.epochs.jd)[::-(len(catalog) // count)][:count]
    orbits = [FakeOrbit(catalog.r[i] * u.km, catalog.v[i] * (u.km / u.s), catalog.epochs[i])
              for i in chosen]
    assert len({orbit.epoch.isot for orbit in orbits}) == count  # mixed epochs
    tofs = np.array([300.0, 900.0])
    res = propagate_orbits(orbits, tofs)
    assert res.epoch == catalog.epochs[chosen].max() and np.all(res.status == 0)
    for row, i in enumerate(chosen):
        behind = (res.epoch.tt - catalog.epochs[i].tt).to_value(u.s)
        ref = Reference(two_body_rhs(K_EARTH), catalog.r[i], catalog.v[i], tofs + behind)
        assert relative_error(res.rr[row], ref.rr) < 1e-9
        assert relative_error(res.vv[row], ref.vv) < 1e-9


def test_an_orbit_that_cannot_be_synchronised_fails_alone():
    orbits, r, v, _ = fake_orbits(3, seed=4, spread_s=3600.0)
    orbits[1].r = np.array([1.0, 0.0, 0.0]) * u.mm  # at the centre
    orbits[1].epoch = EPOCH - 1 * u.h
    with pytest.warns(RuntimeWarning, match=r"1 orbit\(s\) could not be propagated .*orbits\[1\]"):
        _, r0, _, _ = states_from_orbits(orbits)
    assert np.isnan(r0[1]).all() and np.isfinite(r0[[0, 2]]).all()


def test_bad_orbits_are_named():
    orbits, *_ = fake_orbits(3)
    with pytest.raises(TypeError, match=r"orbits\[1\]: expected an Orbit .*'object' without 'r'"):
        states_from_orbits([orbits[0], object(), orbits[2]])
    orbits[2].attractor = Body(1.327e20 * u.m ** 3 / u.s ** 2)
    with pytest.raises(ValueError, match=r"one attractor .*orbits\[2\] \(km\^3/s\^2\): "
                                         r"propagate each"):
        states_from_orbits(orbits)
    with pytest.raises(ValueError, match=r"one attractor .*orbits\[2\]"):
        propagate_orbits(orbits, [60.0])
    named = NamedBody(1.327e20 * u.m ** 3 / u.s ** 2, "Sun")
    orbits[0].attractor, orbits[2].attractor = NamedBody(orbits[0].attractor.k, "Earth"), named
    with pytest.raises(ValueError, match=r"orbits\[2\] \(km\^3/s\^2\) \(Earth and Sun\)"):
        states_from_orbits(orbits)
    with pytest.raises(ValueError, match=r"epoch: expected an astropy Time or a time string"):
        states_from_orbits(orbits[:2], epoch="yesterday")
    orbits[2].attractor = Body(K_EARTH * u.km ** 3 / u.s ** 2)
    orbits[1].r = [7000.0, 0.0, 0.0]
    with pytest.raises(TypeError, match=r"orbits\[1\]\.r: expected an astropy Quantity"):
        states_from_orbits(orbits)
    orbits[1].r = [7000.0, 0.0, 0.0] * u.s
    with pytest.raises(ValueError, match=r"orbits\[1\]\.r: expected a quantity in km"):
        states_from_orbits(orbits)
    orbits[1].r = [7000.0, 0.0, 0.0] * u.km
    orbits[1].epoch = "2025-01-01"
    with pytest.raises(TypeError, match=r"orbits\[1\]\.epoch: expected a single astropy Time"):
        states_from_orbits(orbits)
    with pytest.raises(ValueError, match="at least one orbit"):
        states_from_orbits([])
    with pytest.raises(TypeError, match="orbits: expected an Orbit or a sequence"):
        states_from_orbits(42)


@pytest.mark.parametrize("package", ["hapsira", "poliastro"])
def test_a_real_orbit_goes_in(package):
    pytest.importorskip(package)  # skipped where the package is not installed
    try:
        from importlib import import_module
        twobody, bodies = import_module(f"{package}.twobody"), import_module(f"{package}.bodies")
    except ImportError as error:  # installed beside an astropy it does not support
        pytest.skip(f"{package} is installed but does not import: {error}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        orbit = twobody.Orbit.from_classical(bodies.Earth, 7000 * u.km, 0.01 * u.one,
                                             50 * u.deg, 20 * u.deg, 30 * u.deg, 40 * u.deg,
                                             epoch=EPOCH)
        later = orbit.propagate(45 * u.min)  # the package's own Kepler propagation
    k, r0, v0, epoch = states_from_orbits([orbit, later])
    assert epoch == later.epoch
    np.testing.assert_allclose(r0[1], later.r.to_value(u.km), rtol=1e-13)
    # the earlier orbit brought to the later epoch by cowell: the package's Kepler answer
    np.testing.assert_allclose(r0[0], later.r.to_value(u.km), rtol=1e-9)
    np.testing.assert_allclose(v0[0], later.v.to_value(u.km / u.s), rtol=1e-9)
