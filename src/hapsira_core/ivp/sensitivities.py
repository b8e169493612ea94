"""Automatic Jacobians of ``solve_ivp``'s right-hand sides, compiled for the active target.

`jacobian()` turns ``fun(t, y, p) -> tuple`` (the tuple form) into an `hjit`
function ``jac(t, y, p)`` returning d fun / d y as a flat row-major tuple of
n * n floats (``jac(t, y, p)[i * n + j] = d fun_i / d y_j``). The derivative
code is made from ``fun``'s source by `hapsira_core.kernels.derivatives`
(forward mode, straight-line: no finite differences, no tape), and helpers
it calls are differentiated the same way, each compiled once (`factory`:
the disk cache and Dask workers rebuild them from the recipe).
"""

import ast
import inspect
import math
import textwrap
import types

from ..jit import hjit, rsqrt
from ..kernels import dependence, derivatives, twins
from ..kernels.cache import factory
from .layout import JACOBIAN_NOT_FINITE, STEP_TOO_SMALL
from .state import fun_form

NotDifferentiable = derivatives.NotDifferentiable

__all__ = ["jacobian", "value_and_jacobian", "NotDifferentiable"]


def _known():
    return ((rsqrt, "rsqrt"), (getattr(rsqrt, "py_func", rsqrt), "rsqrt"))


def _name(function):
    return getattr(getattr(function, "py_func", function), "__qualname__", repr(function))


@factory
def derivative_twin(function, spec):
    """``function``'s twin ``(same arguments) -> (value, J)``, J with respect to the
    arguments ``spec`` marks active (`hapsira_core.kernels.derivatives.transform`),
    compiled with `hjit`; helpers it calls get twins of their own, recursively."""
    py = getattr(function, "py_func", function)
    made = derivatives.transform(py, spec, _known())
    namespace = derivatives.namespace(py)
    namespace[derivatives.MATH] = math
    for name, callee, callee_spec in made.calls:
        namespace[name] = derivative_twin(callee, callee_spec)
    twin = twins.run(made.source, made.filename, namespace)[made.name]
    twin.__module__ = py.__module__
    twin.__qualname__ = f"{py.__qualname__}.<jacobian>"
    compiled = hjit(twin)
    compiled.hapsira_as_written = True  # its divisions are the derivative's, as written
    compiled.hapsira_zeros = made.zeros
    # whether J (item 1 of what the twin returns) is the same whatever its first two
    # arguments (t and y of fun(t, y, p)) are: fun affine in y, its coefficients
    # independent of t (`dependence`: a proof, or a false alarm, never a wrong "yes")
    definition = ast.parse(made.source).body[0]
    compiled.hapsira_jacobian_constant = not dependence.depends(
        definition, [a.arg for a in definition.args.args[:2]], returned_item=1)
    return compiled


def _state_spec(n):
    return (None, (derivatives.SCALAR,) * n, None)


def _checked(fun):
    form = fun_form(fun)
    if form == "array":
        raise NotDifferentiable(
            f"{_name(fun)}: the array form fun(t, y, p, dydt) is not differentiated in this "
            "version; write fun(t, y, p) -> tuple (n <= 16) or give the Jacobian by hand")
    if form != "tuple":
        raise NotDifferentiable(f"{_name(fun)}: expected fun(t, y, p) -> tuple of n floats")


def state_size(fun):
    """n for ``fun(t, y, p) -> tuple``: the length of the tuple it returns (read by
    differentiating it once with a guess of n taken from how it reads ``y``)."""
    py = getattr(fun, "py_func", fun)
    tree = ast.parse(textwrap.dedent(inspect.getsource(py))).body[0]
    y = tree.args.args[1].arg
    guess = 1
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)
                and node.value.id == y):
            index = node.slice
            if isinstance(index, ast.Constant) and type(index.value) is int:
                guess = max(guess, index.value + 1)
            if isinstance(index, ast.Slice) and isinstance(index.upper, ast.Constant):
                guess = max(guess, int(index.upper.value))
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
                and node.value.id == y and isinstance(node.targets[0], ast.Tuple)):
            guess = max(guess, len(node.targets[0].elts))
    try:
        out = derivatives.transform(py, _state_spec(guess), _known()).out
    except NotDifferentiable as error:
        if "index" not in str(error) and "unpacking" not in str(error):
            raise
        raise NotDifferentiable(f"{_name(fun)}: its state size could not be read from how "
                                f"it reads y (n = {guess} tried); pass n= to jacobian(): "
                                f"{error}") from None
    n = len(out) if isinstance(out, tuple) else 1
    if n != guess:
        out = derivatives.transform(py, _state_spec(n), _known()).out
        if (len(out) if isinstance(out, tuple) else 1) != n:
            raise NotDifferentiable(f"{_name(fun)}: the state size could not be read from "
                                    "its source; pass n= to jacobian()")
    return n


def value_and_jacobian(fun, n):
    """``vj(t, y, p) -> (fun(t, y, p), J)``, an hjit function, J flat row-major n x n."""
    _checked(fun)
    return derivative_twin(fun, _state_spec(n))


@factory
def _jacobian(fun, n):
    vj = derivative_twin(fun, _state_spec(n))

    @hjit
    def jac(t, y, p):
        return vj(t, y, p)[1]

    jac.hapsira_zeros = vj.hapsira_zeros
    jac.hapsira_jacobian_constant = vj.hapsira_jacobian_constant
    return jac


def jacobian(fun, n=None):
    """The Jacobian of ``fun(t, y, p) -> tuple`` (the tuple form of `solve_ivp`'s
    right-hand side) with respect to ``y``, as an `hjit` function.

    ``jac(t, y, p)`` returns the n x n Jacobian d fun / d y as a flat row-major
    tuple: ``jac(t, y, p)[i * n + j]`` is d fun_i / d y_j. It is made from
    ``fun``'s source (`hapsira_core.kernels.derivatives` says what is
    differentiated: arithmetic, ``math``'s functions, tuples, if/else, calls of
    other hjit functions); exact up to rounding, not finite differences. On
    cpu and parallel it is callable from Python (``y`` a tuple, ``p`` a 1-D
    array); on cuda it is a device function, called from other hjit code.
    ``n``: the state size, read from the length of the tuple ``fun`` returns
    where not given. Raises `NotDifferentiable` naming the construct, the
    function and the line where the source cannot be differentiated.
    """
    _checked(fun)
    if n is None:
        n = state_size(fun)
    return _jacobian(fun, int(n))


@factory
def variational(state_fun, fun, n):
    """``aug(t, z, p, dz)``: the state and its transition matrix as one array-form
    right-hand side of n + n * n components, ``z = (y, Phi)`` with ``Phi`` row-major:
    ``dy/dt = state_fun(t, y, p)``, ``dPhi/dt = J(t, y) Phi`` with J the automatic
    Jacobian of ``fun`` (the products written out, skipping the entries of J known
    to be zero). ``state_fun`` is the function the solver calls without ``stm``
    (``fun`` or its checked or reciprocal twin), so that the state's derivatives
    are the same numbers. Its norm takes the state's n components only
    (``hapsira_error_components``: `hapsira_core.ivp.state.ops`), so that the
    accepted steps are those of the state alone."""
    jac = _jacobian(fun, n)
    zeros = jac.hapsira_zeros
    state = ", ".join(f"z[{i}]" for i in range(n))
    lines = ["def variational_equations(t, z, p, dz):",
             f"    y = ({state},)",
             "    f = fun(t, y, p)",
             "    J = jac(t, y, p)"]
    lines += [f"    dz[{i}] = f[{i}]" for i in range(n)]
    for i in range(n):
        for j in range(n):
            terms = [f"J[{i * n + k}] * z[{n + k * n + j}]" for k in range(n)
                     if i * n + k not in zeros]
            lines.append(f"    dz[{n + i * n + j}] = {' + '.join(terms) or '0.0'}")
    source = "\n".join(lines) + "\n"
    filename = f"<hapsira variational equations of {_name(fun)}, n={n}>"
    namespace = twins.run(source, filename, {"fun": state_fun, "jac": jac, "__name__": __name__})
    made = hjit(namespace["variational_equations"])
    made.hapsira_error_components = n
    made.hapsira_as_written = True
    made.hapsira_checked_twin = True  # writes dz at constant indices only
    # its work rows interleaved across objects on a GPU: 1.57x (`.build.interleaves_work`)
    made.hapsira_interleave_work = True
    return made


def augmented_states(y0, n, xp=None):
    """``(N, n + n * n)``: each state followed by the identity, row-major; ``xp`` the
    array module of ``y0`` (numpy by default; ``jax.numpy`` on the JAX front)."""
    import numpy as np
    if xp is not None and xp is not np:
        eye = xp.broadcast_to(xp.eye(n).ravel(), (y0.shape[0], n * n))
        return xp.concatenate([y0, eye], axis=1)
    eye = np.broadcast_to(np.eye(n).ravel(), (y0.shape[0], n * n))
    return np.ascontiguousarray(np.concatenate([y0, eye], axis=1))


def augmented(fun, user_fun, n, rtol, atol):
    """``(fun, rtol, atol)`` of a run with ``stm=True``, for every front of ``solve_ivp``:
    the variational right-hand side (`variational`; `NotDifferentiable` first where
    ``user_fun`` cannot be differentiated) and the tolerances widened to n + n * n
    components (the matrix's are never read: its components take no part in the norm)."""
    import numpy as np
    value_and_jacobian(user_fun, n)  # refuses what it cannot differentiate
    fun = variational(fun, user_fun, n)
    rtol = np.concatenate([rtol, np.full(n * n, rtol[0])])
    atol = np.concatenate([atol, np.full(n * n, atol[0])])
    return fun, rtol, atol


def matrices(raw, n):
    """The matrices of an augmented run, object axis first, and ``raw``'s rows made
    the state's (changed in place): ``{"stm": (N, n, n, M), "stm_events": [one
    (N, C, n, n) per event]}``, the fields of the result (`.results`).

    ``stm_events`` is Phi at each recorded event, NaN-padded as ``y_events``: the
    matrix at the event's time, interpolated as the state is (the dense output of
    the augmented system), d y(t) / d y0 at t = t_event held fixed, without the
    motion of t_event itself with y0."""
    full = raw["y_events"]  # (N, E, C, n + n * n)
    at_events = [full[:, e, :, n:].reshape(full.shape[0], full.shape[2], n, n)
                 for e in range(full.shape[1])]
    states = raw["y"]
    raw["y"] = states[..., :n]
    raw["y_events"] = full[..., :n]
    stm = states[..., n:].reshape(states.shape[0], states.shape[1], n, n).transpose(0, 2, 3, 1)
    return {"stm": stm, "stm_events": at_events}


@factory
def jacobian_rows(fun, n):
    """``jac_into(t, y, p, J) -> J``: d fun / d y written into the first n rows of the
    2-D array ``J`` (``J[i, j] = d fun_i / d y_j``), ``y`` a row of n floats; the
    form the implicit methods keep their matrices in (rows of ``work``).

    ``fun`` in the tuple form: its automatic Jacobian (`jacobian`). ``fun`` already
    of the form ``jac(t, y, p, J)`` (a user's ``jac=`` for the array shape) is
    returned as it is."""
    if fun_form(fun) == "array":
        return fun
    jac = jacobian(fun, n)
    components = ", ".join(f"y[{i}]" for i in range(n)) + ("," if n == 1 else "")
    writes = "".join(f"    J[{i}, {j}] = flat[{i * n + j}]\n"
                     for i in range(n) for j in range(n))
    source = (f"def jac_into(t, y, p, J):\n    flat = jac(t, ({components}), p)\n"
              f"{writes}    return J\n")
    names = twins.run(source, f"<hapsira jacobian rows n={n} of {_name(fun)}>", {"jac": jac})
    made = hjit(names["jac_into"])
    made.hapsira_constant_jacobian = RECOGNISED if jac.hapsira_jacobian_constant else None
    return made


def _jac_name(jac):
    return _name(jac)


def check_jac(jac, n):
    """``jac`` as `solve_ivp` takes it, checked on the host: None, or an hjit function in
    the tuple form ``jac(t, y, p) -> flat row-major tuple of n * n floats`` or the array
    form ``jac(t, y, p, J)`` filling the 2-D array ``J`` (n x n). A TypeError naming
    ``jac`` otherwise. Returns ``jac``."""
    if jac is None:
        return None
    if not callable(jac) or not hasattr(jac, "py_func"):
        raise TypeError(f"jac: expected an hjit function jac(t, y, p) -> tuple of n * n = "
                        f"{n * n} floats or jac(t, y, p, J) filling J (n x n), or None; got "
                        f"{type(jac).__name__}")
    form = fun_form(jac)
    if form is None:
        raise TypeError(f"jac: {_jac_name(jac)} takes neither (t, y, p) nor (t, y, p, J): "
                        f"expected jac(t, y, p) -> tuple of n * n = {n * n} floats "
                        "(row-major: d fun_i / d y_j at i * n + j) or jac(t, y, p, J) "
                        "filling the n x n array J")
    return jac


def stand_in(fun, role):
    """The stand-in that a generic solve loop's ``fun`` carries for the function of
    ``role`` derived from it (``"jac"``: `method_jacobian`, ``"jac_t"``:
    `jacobian_with_time`), or None for any other ``fun``. The host targets compile an
    implicit method's loop once with stand-ins (`hapsira_core.targets._join.stub`)
    and each user's function and its Jacobian alone (`hapsira_core.ivp.build`)."""
    return dict(getattr(fun, "hapsira_stand_ins", ())).get(role)


def method_jacobian(fun, n, jac=None):
    """``jac_into(t, y, p, J) -> J``: d fun / d y written into the first n rows of the 2-D
    array ``J``, the one choice every implicit method makes the same way.

    ``jac`` (`solve_ivp`'s ``jac=``): an hjit function in the tuple form ``jac(t, y, p)
    -> flat row-major tuple of n * n floats`` (read as ``J[i, j] = jac[i * n + j]``) or
    the array form ``jac(t, y, p, J)`` filling ``J``. None: the automatic Jacobian of a
    tuple-form ``fun`` (`jacobian_rows`); an array-form ``fun`` then raises a ValueError
    naming ``jac`` (it is not differentiated in this version). A generic loop's ``fun``:
    its stand-in (`stand_in`)."""
    found = stand_in(fun, "jac")
    return found if found is not None else _method_jacobian(fun, n, jac)


@factory
def _method_jacobian(fun, n, jac=None):
    if jac is None:
        if fun_form(fun) == "array":
            raise ValueError(
                f"jac: {_name(fun)} is the array form fun(t, y, p, dydt), which is not "
                "differentiated automatically in this version; give its Jacobian as jac= "
                "(an hjit jac(t, y, p, J) filling the n x n array J), or write fun in the "
                "tuple form")
        return jacobian_rows(fun, n)
    form = fun_form(jac)
    if form == "array":
        @hjit
        def jac_into(t, y, p, J):
            jac(t, y, p, J)
            return J
        jac_into.hapsira_constant_jacobian = _given_constant(jac)
        return jac_into
    if form != "tuple":
        check_jac(jac, n)  # raises, naming jac
    components = ", ".join(f"y[{i}]" for i in range(n)) + ("," if n == 1 else "")
    writes = "".join(f"    J[{i}, {j}] = flat[{i * n + j}]\n"
                     for i in range(n) for j in range(n))
    source = (f"def jac_into(t, y, p, J):\n    flat = jac(t, ({components}), p)\n"
              f"{writes}    return J\n")
    names = twins.run(source, f"<hapsira jac= rows n={n} of {_name(jac)}>", {"jac": jac})
    made = hjit(names["jac_into"])
    made.hapsira_constant_jacobian = _given_constant(jac)
    return made


def jacobian_guard(n, row, column=0):
    """The check every implicit method makes of each Jacobian it evaluates, and the
    status of its failed step: ``finite(J, work)`` is False (and the flag at
    ``work[row, column]`` set) where an entry of the n x n matrix ``J`` is NaN or
    infinite; ``failure(work)`` (the loop's hook: `.loop`) is then
    `.layout.JACOBIAN_NOT_FINITE`, whose message names the Jacobian, else
    `.layout.STEP_TOO_SMALL`; ``bad(work)`` reads the flag, ``clear(work)`` (at t0)
    lowers it. A method stops the object at a Jacobian not finite: scipy's Newton
    iterations would only fail on it until the step fell below 10 ulp."""

    @hjit
    def finite(J, work):
        for i in range(n):
            for j in range(n):
                if not math.isfinite(J[i, j]):
                    work[row, column] = 1.0
                    return False
        return True

    @hjit
    def bad(work):
        return work[row, column] != 0.0

    @hjit
    def clear(work):
        work[row, column] = 0.0

    @hjit
    def failure(work):
        return JACOBIAN_NOT_FINITE if work[row, column] != 0.0 else STEP_TOO_SMALL

    return types.SimpleNamespace(finite=finite, bad=bad, clear=clear, failure=failure)


#: `constant_jacobian`'s answers: a constant matrix the user gave (``jac=`` an array,
#: read from the params row by `params_jacobian`) or a Jacobian whose source shows it
#: constant in t and y (the automatic one of a fun affine in y, or a user's ``jac=``)
GIVEN, RECOGNISED = "given", "recognised"


def constant_jacobian(jac_into):
    """None, `GIVEN` or `RECOGNISED`: whether the implicit methods may evaluate the
    Jacobian ``jac_into`` (of `method_jacobian`, `jacobian_with_time`) once, at t0, and
    never again. They then treat it as scipy treats a constant ``jac=`` matrix: never
    evaluated again after a failed Newton iteration (the step is halved at once) or a
    slow one (Radau); ``njev`` 0 for a matrix given (as scipy's), 1 for one recognised
    (the evaluation at t0)."""
    return getattr(jac_into, "hapsira_constant_jacobian", None)


def _given_constant(jac):
    """`constant_jacobian` of a user's hjit ``jac=``: `GIVEN` for `params_jacobian`,
    `RECOGNISED` where its source shows that what it gives reads neither t nor y."""
    if jac is params_jacobian:
        return GIVEN
    try:
        definition = twins.definition(getattr(jac, "py_func", jac))[2]
    except twins.SourceUnavailable:
        return None
    arguments = [a.arg for a in definition.args.args]
    written = arguments[3:4]  # the array form's J
    return None if dependence.depends(definition, arguments[:2], written=written) \
        else RECOGNISED


@hjit
def params_jacobian(t, y, p, J):
    """A constant Jacobian given to `solve_ivp` as a matrix (``jac=`` an (n, n) or
    (N, n, n) array): the last n * n numbers of the object's params row, row-major
    (`hapsira_core.ivp.checks.with_jacobian` appends them there)."""
    n = J.shape[0]
    start = p.shape[0] - n * n
    for i in range(n):
        for j in range(n):
            J[i, j] = p[start + i * n + j]




def jacobian_with_time(fun, n):
    """``jt_into(t, y, p, J, ft)``: d fun / d y into the first n rows of ``J`` and
    d fun / d t into the row ``ft``, from one forward-mode derivative of a tuple-form
    ``fun`` with respect to ``t`` and ``y`` (what a Rosenbrock method needs: exact, no
    finite difference in t). ``jt_into.hapsira_autonomous``: every d fun / d t is known
    to be zero (then ``ft`` is not written and a method may drop the term). A generic
    loop's ``fun``: its stand-in (`stand_in`)."""
    found = stand_in(fun, "jac_t")
    return found if found is not None else _jacobian_with_time(fun, n)


@factory
def _jacobian_with_time(fun, n):
    _checked(fun)
    spec = (derivatives.SCALAR, (derivatives.SCALAR,) * n, None)
    vj = derivative_twin(fun, spec)
    zeros = vj.hapsira_zeros
    width = n + 1  # row i: d fun_i / dt, then d fun_i / d y_j
    autonomous = all(i * width in zeros for i in range(n))
    components = ", ".join(f"y[{i}]" for i in range(n)) + ("," if n == 1 else "")
    lines = ["def jt_into(t, y, p, J, ft):",
             f"    flat = vj(t, ({components}), p)[1]"]
    for i in range(n):
        if not autonomous:
            lines.append(f"    ft[{i}] = flat[{i * width}]")
        lines += [f"    J[{i}, {j}] = flat[{i * width + 1 + j}]" for j in range(n)]
    source = "\n".join(lines) + "\n    return J\n"
    names = twins.run(source, f"<hapsira jacobian and d/dt n={n} of {_name(fun)}>", {"vj": vj})
    made = hjit(names["jt_into"])
    made.hapsira_autonomous = autonomous
    # J and df/dt both constant in t and y (fun = A y + b t + c): evaluated once
    made.hapsira_constant_jacobian = RECOGNISED if vj.hapsira_jacobian_constant else None
    return made
