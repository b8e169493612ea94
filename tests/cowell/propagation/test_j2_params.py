"""A user right-hand side (two-body + J2) with per-object params, against scipy."""

import numpy as np
import pytest

from hapsira_core.jit import hjit
from hapsira_cowell import cowell
from hapsira_cowell.models.perturbations import J2_perturbation, two_body
from reference import J2_EARTH, K_EARTH, R_EARTH, Reference, j2_rhs, relative_error, \
    varied_orbits


@hjit
def j2_scaled(t, rr, vv, k, p):
    """Two-body plus p[0] times Earth's J2 (p[0] is per object)."""
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, p[0] * 1.08262668e-3, 6378.137)
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])


ORBITS = varied_orbits(seed=2)
NAMES = ["leo", "sso", "eccentric", "molniya"]
R0 = np.array([ORBITS[n][0] for n in NAMES])
V0 = np.array([ORBITS[n][1] for n in NAMES])
TOFS = np.array([1800.0, 21600.0, 43200.0])


def test_per_object_params_match_scipy():
    scale = np.array([1.0, 0.5, 2.0, 1.0])
    res = cowell(K_EARTH, R0, V0, TOFS, f=j2_scaled, params=scale[:, None])
    same_steps = 0
    for i, name in enumerate(NAMES):
        ref = Reference(j2_rhs(K_EARTH, scale[i] * J2_EARTH, R_EARTH), R0[i], V0[i], TOFS)
        assert res.status[i] == 0
        assert relative_error(res.rr[i], ref.rr) < 1e-9, name
        assert relative_error(res.vv[i], ref.vv) < 1e-9, name
        same_steps += res.nsteps[i] == ref.nsteps
    assert same_steps >= 0.9 * len(NAMES)


def test_shared_params_equal_repeated_rows():
    shared = cowell(K_EARTH, R0, V0, TOFS, f=j2_scaled, params=np.array([1.5]))
    rows = cowell(K_EARTH, R0, V0, TOFS, f=j2_scaled, params=np.full((len(NAMES), 1), 1.5))
    np.testing.assert_array_equal(shared.rr, rows.rr)


def test_params_change_the_answer_without_recompiling():
    from hapsira_core.ivp.build import KERNELS as _KERNELS
    a = cowell(K_EARTH, R0[0], V0[0], TOFS, f=j2_scaled, params=[1.0])
    n_kernels = len(_KERNELS)
    b = cowell(K_EARTH, R0[0], V0[0], TOFS, f=j2_scaled, params=[0.0])
    plain = cowell(K_EARTH, R0[0], V0[0], TOFS)
    assert len(_KERNELS) <= n_kernels + 1  # only the two-body kernel may be new
    # J2 scaled by 0 is two-body; two kernels, so the GPU compiler may fuse
    # multiply-adds differently: equal to rounding, not bit for bit
    np.testing.assert_allclose(b.rr, plain.rr, rtol=1e-11, atol=0)
    # J2 moves a LEO object by kilometres within hours
    assert np.linalg.norm(a.rr[-1] - b.rr[-1]) > 1.0


def test_params_shape_is_checked():
    with pytest.raises(ValueError, match="params"):
        cowell(K_EARTH, R0, V0, TOFS, f=j2_scaled, params=np.ones((3, 1)))


def test_broadcast_views_as_inputs_give_the_same_answer():
    # x[:, None] and np.broadcast_to give stride-0 views; they are copied to plain arrays
    scale = np.array([1.0, 0.5, 2.0, 1.0])
    res = cowell(K_EARTH, R0, V0, TOFS, f=j2_scaled, params=scale[:, None])
    copied = cowell(K_EARTH, R0, V0, TOFS, f=j2_scaled, params=scale[:, None].copy())
    np.testing.assert_array_equal(res.rr, copied.rr)
    same = cowell(K_EARTH, np.broadcast_to(R0[0], (3, 3)), np.broadcast_to(V0[0], (3, 3)), TOFS,
                  f=j2_scaled, params=[1.0])
    assert np.all(same.rr == same.rr[0])
