"""Bad input: a ValueError naming the argument and what was expected (no compile needed)."""

import numpy as np
import pytest
from astropy import units as u

from hapsira_cowell import cowell
from hapsira_cowell.models.events import AltitudeCrossEvent, Event

K = 398600.4418
R0 = np.array([[7000.0, 0.0, 0.0], [0.0, 8000.0, 100.0]])
V0 = np.array([[0.0, 7.5, 0.1], [-7.0, 0.0, 0.2]])
T = np.array([60.0, 120.0])


@pytest.mark.parametrize("kwargs, match", [
    (dict(k=-1.0), "k: expected a positive"),
    (dict(k=np.nan), "k: expected a positive"),
    (dict(k=[1.0, 2.0]), "k: expected a positive"),
    (dict(k=3.0 * u.km), "k: expected a quantity"),
    (dict(r0=np.ones((2, 2))), r"r0: expected shape \(3,\) or \(N, 3\)"),
    (dict(r0=np.ones((2, 3, 1))), "r0: expected shape"),
    (dict(v0=np.ones(3)), "r0, v0: shapes differ"),
    (dict(v0=np.ones((3, 3))), "r0, v0: number of objects differs"),
    (dict(r0=[["a", "b", "c"]] * 2), "r0: expected real numbers"),
    (dict(r0=R0 * u.s), "r0: expected a quantity in km"),
    (dict(tofs=[]), "tofs: expected a non-empty"),
    (dict(tofs=[[1.0, 2.0]]), "tofs: expected shape \\(M,\\) or"),
    (dict(tofs=[10.0, 5.0]), "tofs: expected times sorted"),
    (dict(tofs=[-10.0, -5.0]), "tofs: expected times sorted"),
    (dict(tofs=[-10.0, 5.0]), "tofs: expected times all of one sign"),
    (dict(tofs=[1.0, np.nan]), "tofs: expected finite"),
    (dict(tofs=T * u.km), "tofs: expected a quantity in s"),
    (dict(rtol=-1e-9), "rtol: expected finite non-negative"),
    (dict(atol=-1.0), "atol: expected finite non-negative"),
    (dict(atol=np.ones(3)), r"atol: expected a scalar or 6 values"),
    (dict(params=np.ones((3, 2))), "params: expected shape"),
    (dict(events=[lambda t: t]), r"events\[0\]: expected an hapsira_cowell.models.events.Event"),
    (dict(max_steps=0), "max_steps: expected an integer from 1 to"),
    (dict(max_steps=1.5), "max_steps: expected an integer"),
    (dict(max_event_records=-1), "max_event_records: expected an integer from 0 to"),
    (dict(f=3.0), "f: expected an hjit function"),
])
def test_bad_argument_raises_naming_it(kwargs, match):
    args = dict(k=K, r0=R0, v0=V0, tofs=T)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        cowell(args.pop("k"), args.pop("r0"), args.pop("v0"), args.pop("tofs"), **args)


@pytest.mark.parametrize("kwargs, message", [
    (dict(k=-398600.4418), "k: expected a positive finite GM in km^3/s^2, got -398600.4418"),
    (dict(k=np.float64(-398600.4418)), "got -398600.4418"),
    (dict(k=np.array(np.nan)), "got nan"),
    (dict(atol=np.float64(-1.0)), "atol: expected finite non-negative tolerances, got -1.0"),
    (dict(max_steps=np.float64(-1.0)), "max_steps: expected an integer from 1 to "
                                       "9223372036854775807, got -1.0"),
    (dict(stm=np.array(1)), "stm: expected True or False, got 1"),
])
def test_numpy_scalars_in_messages_read_as_numbers(kwargs, message):
    # not array(-398600.4418) or np.float64(-1.0): the numbers as the user wrote them
    args = dict(k=K, r0=R0, v0=V0, tofs=T)
    args.update(kwargs)
    with pytest.raises((ValueError, TypeError)) as info:
        cowell(args.pop("k"), args.pop("r0"), args.pop("v0"), args.pop("tofs"), **args)
    assert str(info.value).endswith(message), str(info.value)
    assert "array(" not in str(info.value) and "np." not in str(info.value)


@pytest.mark.parametrize("option, says", [
    ("dense_output", "dense_output: not an argument of cowell (solve_ivp's); ask for the "
                     "times you need in tofs"),
    ("t_eval", "t_eval: not an argument of cowell (solve_ivp's); cowell's output times are "
               "tofs"),
    ("method", "method: not an argument of cowell (solve_ivp's); cowell integrates with DOP853"),
])
def test_scipy_options_cowell_does_not_take_say_what_to_use(option, says):
    with pytest.raises(TypeError) as info:
        cowell(K, R0, V0, T, **{option: True})
    assert str(info.value).startswith(says), str(info.value)
    if option == "dense_output":
        assert "solve_ivp(..., dense_output=True)" in str(info.value)


def test_a_misspelt_keyword_of_cowell_gets_the_nearest():
    with pytest.raises(TypeError, match="^cowell\\(\\) got an unexpected keyword argument "
                                        "'max_stesp'; did you mean 'max_step'\\?$"):
        cowell(K, R0, V0, T, max_stesp=10.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'zzz'$"):
        cowell(K, R0, V0, T, zzz=1)


@pytest.mark.parametrize("make, match", [
    (lambda: AltitudeCrossEvent(100.0, -1.0), "R: expected a positive"),
    (lambda: AltitudeCrossEvent(100.0 * u.s, 6378.0), "alt: expected a quantity in km"),
    (lambda: AltitudeCrossEvent(100.0, 6378.0, direction=2), "direction: expected -1, 0 or"),
    (lambda: AltitudeCrossEvent(100.0, 6378.0, terminal=-2), "terminal: expected"),
    (lambda: Event(42), "g: expected an hjit function"),
])
def test_bad_event_arguments(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_a_user_function_that_does_not_compile_is_named_first(simulated):
    if simulated:
        pytest.skip("numba's CUDA simulator runs the Python source: nothing is compiled")
    from hapsira_core.jit import hjit
    from hapsira_core.kernels.errors import CallbackCompileError

    @hjit
    def broken_rhs(t, rr, vv, k, p):
        a = rr[0] + "not a number"
        return vv, (a, a, a)

    with pytest.raises(CallbackCompileError) as info:
        cowell(K, R0, V0, T, f=broken_rhs)
    message = str(info.value)
    assert message.startswith("user function '") and "broken_rhs' (" in message.splitlines()[0]
    assert 'a = rr[0] + "not a number"' in message.splitlines()[0]
    assert "test_checks.py:" in message.splitlines()[0]
