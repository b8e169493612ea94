"""The solve loop's counts against scipy: ``nfev`` (and ``njev``, ``nlu``) as scipy's.

scipy's default (``t_eval=None``) returns the last step's end state and builds no
interpolant for it; explicit output times are interpolated, the first step's interpolant
built as well when ``t_eval`` starts at t0. DOP853's interpolant costs 3 evaluations
of ``fun``, which is where the two counts differ; RK45's and RK23's cost none.
"""

import math

import numpy as np
import pytest
from scipy.integrate import solve_ivp as scipy_solve_ivp

from hapsira_core.ivp import solve_ivp
from hapsira_core.jit import hjit
from hapsira_core import settings

#: A real GPU contracts a * b + c into fused multiply-adds: last-bit differences may
#: move one accept/reject decision (the simulator and the host do not fuse).
FMA = settings.TARGET == "cuda" and not settings.cuda_simulator_enabled()

METHODS = ("DOP853", "RK45", "RK23")


@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


@hjit
def lotka(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])


@hjit
def two_body(t, y, p):
    r3 = (y[0] * y[0] + y[1] * y[1]) ** 1.5
    return (y[2], y[3], -p[0] * y[0] / r3, -p[0] * y[1] / r3)


def two_body_np(t, y, k):
    r3 = (y[0] * y[0] + y[1] * y[1]) ** 1.5
    return [y[2], y[3], -k * y[0] / r3, -k * y[1] / r3]


PROBLEMS = {
    "van_der_pol": (van_der_pol, lambda t, y, mu: [y[1], mu * (1.0 - y[0] * y[0]) * y[1] - y[0]],
                    (0.0, 12.0), np.array([[2.0, 0.0], [0.5, -1.0]]), np.array([[1.5], [4.0]])),
    "lotka": (lotka, lambda t, y, a, b, c, d: [a * y[0] - b * y[0] * y[1],
                                               -c * y[1] + d * y[0] * y[1]],
              (0.0, 15.0), np.array([[10.0, 5.0], [7.0, 2.5]]),
              np.array([[1.5, 1.0, 3.0, 1.0], [1.1, 0.7, 2.2, 0.9]])),
    # planar orbits of e = 0.5 and 0.8 (k = 1), backward over 10 time units (through
    # the periapsis of the first)
    "two_body": (two_body, two_body_np, (9.0, -1.0), np.array([[1.0, 0.0, 0.0, 1.2247],
                                                                [1.0, 0.0, 0.0, 1.3416]]),
                 np.array([[1.0], [1.0]])),
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("name", PROBLEMS)
def test_nfev_njev_nlu_equal_scipys_default_and_explicit_t_eval(name, method, simulated):
    fun, plain, t_span, y0, params = PROBLEMS[name]
    t0, tf = t_span
    outputs = {"default": None, "[tf]": [tf], "from t0": np.linspace(t0, tf, 9),
               "inside": np.linspace(t0, tf, 7)[1:-1]}
    tolerances = (1e-3, 1e-7) if simulated else (1e-3, 1e-6, 1e-8, 1e-10)
    for rtol in tolerances:
        for label, t_eval in outputs.items():
            res = solve_ivp(fun, t_span, y0, method=method, t_eval=t_eval, rtol=rtol,
                            atol=rtol * 1e-3, params=params)
            for i in range(len(y0)):
                ref = scipy_solve_ivp(plain, t_span, y0[i], method=method, t_eval=t_eval,
                                      rtol=rtol, atol=rtol * 1e-3, args=tuple(params[i]))
                where = f"{name} {method} rtol={rtol} t_eval={label} object {i}"
                assert res.status[i] == 0, where
                obj = res[i]
                assert (obj.njev, obj.nlu) == (ref.njev, ref.nlu) == (0, 0), where
                # scipy's count on every target (the GPU's tuple form evaluates a step's
                # stages again for an interpolant, KEEP_STAGES False: the step's own,
                # counted once). A real GPU fuses multiply-adds: one accept/reject
                # decision may move, by one step's evaluations (16 at most)
                slack = 16 if FMA else 0
                assert abs(int(obj.nfev) - ref.nfev) <= slack, where
                # the same steps; the states apart by rounding (numpy's sums are not
                # ours), which loose tolerances' long steps amplify: 1.6e-9 at rtol 1e-3
                # (Van der Pol), 6e-11 at 1e-10 (two-body, through periapsis)
                close = max(1e-10, 1e-5 * rtol)
                scale = close * np.abs(ref.y).max()
                if label == "default":
                    assert abs(int(obj.nsteps) - (len(ref.t) - 1)) <= (1 if FMA else 0), where
                    # scipy's default output is the last step's state: ours too
                    np.testing.assert_allclose(obj.y[:, -1], ref.y[:, -1], rtol=close,
                                               atol=scale, err_msg=where)
                else:
                    np.testing.assert_allclose(obj.y, ref.y, rtol=close, atol=scale,
                                               err_msg=where)
    assert isinstance(res.njev, np.ndarray) and (res.njev == 0).all() and (res.nlu == 0).all()


def test_output_at_t0_is_the_initial_state_and_default_end_is_the_last_steps_state():
    """``t_eval`` starting at t0 gives y0 exactly (scipy's interpolant does too); the
    default output is the step's end state, bit for bit scipy's ``sol.y[:, -1]``."""
    y0 = np.array([2.0, 0.0])
    res = solve_ivp(van_der_pol, (0.0, 3.0), y0, t_eval=[0.0, 3.0], params=[2.0])
    assert res.y[0, 0] == 2.0 and res.y[1, 0] == 0.0
    ref = scipy_solve_ivp(PROBLEMS["van_der_pol"][1], (0.0, 3.0), y0, method="DOP853",
                          args=(2.0,))
    end = solve_ivp(van_der_pol, (0.0, 3.0), y0, params=[2.0])
    assert end.nfev == ref.nfev
    np.testing.assert_allclose(end.y[:, -1], ref.y[:, -1], rtol=1e-12)
    # the interpolant at the last step's end is within rounding of it, never equal by design
    assert math.isclose(res.y[0, -1], end.y[0, -1], rel_tol=1e-12)


@pytest.mark.parametrize("name", ["van_der_pol", "two_body"])
def test_dop853_output_at_the_end_is_its_interpolant_there_bit_for_bit(name):
    """An output time at a step's end takes DOP853's interpolant there without building
    it (``end_value``: x = 1, every term but ``y_new - y_old`` times 1 - x = 0): the
    same bits as the last step's interpolant (``dense_output=True``), forward and
    backward, and as the output of an interpolant built anyway (an output inside the
    same last step, where one is needed)."""
    fun, _, t_span, y0, params = PROBLEMS[name]
    t0, tf = t_span
    options = dict(method="DOP853", rtol=1e-8, atol=1e-11, params=params)
    res = solve_ivp(fun, t_span, y0, t_eval=[tf], dense_output=True, **options)
    assert (res.status == 0).all()
    for i in range(len(y0)):
        built = np.asarray(res[i].sol(tf))  # the last step's interpolant, at its end
        assert res[i].y[:, -1].tobytes() == built.tobytes(), i
        # an output time inside the last step: the interpolant is built, and the output
        # at its end comes from it
        last = res[i].sol.ts[-2]
        inside = solve_ivp(fun, t_span, y0[i:i + 1], t_eval=[0.5 * (last + tf), tf],
                           **{**options, "params": params[i:i + 1]})
        assert inside.y[0][:, -1].tobytes() == built.tobytes(), i


@hjit
def first_component(t, y, p):
    return y[0]


def test_nfev_is_each_objects_own_count_where_objects_differ_in_outputs(simulated):
    """Objects launched together (one warp on a GPU) whose output times fall in
    different steps, some in none but the last: each object's ``nfev`` is scipy's
    count for that object alone, interpolants counted where its own output times or
    events need one (DOP853: 3 evaluations each; RK45: none), on every target. A GPU
    evaluates a step's stages again to build an interpolant (``KEEP_STAGES`` False);
    those are the step's own evaluations, counted once, as scipy counts them."""
    from hapsira_core.ivp import Event

    fun, plain, t_span, _, _ = PROBLEMS["van_der_pol"]
    t0, tf = t_span
    rows = [np.linspace(t0, tf, 11),              # from t0, about every 5th step
            np.linspace(t0, tf, 41)[1:],          # about every step, some steps twice
            [5.0, tf], [tf], [0.37], [t0, 7.3]]   # sparse; only the end; one; t0 only
    if simulated:
        rows = rows[:5]
    t_eval = np.full((len(rows), max(map(len, rows))), np.nan)
    for i, row in enumerate(rows):
        t_eval[i, :len(row)] = row
    y0 = np.tile([[2.0, 0.0], [0.5, -1.0], [1.0, 1.0]], (2, 1))[:len(rows)]
    params = np.linspace(0.5, 4.0, len(rows))[:, None]

    def crossing(t, y, mu):
        return y[0]

    slack = 16 if FMA else 0  # (test_nfev_njev_nlu_equal_scipys_default_and_explicit_t_eval)
    for method in ("DOP853", "RK45"):
        for events in ((), (Event(first_component),)):
            res = solve_ivp(fun, t_span, y0, method=method, t_eval=t_eval, rtol=1e-6,
                            atol=1e-9, params=params, events=events)
            for i, row in enumerate(rows):
                ref = scipy_solve_ivp(plain, t_span, y0[i], method=method, t_eval=row,
                                      rtol=1e-6, atol=1e-9, args=tuple(params[i]),
                                      events=[crossing] if events else None)
                where = f"{method} events={len(events)} object {i} t_eval={row}"
                assert res.status[i] == 0, where
                if events:
                    assert res.n_events[i, 0] == len(ref.t_events[0]) > 0, where
                assert abs(int(res.nfev[i]) - ref.nfev) <= slack, (where, res.nfev[i],
                                                                   ref.nfev)
