"""Per-object epochs of `propagate_orbits` and `states_from_orbits` (issue 27 item 3, the
cowell part): ``epoch`` a ``Time`` of shape ``(N,)``, orbit i brought to ``epoch[i]`` and
propagated from there; ``res.epoch`` per object, and OEM files with each object's epoch."""

import numpy as np
import pytest
from extras import need
from astropy import units as u
from astropy.time import Time, TimeDelta
from reference import K_EARTH, Reference, relative_error, two_body_rhs

from hapsira_cowell import cowell
from hapsira_cowell.propagation.orbits import propagate_orbits, states_from_orbits

from .test_orbits import EPOCH, SIMULATED, fake_orbits

N = 3 if SIMULATED else 5


def own_and_target_epochs(seed):
    """Orbits at mixed epochs (up to 6 h apart) and a target epoch for each, up to a day
    on either side of its own."""
    orbits, r, v, _ = fake_orbits(N, seed=seed, spread_s=6 * 3600.0)
    shift = np.random.default_rng(seed).uniform(-86400.0, 86400.0, N)
    own = Time([orbit.epoch for orbit in orbits])
    return orbits, r, v, own, own + TimeDelta(shift, format="sec"), shift


def test_per_object_epochs_equal_one_call_per_orbit_bit_for_bit():
    orbits, r, v, _, target, shift = own_and_target_epochs(seed=21)
    tofs = np.array([0.0, 900.0, 5400.0])
    res = propagate_orbits(orbits, tofs, epoch=target)
    assert res.epoch.shape == (N,) and np.all(res.epoch == target)
    assert np.all(res.status == 0)
    for i in range(N):
        alone = propagate_orbits([orbits[i]], tofs, epoch=target[i])
        assert alone.epoch == target[i]
        np.testing.assert_array_equal(res.rr[i], alone.rr[0])
        np.testing.assert_array_equal(res.vv[i], alone.vv[0])
        # and against scipy: orbit i from its own epoch to each target[i] + tof (one
        # run per time: shift + tofs may change sign)
        for j, tof in enumerate(tofs):
            ref = Reference(two_body_rhs(K_EARTH), r[i], v[i], [shift[i] + tof])
            assert relative_error(res.rr[i, j:j + 1], ref.rr) < 1e-9
            assert relative_error(res.vv[i, j:j + 1], ref.vv) < 1e-9
    assert f"epoch={N} epochs (" in repr(res)


def test_each_orbit_at_its_own_epoch_is_cowell_on_the_states_as_they_are():
    orbits, r, v, own, _, _ = own_and_target_epochs(seed=22)
    tofs = np.array([[600.0, 1200.0], [-600.0, np.nan], [60.0, 86400.0]] * 2)[:N]
    k, r0, v0, epoch = states_from_orbits(orbits, epoch=own)
    # nothing propagated: the states as given (r in m, converted to km)
    np.testing.assert_allclose(r0, r, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(v0, v)
    res = propagate_orbits(orbits, tofs, epoch=own)
    direct = cowell(k, r0, v0, tofs)
    np.testing.assert_array_equal(res.rr, direct.rr)
    np.testing.assert_array_equal(res.vv, direct.vv)
    assert np.all(res.epoch == own) and np.all(res.status == 0)
    # a list of ISO strings (UTC) is read as N epochs too
    _, _, _, epoch = states_from_orbits(orbits, epoch=[t.isot for t in own.utc])
    assert epoch.shape == (N,) and np.abs((epoch - own).sec).max() < 1e-3


def test_per_object_epochs_of_the_wrong_shape_name_epoch():
    orbits, *_ = fake_orbits(3, seed=1, spread_s=60.0)
    with pytest.raises(ValueError, match=r"^epoch: expected a single time or one per orbit, "
                                         r"shape \(3,\), got shape \(2,\)"):
        propagate_orbits(orbits, [60.0], epoch=Time([EPOCH, EPOCH]))
    with pytest.raises(ValueError, match=r"^epoch: .*shape \(3,\), got shape \(3, 1\)"):
        states_from_orbits(orbits, epoch=Time([EPOCH] * 3).reshape(3, 1))
    with pytest.raises(ValueError, match=r"^epoch: expected an astropy Time or a time string"):
        states_from_orbits(orbits, epoch=["2025-01-01", "never", "2025-01-02"])


def test_oem_files_carry_each_objects_epoch(tmp_path):
    need("oem")
    from hapsira_cowell.outputs.oem import read_oem, write_oem
    orbits, _, _, _, target, _ = own_and_target_epochs(seed=23)
    tofs = np.array([0.0, 60.0, 3600.0])
    res = propagate_orbits(orbits, tofs, epoch=target)
    paths = write_oem(tmp_path / "out", res.epoch, tofs, res.rr, res.vv, frame="GCRF")
    assert len(paths) == N
    for i, back in enumerate(read_oem(tmp_path / "out")):
        expected = target[i].utc + tofs * u.s
        assert np.abs((back.times - expected).sec).max() < 2e-9
        np.testing.assert_allclose(back.r, res.rr[i], rtol=1e-14, atol=0)
    # one object's file with its own epoch, and a count that does not fit
    write_oem(tmp_path / "one.oem", target[1:2], tofs, res.rr[1], res.vv[1], frame="GCRF")
    assert np.abs((read_oem(tmp_path / "one.oem").times[0] - target[1]).sec) < 2e-9
    with pytest.raises(ValueError, match=rf"^epoch: expected a single time or one per object, "
                                         rf"shape \({N},\), got shape \(2,\)"):
        write_oem(tmp_path / "bad", target[:2], tofs, res.rr, res.vv, frame="GCRF")
