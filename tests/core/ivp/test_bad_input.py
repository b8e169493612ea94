"""No silent wrong answers: each careless input gets a named error or the right result."""

import math

import numpy as np
import pytest
from astropy import units as u
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core import settings
from hapsira_core.kernels.errors import CallbackCompileError
from hapsira_core.ivp import Event as IVPEvent
from hapsira_core.ivp import solve_ivp
from hapsira_core.jit import hjit
from hapsira_cowell import cowell
from hapsira_cowell.models.ephem import Ephemeris
from hapsira_cowell.models.events import (Event, LithobrakeEvent, NodeCrossEvent, PenumbraEvent,
                                          UmbraEvent)
from hapsira_cowell.models.perturbations import atmospheric_drag_exponential, two_body

from reference import K_EARTH, R_EARTH, varied_orbits

R0 = np.array([[7000.0, 300.0, -200.0], [6800.0, -1000.0, 900.0]])
V0 = np.array([[0.2, 7.4, 1.1], [-1.0, 7.2, 2.0]])
TOFS = [600.0, 1800.0]


@hjit
def drag_from_row(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    a = atmospheric_drag_exponential(t, rr, vv, k, R_EARTH, p[0], p[1], 60.0, 1e-3)
    return drr, (dvv[0] + a[0], dvv[1] + a[1], dvv[2] + a[2])


def test_params_as_a_quantity_is_refused_not_stripped_of_its_unit():
    with pytest.raises(TypeError, match=r"params: expected plain numbers .* Quantity in m2 / kg"):
        cowell(K_EARTH, R0, V0, TOFS, f=drag_from_row, params=[2.2, 0.01] * u.m ** 2 / u.kg)
    with pytest.raises(TypeError, match="params: expected plain numbers"):
        cowell(K_EARTH, R0, V0, TOFS, f=drag_from_row, params=[2.2, 0.01 * u.m ** 2 / u.kg])


@hjit
def reads_sixth(t, rr, vv, k, p):
    drr, dvv = two_body(t, rr, vv, k, p)
    return drr, (dvv[0] * p[5], dvv[1], dvv[2])


@hjit
def g_reads_third(t, rr, vv, k, p):
    return rr[2] - p[2]


def test_functions_reading_past_the_params_row_are_refused_up_front():
    with pytest.raises(ValueError, match=r"params: reads_sixth \(.*test_bad_input.py:\d+\) "
                                         r"reads p\[5\], but the params rows have 1 column"):
        cowell(K_EARTH, R0, V0, TOFS, f=reads_sixth, params=[1.0])
    with pytest.raises(ValueError, match=r"reads p\[5\], but the params rows have 0 columns"):
        cowell(K_EARTH, R0, V0, TOFS, f=reads_sixth)
    with pytest.raises(ValueError, match=r"g_reads_third .* reads p\[2\]"):
        cowell(K_EARTH, R0, V0, TOFS, params=[[1.0, 2.0]], events=[Event(g_reads_third)])
    # wide enough: it runs, and p[5] is the user's sixth number (GM is not in the way)
    res = cowell(K_EARTH, R0, V0, TOFS, f=reads_sixth, params=[0, 0, 0, 0, 0, 1.0])
    plain = cowell(K_EARTH, R0, V0, TOFS)
    # two kernels: on a GPU their FMA contractions differ (H100: 6e-12 apart after TOFS)
    real_gpu = settings.TARGET == "cuda" and not settings.cuda_simulator_enabled()
    np.testing.assert_allclose(res.rr, plain.rr, rtol=1e-10 if real_gpu else 1e-13)


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


def test_solve_ivp_checks_the_params_row_too():
    with pytest.raises(ValueError, match=r"lotka .* reads p\[3\], but the params rows have 2"):
        solve_ivp(lotka, (0.0, 1.0), [1.0, 2.0], params=[1.0, 2.0])
    with pytest.raises(TypeError, match="params: expected plain numbers"):
        solve_ivp(lotka, (0.0, 1.0), [1.0, 2.0], params=[1.0, 2.0, 3.0, 4.0] * u.s)


def test_eclipse_events_need_their_whole_ephemeris_table():
    from astropy.time import Time
    table = Ephemeris.from_body("sun", Time("2026-01-01"), 0.0, 3600.0).to_params()
    umbra = UmbraEvent(R_EARTH, 695700.0, offset=2)
    with pytest.raises(ValueError, match=r"params: UmbraEvent.* reads the Sun's ephemeris table "
                                         r"at column 2"):
        cowell(K_EARTH, R0, V0, TOFS, params=[[1.0, 2.0]], events=[umbra])
    with pytest.raises(ValueError, match=r"needs \d+ columns for its ephemeris table"):
        cowell(K_EARTH, R0, V0, TOFS, params=np.concatenate([[1.0, 2.0], table[:-6]]),
               events=[umbra])
    damaged = table.copy()
    damaged[2] = 1.5  # the sample count
    with pytest.raises(ValueError, match="number of table samples in column 4"):
        cowell(K_EARTH, R0, V0, TOFS, params=np.concatenate([[1.0, 2.0], damaged]),
               events=[PenumbraEvent(R_EARTH, 695700.0, offset=2)])
    res = cowell(K_EARTH, R0, V0, TOFS, params=np.concatenate([[1.0, 2.0], table]),
                 events=[umbra])
    assert (res.status == 0).all()


def test_zero_absolute_tolerance_with_a_zero_component_integrates():
    """A planar orbit (z = vz = 0 throughout) with atol = 0: 0/0 in the error norm made
    it fail at once; it integrates as scipy does with the smallest atol."""
    r0, v0 = np.array([7000.0, 1000.0, 0.0]), np.array([-1.0, 7.4, 0.0])
    res = cowell(K_EARTH, r0, v0, [3000.0], atol=0.0, rtol=1e-10)
    assert res.status == 0
    reference = scipy_solve_ivp(
        lambda t, y: np.concatenate([y[3:], -K_EARTH * y[:3] / np.linalg.norm(y[:3]) ** 3]),
        (0.0, 3000.0), np.concatenate([r0, v0]), method="DOP853", rtol=1e-10, atol=1e-300)
    assert res.nsteps == len(reference.t) - 1
    np.testing.assert_allclose(res.rr[-1], reference.y[:3, -1], rtol=1e-12)
    assert res.rr[-1, 2] == 0.0 and res.vv[-1, 2] == 0.0


@pytest.mark.parametrize("r0, match", [
    (R0 + 0j, "r0: expected real numbers, got complex"),
    (R0 > 0, "r0: expected real numbers, got booleans"),
    (R0.astype(str), "r0: expected real numbers, got text"),
    (np.ma.masked_array(R0, mask=R0 < 0), "r0: .* masked array"),
])
def test_states_of_the_wrong_kind_are_refused(r0, match):
    with pytest.raises(TypeError, match=match):
        cowell(K_EARTH, r0, V0, TOFS)


@pytest.mark.parametrize("params, match", [
    ([[1.0, 2.0], [3.0]], "params: expected real numbers in a regular array"),
    (["a", "b"], "params: expected real numbers, got text"),
])
def test_ragged_or_text_params_name_the_argument(params, match):
    with pytest.raises(ValueError, match=match):
        cowell(K_EARTH, R0, V0, TOFS, params=params)


def test_a_single_event_is_taken_as_a_list_of_one():
    one = cowell(K_EARTH, R0, V0, [4000.0], events=NodeCrossEvent())
    listed = cowell(K_EARTH, R0, V0, [4000.0], events=[NodeCrossEvent()])
    np.testing.assert_array_equal(one.t_events[0], listed.t_events[0])
    assert (one.n_events > 0).all()


@hjit
def five_components(t, rr, vv, k, p):
    return rr, (vv[0], vv[1])


@hjit
def three_of_two(t, y, p):
    return (y[1], -y[0], 0.0)


@pytest.mark.parametrize("call, name, match", [
    (lambda: cowell(K_EARTH, R0, V0, TOFS, f=five_components), "five_components",
     r"returns a tuple of 2 \(a tuple of 3 .*, a tuple of 2 .*\); expected \(drr, dvv\)"),
    (lambda: solve_ivp(three_of_two, (0.0, 1.0), [1.0, 0.0]), "three_of_two",
     r"returns a tuple of 3 .*; expected a tuple of 2 floats"),
])
def test_wrong_return_shapes_name_the_users_function(call, name, match):
    with pytest.raises(CallbackCompileError, match=rf"user function '{name}' .*{match}"):
        call()


@hjit
def altitude_2000(t, rr, vv, k, p):
    return math.sqrt(rr[0] ** 2 + rr[1] ** 2 + rr[2] ** 2) - R_EARTH - 2000.0


@hjit
def altitude_2000_twice(t, rr, vv, k, p):
    return 2.0 * (math.sqrt(rr[0] ** 2 + rr[1] ** 2 + rr[2] ** 2) - R_EARTH - 2000.0)


def test_a_terminal_event_first_hides_a_later_listed_one_at_the_same_instant():
    r0, v0 = varied_orbits()["eccentric"]
    first = cowell(K_EARTH, r0, v0, [20000.0],
                   events=[Event(altitude_2000, terminal=True), Event(altitude_2000_twice)])
    assert first.status == 1
    assert first.n_events.tolist() == [1, 0] and np.isnan(first.t_events[1]).all()
    second = cowell(K_EARTH, r0, v0, [20000.0],
                    events=[Event(altitude_2000_twice), Event(altitude_2000, terminal=True)])
    assert second.n_events.tolist() == [1, 1]
    assert second.t_events[0][0] == pytest.approx(second.t_events[1][0], abs=1e-9)


def test_solve_ivp_events_of_the_wrong_kind_name_themselves():
    with pytest.raises(ValueError, match=r"events\[0\]: expected an hapsira_core.ivp.api.Event"):
        solve_ivp(lotka, (0.0, 1.0), [1.0, 2.0], params=[1, 1, 1, 1], events=[LithobrakeEvent(1.0)])
    assert isinstance(IVPEvent(lotka), IVPEvent)


@pytest.mark.parametrize("t_span, match", [
    ("10", r"t_span: expected two real numbers \(t0, tf\), got text '10'"),
    (b"10", r"t_span: expected two real numbers \(t0, tf\), got text b'10'"),
    ((0.0,), r"t_span: expected two real numbers \(t0, tf\), got 1 values"),
    ((0.0, 1.0, 2.0), r"t_span: expected two real numbers \(t0, tf\), got 3 values"),
    (("0", "1"), r"t_span: expected two real numbers \(t0, tf\), got text"),
    ((0.0, 1j), r"t_span: expected two real numbers \(t0, tf\), got complex"),
    # arrays are per-object spans now: an (M,) one of another length than N is told so
    ((0.0, [1.0, 2.0]), r"t_span: expected two real numbers \(t0, tf\) or two arrays of "
                        r"shape \(1,\) \(one t0 and one tf per object\), got shapes \(\) and "
                        r"\(2,\)"),
    ((0.0, math.nan), r"t_span: expected a finite t0 and a finite or infinite tf \(no NaN\), "
                      r"got \(0.0, nan\)"),
    ((math.inf, 0.0), r"t_span: expected a finite t0"),
    ((-math.inf, math.inf), r"t_span: expected a finite t0"),
    # an infinite end is scipy's "until a terminal event": without one, refused
    ((0.0, math.inf), r"t_span: an infinite tf needs a terminal event"),
    (5.0, r"t_span: expected two real numbers \(t0, tf\), got float 5.0"),
])
def test_t_span_must_be_two_real_numbers(t_span, match):
    """scipy reads "10" as (1, 0) and integrates backward; it never returns for NaN, an
    infinite t0, or an infinite tf without a terminal event."""
    with pytest.raises(ValueError, match=match):
        solve_ivp(lotka, t_span, [1.0, 2.0], params=[1, 1, 1, 1])


@pytest.mark.parametrize("max_steps", [2 ** 70, 2 ** 63, 0, -1, 1.5, True])
def test_max_steps_out_of_range_names_the_argument_and_the_range(max_steps):
    with pytest.raises(ValueError, match=rf"max_steps: expected an integer from 1 to "
                                         rf"{2 ** 63 - 1}, got {max_steps!r}"):
        solve_ivp(lotka, (0.0, 1.0), [1.0, 2.0], params=[1, 1, 1, 1], max_steps=max_steps)
    with pytest.raises(ValueError, match=r"max_steps: expected an integer from 1 to"):
        cowell(K_EARTH, R0, V0, TOFS, max_steps=max_steps)


def test_params_of_one_value_per_object_as_a_flat_array_warn():
    """(N,) is one shared row of N numbers, not one number per object as a scipy user
    would read it: a warning says how to pass per-object values."""
    y0 = np.ones((4, 2))
    with pytest.warns(UserWarning, match=r"params: shape \(4,\) with 4 objects is one row "
                                         r"shared by all objects .* pass shape \(4, 1\)"), \
            pytest.raises(ValueError, match="max_steps"):  # stop before compiling
        solve_ivp(lotka, (0.0, 1.0), y0, params=[1.0, 2.0, 3.0, 4.0], max_steps=0)
    with pytest.warns(UserWarning, match=r"params: shape \(2,\) with 2 objects"), \
            pytest.raises(ValueError, match=r"reads p\[5\]"):  # stop before compiling
        cowell(K_EARTH, R0, V0, TOFS, f=reads_sixth, params=[1.0, 2.0])
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for shape in [(4, 1), (1, 4), (3,)]:  # per object, shared, shared of another length
            with pytest.raises(ValueError, match="max_steps"):
                solve_ivp(lotka, (0.0, 1.0), y0, params=np.ones(shape), max_steps=0)
        with pytest.raises(ValueError, match="max_steps"):  # one object: nothing to confuse
            solve_ivp(lotka, (0.0, 1.0), y0[:1], params=[1.0], max_steps=0)


@hjit
def oscillator(t, y, p):
    return (y[1], -y[0])


@pytest.mark.parametrize("method", ["DOP853", "RK45"])
def test_zero_tolerances_with_a_component_at_zero_integrate_on_every_target(method):
    """rtol = atol = 0 and y0[1] = 0 (with y1' = -1): scipy raises rtol to 100 eps with a
    warning and then never returns (0/0 in its error scale). DOP853 stopped at step 0
    (status -1, its squared error norm overflowed) and the CUDA simulator raised
    ZeroDivisionError in the first step size, losing the batch."""
    with pytest.warns(UserWarning, match=r"rtol below 100 \* eps"):
        res = solve_ivp(oscillator, (0.0, 1.0), [[1.0, 0.0], [1.0, 0.5]], method=method,
                        rtol=0.0, atol=0.0)
    assert res.status.tolist() == [0, 0]
    np.testing.assert_allclose(res.y[0, :, -1], [math.cos(1.0), -math.sin(1.0)], rtol=1e-12)
    exact = [math.cos(1.0) + 0.5 * math.sin(1.0), -math.sin(1.0) + 0.5 * math.cos(1.0)]
    np.testing.assert_allclose(res.y[1, :, -1], exact, rtol=1e-12)


@hjit
def decay_at_computed_index(t, y, p):
    return (-p[int(p[0])] * y[0],)


def test_a_params_read_past_the_row_at_a_computed_index_is_an_error_on_every_target():
    """p[int(p[0])] past a 1-column row: the width check sees constant subscripts only;
    it returned status 0 and garbage (different on cpu and parallel), the simulator an
    IndexError of its own. The last of three objects: numba's parallel gufunc dropped
    exceptions raised outside a thread's first object."""
    from hapsira_core.ivp.checks import ParamsIndexError
    from hapsira_core.targets import active
    if active.BOUNDS_CHECKS or settings.cuda_simulator_enabled():
        with pytest.raises(ParamsIndexError, match=r"params: a read past the end of a params "
                                                   r"row, at an index computed at run time .* "
                                                   r"in 'decay_at_computed_index'"):
            solve_ivp(decay_at_computed_index, (0.0, 1.0), np.ones((3, 1)),
                      params=[[0.0], [0.0], [5.0]])
    # (a real GPU cannot raise: the read gives NaN there, tests/core/kernels/test_guard.py)
    # in range, the numbers of scipy
    res = solve_ivp(decay_at_computed_index, (0.0, 1.0), np.ones((2, 1)),
                    params=[[1.0, 2.0], [1.0, 3.0]], rtol=1e-10, atol=1e-12)
    assert res.status.tolist() == [0, 0]
    for i, rate in enumerate([2.0, 3.0]):
        want = scipy_solve_ivp(lambda t, y: -rate * y, (0.0, 1.0), [1.0], method="DOP853",
                               rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(res.y[i, 0, -1], want.y[0, -1], rtol=1e-12)
        assert res.nsteps[i] == len(want.t) - 1
