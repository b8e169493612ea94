"""Errors in user callbacks are short: the user's function, where, and numba's reason in
a line; numba's dump (and its chained exception) only with HAPSIRA_DEBUG (issue 25 item 6)."""

import traceback

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.ivp import solve_ivp
from hapsira_core.jit import hjit
from hapsira_core.kernels.errors import CallbackCompileError, reason

SIMULATED = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()


def not_hjit(t, y, p):
    return (-y[0],)


@hjit
def wrong_length(t, y, p):
    return (-y[0], 1.0)


@hjit
def adds_text(t, y, p):
    return (-y[0] + "a",)


CASES = {
    "not hjit": (not_hjit, "is not compiled: decorate it with @hjit",
                 "Cannot determine Numba type of <class 'function'>"),
    "wrong length": (wrong_length, "returns a tuple of 2 (float, float); expected a tuple "
                     "of 1 floats", None),
    "does not compile": (adds_text, 'does not compile: return (-y[0] + "a",)',
                         "No implementation of function Function(<built-in function add>) "
                         "found for signature: >>> add(float64, Literal[str](a))"),
}


@pytest.mark.parametrize("debug", [False, True], ids=["plain", "HAPSIRA_DEBUG"])
@pytest.mark.parametrize("case", list(CASES))
def test_callback_errors_are_short_without_debug(monkeypatch, case, debug):
    fun, says, numba_reason = CASES[case]
    if SIMULATED and case != "wrong length":
        pytest.skip("numba's CUDA simulator runs the Python source: nothing is compiled")
    monkeypatch.setattr(settings, "DEBUG", debug)
    with pytest.raises(CallbackCompileError) as info:
        solve_ivp(fun, (0.0, 1.0), np.ones((2, 1)))
    error = info.value
    message = str(error).splitlines()
    name = fun.__name__ if not hasattr(fun, "py_func") else fun.py_func.__name__
    assert message[0].startswith(f"user function '{name}' (")
    assert says in message[0]
    shown = "".join(traceback.format_exception(error))
    if not debug:
        assert len(message) <= 3, str(error)
        if numba_reason is not None:
            assert message[1].startswith("numba says: ") and numba_reason in message[1]
            assert message[2] == "(numba's full message: set HAPSIRA_DEBUG=1)"
        # before: 154 to 232 lines, numba's dump twice (the message, the chained exception)
        assert len(shown.splitlines()) <= 40, shown
        assert error.__cause__ is None and error.__suppress_context__
        assert "During:" not in shown and "direct cause" not in shown
    else:
        assert isinstance(error.__cause__, Exception) and "direct cause" in shown
        if not SIMULATED:  # the simulator's cause is Python's own unpacking error
            assert type(error.__cause__).__module__.startswith("numba")
            # numba's dump is there (numba-cuda's has no "During:" lines: seen on an H100)
            cause = str(error.__cause__)
            assert len(cause.splitlines()) > 3 and cause.strip().splitlines()[-1] in shown
        if numba_reason is not None:
            assert "numba says:\n" in str(error) and error.detail in str(error)


def test_reason_is_the_first_line_that_says_something():
    detail = ("Failed in nopython mode pipeline (step: nopython frontend)\n"
              "No implementation of function Function(<built-in function add>) found for "
              "signature:\n \n >>> add(float64, unicode_type)\n \nThere are 20 candidates\n"
              "During: typing of call")
    assert reason(detail) == ("No implementation of function Function(<built-in function "
                              "add>) found for signature: >>> add(float64, unicode_type)")
    assert reason("Failed in x\nDuring: y") == "(no message)"
    assert len(reason("x" * 1000)) == 300
