"""The method contract (`hapsira_core.ivp.methods.base`): every registered method fulfils
it, ``solve_ivp(method=...)`` takes a `Method` as well as a name, and the Rosenbrock
family is its tableau (`hapsira_core.ivp.methods.rosenbrock`)."""

import dataclasses
import pathlib

import numpy as np
import pytest

from hapsira_core.ivp import METHODS, Method, Rosenbrock, RosenbrockTableau, solve_ivp
from hapsira_core.ivp import build, loop, methods
from hapsira_core.ivp.butcher import ButcherTableau
from hapsira_core.ivp.methods import ExplicitMethod, Functions, base, rodas
from hapsira_core.ivp.state import ops as state_ops
from hapsira_core.jit import hjit


@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])


@hjit
def forced(t, y, p):  # not autonomous: Rodas' df/dt term
    return (y[1], -p[0] * y[0] - 0.1 * y[1] + 0.5 * t)


@pytest.mark.parametrize("name", METHODS)
def test_every_registered_method_fulfils_the_contract(name):
    method = METHODS[name]
    assert isinstance(method, Method) and methods.check(method) is method
    assert method.name == name and methods.get(name) is method and methods.builtin(name)
    assert method.error_exponent == pytest.approx(-1.0 / (method.error_estimator_order + 1))
    n = 3
    rows = method.rows_for(n)
    assert rows.total >= rows.coeffs > rows.y_new >= 0
    assert method.coefficient_states(n) >= 1
    shape = method.state_shape or "tuple"
    ops = state_ops(n, shape)
    parts = method.build(ops, True, van_der_pol)
    assert isinstance(parts, Functions) and method.build(ops, True, van_der_pol) is parts
    for hook in ("coefficients", "placeholder", "evaluate", "begin", "counts", "failure"):
        assert callable(getattr(parts, hook)), hook
    assert parts.step_nfev >= 0 and parts.dense_nfev >= 0 and parts.end_value_nfev >= 0
    assert parts.error_exponent == method.error_exponent
    if method.state_shape is None:  # explicit: a tableau, an attempt, the shared control
        assert isinstance(method.tableau, ButcherTableau)
        assert parts.attempt is not None and parts.step is None
        assert (parts.begin, parts.counts, parts.failure) == (
            base.no_begin, base.no_counts, base.step_too_small)
        assert not parts.interpolant_in_work
    else:  # implicit: states and matrices in work, its own step and counts
        assert method.state_shape == "array"
        assert parts.step is not None and parts.attempt is None
        assert parts.counts is not base.no_counts
        assert rows.total >= 2 * n  # its n x n matrices, at least the Jacobian and its LU
    if method.interpolant_block:
        assert parts.interpolant_in_work
    assert (parts.end_value is None) == (parts.end_value_nfev == 0)


def test_the_loop_reads_hooks_as_attributes():
    source = pathlib.Path(loop.__file__).read_text()
    assert "getattr(parts" not in source and "hasattr(parts" not in source


def test_functions_take_an_attempt_or_a_step():
    fields = {"coefficients": 1, "placeholder": 1, "evaluate": 1, "step_nfev": 1,
              "dense_nfev": 0, "error_exponent": -0.2}
    with pytest.raises(ValueError, match="either attempt .* or step .*, not neither"):
        Functions(**fields)
    with pytest.raises(ValueError, match="not both"):
        Functions(attempt=1, step=1, **fields)
    made = Functions(step=1, **fields)
    assert (made.begin, made.end_value, made.interpolant_in_work) == (base.no_begin, None,
                                                                     False)


def test_method_takes_a_registered_method_object():
    y0 = np.array([[2.0, 0.0], [0.5, -1.0]])
    kwargs = dict(params=[[1.0], [3.0]], rtol=1e-6, t_eval=np.linspace(0.0, 5.0, 6))
    by_name = solve_ivp(van_der_pol, (0.0, 5.0), y0, method="RK23", **kwargs)
    by_object = solve_ivp(van_der_pol, (0.0, 5.0), y0, method=METHODS["RK23"], **kwargs)
    assert by_object.y.tobytes() == by_name.y.tobytes()
    assert by_object.nfev.tolist() == by_name.nfev.tolist()
    # a method equal to a registered one (the same tableau, the same name) is that one
    assert methods.get(Rosenbrock(rodas.TABLEAU)) is METHODS["Rodas5P"]


def test_a_rosenbrock_method_over_another_tableau_runs_as_the_family():
    """A user's member of the family (here Rodas5P's numbers under another name) is a
    new method: run by the same code, it gives Rodas5P's steps and states bit for bit."""
    mine = Rosenbrock(dataclasses.replace(rodas.TABLEAU, name="Rodas5P-copy"))
    assert mine.name == "Rodas5P-copy" and mine.rows_for(3).total == \
        METHODS["Rodas5P"].rows_for(3).total
    y0 = np.array([[2.0, 0.0], [1.0, 1.0]])
    kwargs = dict(params=[[1.0], [4.0]], rtol=1e-6, t_eval=np.linspace(0.0, 2.0, 5))
    ours = solve_ivp(forced, (0.0, 2.0), y0, method=mine, **kwargs)
    reference = solve_ivp(forced, (0.0, 2.0), y0, method="Rodas5P", **kwargs)
    assert ours.status.tolist() == [0, 0]
    assert ours.y.tobytes() == reference.y.tobytes()
    for count in ("nfev", "nsteps", "njev", "nlu"):
        assert getattr(ours, count).tolist() == getattr(reference, count).tolist(), count
    # known by its name in this process, never written to the disk cache (a new process
    # would not know the name)
    assert methods.get("Rodas5P-copy") is mine and not methods.builtin("Rodas5P-copy")
    spec = build.KernelSpec("Rodas5P-copy", 2, forced)
    assert spec.recipe() is None and not spec.joins()


@pytest.mark.parametrize("method, match", [
    (3, r"method: expected one of 'DOP853', 'RK45', 'RK23', 'Radau', 'BDF', 'Rodas5P' or a "
        r"Method, got int$"),
    (None, r"or a Method, got NoneType$"),
    ("rodas5p", r"got 'rodas5p'; did you mean 'Rodas5P'\?$"),
])
def test_anything_else_is_refused_naming_method(method, match):
    with pytest.raises(ValueError, match=match):
        solve_ivp(van_der_pol, (0.0, 1.0), [1.0, 0.0], method=method, params=[1.0])


def test_a_method_that_breaks_the_contract_is_refused_naming_method():
    class Nameless(Method):
        error_estimator_order = 2

    with pytest.raises(ValueError, match="method: Nameless has no name"):
        methods.get(Nameless())

    class Unbuilt(Method):
        name = "Unbuilt"
        error_estimator_order = 2
        rows = METHODS["RK23"].rows

    with pytest.raises(ValueError, match="method: 'Unbuilt' does not build its functions"):
        methods.get(Unbuilt())
    # another object under a registered name: its kernels would be taken for the other's
    other = Rosenbrock(dataclasses.replace(rodas.TABLEAU, name="Radau"))
    with pytest.raises(ValueError, match="method: another Method is called 'Radau'"):
        methods.get(other)
    with pytest.raises(TypeError, match="tableau: expected a ButcherTableau"):
        ExplicitMethod(rodas.TABLEAU, None, 1, 1, 1)
    with pytest.raises(TypeError, match="tableau: expected a RosenbrockTableau"):
        Rosenbrock(METHODS["RK23"].tableau)


@pytest.mark.parametrize("change, match", [
    ({"d": (0.2,) + rodas.TABLEAU.d[1:]}, "d_1 = 0.2 is not gamma"),
    ({"c": (0.0, 0.6) + rodas.TABLEAU.c[2:]}, "c_2 = 0.6 is not a_21 gamma"),
    ({"c": rodas.TABLEAU.c[:-1] + (0.9,)}, "the last stage is at c = 0.9"),
    ({"a": rodas.TABLEAU.a[:3] + ((1.0,),) + rodas.TABLEAU.a[4:]},
     r"expected a's rows lower triangular .* got \[0, 1, 2, 1, 4"),
    ({"H": rodas.TABLEAU.H[:2]}, "expected 3 interpolant rows"),
    ({"error_estimator_order": 5}, "expected 0 < error_estimator_order < order"),
    ({"gamma": float("nan")}, "expected finite floats"),
])
def test_a_mangled_rosenbrock_tableau_is_refused(change, match):
    with pytest.raises(ValueError, match=f"Rosenbrock tableau 'Rodas5P': {match}"):
        dataclasses.replace(rodas.TABLEAU, **change)


def test_rodas5p_is_one_entry_of_the_family():
    method = METHODS["Rodas5P"]
    assert type(method) is Rosenbrock and method.tableau is rodas.TABLEAU
    assert isinstance(rodas.TABLEAU, RosenbrockTableau) and rodas.TABLEAU.n_stages == 8
    assert method.error_estimator_order == 4 and method.coefficient_states(5) == 4
