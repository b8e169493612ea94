"""``solve_ivp`` for JAX arrays: the batched solver inside ``jax.jit``, on XLA's own buffers.

The JAX twin of :func:`hapsira_core.ivp.solve_ivp`: the same
:class:`~hapsira_core.ivp.Problem` (kernel, shared rows, output shapes),
run through :mod:`hapsira_core.fronts.jax.xla` instead of on numpy arrays, so the same
numbers bit for bit. Needs the ``jax`` extra and 64-bit JAX
(``jax.config.update("jax_enable_x64", True)``); see ``docs/jax.md``.
"""

import numpy as np

# first: without JAX it raises an ImportError that names the extra to install
from .xla import DerivativeError, xla_kernel

import jax  # noqa: E402  (after the import that explains a missing JAX)
import jax.numpy as jnp  # noqa: E402

from ...ivp import build, checks, results  # noqa: E402
from ...ivp.call import Arrays, Call  # noqa: E402
from ...ivp.layout import config_row  # noqa: E402
from .pytree import view  # noqa: E402

__all__ = ["solve_ivp", "IVPResult", "DerivativeError", "run"]


#: `hapsira_core.ivp.IVPResult` of JAX arrays, a pytree (`.pytree.view`).
IVPResult = view(results.IVPResult, __name__)


# -- argument checks that work on traced values -------------------------------

def require_x64(what):
    if not jax.config.jax_enable_x64:
        raise RuntimeError(f"{what} computes in float64, which JAX disables by default: "
                           "call jax.config.update('jax_enable_x64', True) at start-up (or "
                           "set JAX_ENABLE_X64=1)")


def is_jax(value):
    """A JAX array or a tracer (inside ``jit``/``vmap``)."""
    return isinstance(value, jax.Array)  # tracers are jax.Array instances too


def concrete(value):
    """``value`` as a numpy array, or None when it is traced."""
    try:
        return np.asarray(value)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def static(value, name):
    """A value that fixes the compiled program: it must not be traced."""
    array = concrete(value)
    if array is None:
        raise TypeError(f"{name}: expected concrete numbers (it fixes the compiled "
                        "program), got a traced value; pass it from outside jax.jit")
    return array


def option(value, name):
    """A concrete option as given (the numpy call's messages show it so); a JAX
    array read back, refused when traced."""
    return static(value, name) if is_jax(value) else value


def real(value, name, what="real numbers"):
    """``value`` as a float64 JAX array, with the numpy front's dtype rules.

    Anything else than a JAX array goes through
    :func:`~hapsira_core.ivp.checks.real_array` (masked, ragged, complex,
    text... refused as in the numpy call); a JAX array, traced or not, is
    checked by its dtype only, without reading it back.
    """
    if not is_jax(value):
        return jnp.asarray(checks.real_array(value, name, what))
    kind = np.dtype(value.dtype).kind
    if kind not in "iuf":
        kinds = {"b": "booleans", "c": "complex numbers"}
        raise TypeError(f"{name}: expected {what}, got {kinds.get(kind, value.dtype)}")
    return jnp.asarray(value, dtype=jnp.float64)


def params_rows(value, n_objects):
    """``(1, P)`` shared or ``(N, P)`` per-object rows, as :func:`checks.params`."""
    if value is None:
        return jnp.zeros((1, 1))
    if not is_jax(value):
        return jnp.asarray(checks.params(value, n_objects))
    return checks.params_shape(real(value, "params"), n_objects, jnp.zeros)


def _states(y0):
    """``(N, n)`` states and whether one object was given, as :func:`checks.states`."""
    if not is_jax(y0):
        y0, single = checks.states(y0)
        return jnp.asarray(y0), single
    array = real(y0, "y0")
    if array.ndim not in (1, 2) or array.shape[-1] == 0:
        raise ValueError(f"y0: expected shape (n,) or (N, n) with n >= 1, got {array.shape}")
    checks.states(np.zeros((1, array.shape[-1])))  # the numpy call's limit on n, its message
    single = array.ndim == 1
    return (array[None, :] if single else array), single


def _span(t_span, t_eval, n_objects):
    """``(t0, tf, t_eval)``; concrete ones checked as the numpy call does (per-object
    ``(N,)`` spans and ``(N, M)`` output times included: `checks.time_spans`,
    `checks.output_times`); traced ones by shape only."""
    if isinstance(t_span, (str, bytes)):
        checks.time_span(t_span)  # refused with the numpy call's message
    try:
        t0, tf = t_span
    except (TypeError, ValueError):
        checks.time_span(t_span)  # the numpy call's message where it has one
        raise ValueError(f"t_span: expected two real numbers (t0, tf), got {t_span!r}") from None
    values = [concrete(t0), concrete(tf)]
    times = None if t_eval is None else concrete(t_eval)
    if all(v is not None for v in values) and (t_eval is None or times is not None):
        t0, tf, times = checks.times((values[0], values[1]), times, n_objects)  # numpy's
        return t0, tf, jnp.asarray(times)
    if all(v is not None for v in values):
        checks.times((values[0], values[1]), None, n_objects)  # the span, as numpy's
    # something is traced: only shapes can be checked, values are the caller's to keep valid
    t0, tf = real(t0, "t_span"), real(tf, "t_span")
    for t in (t0, tf):
        if t.ndim > 1 or (t.ndim == 1 and t.shape[0] != n_objects):
            raise ValueError(f"t_span: expected two real numbers (t0, tf) or two arrays of "
                             f"shape ({n_objects},), got shapes {t0.shape} and {tf.shape}")
    per_object = t0.ndim == 1 or tf.ndim == 1
    if t_eval is None:  # each object's own end, as the numpy call
        return t0, tf, (jnp.broadcast_to(tf, (n_objects,))[:, None] if per_object else tf[None])
    times = real(t_eval, "t_eval")
    if times.ndim not in (1, 2) or times.size == 0 or (
            times.ndim == 2 and times.shape[0] != n_objects):
        raise ValueError(f"t_eval: expected shape (M,) or ({n_objects}, M) with M >= 1, got "
                         f"{times.shape}")
    return t0, tf, times


# -- the run ----------------------------------------------------------------

def _event_launch(kernel, te, ye, p, n):
    """`hapsira_core.ivp.event_derivatives.totals`'s kernel on XLA's buffers."""
    n_objects, records = ye.shape[:2]
    if not n_objects or not records:
        return jnp.zeros((n_objects, records, n * n)), jnp.zeros((n_objects, records, n))
    launch = xla_kernel(kernel, "hapsira event derivatives kernel")
    return tuple(launch(te, ye, p, n=n_objects, sizes={"nn": n * n, "n": n}))


def per_object_kernel(problem):
    """The kernel that this front runs for ``problem``: its per-object kernel (a
    lane kernel's `scalar`: the handlers call one object's body at a time)."""
    return getattr(problem.kernel, "scalar", problem.kernel)


def run(problem, y0, params, t0, tf, rtol, atol, what="hapsira solve_ivp kernel"):
    """:meth:`Problem.run <hapsira_core.ivp.Problem.run>` on JAX arrays, inside ``jax.jit``.

    ``y0`` ``(N, n)`` and ``params`` ``(1 or N, P)`` float64 JAX arrays (may
    be traced), ``t0``/``tf`` numbers or ``(N,)`` per-object arrays (may be traced),
    ``rtol``/``atol`` ``(n,)`` numpy arrays; the problem's ``t_eval`` ``(M,)`` or
    ``(N, M)`` may be a JAX array. The
    kernel's trimmed outputs as a dict of JAX arrays (``y`` ``(N, M, n)``,
    ``info``, ``t_events``, ``y_events``, ``n_events``).
    """
    known = [concrete(t) for t in (t0, tf)]
    n_objects = y0.shape[0]
    if all(t is not None for t in known):
        # numbers, or (N,) arrays of per-object spans: conf then has one row per object
        t_eval, conf, *rows = problem.shared_inputs(
            *[float(t) if t.ndim == 0 else t for t in known], rtol, atol)
    else:  # a traced time span: the row's other numbers are known, set t0, tf in the program
        t_eval, conf, *rows = problem.shared_inputs(0.0, 0.0, rtol, atol)
        layout = config_row(problem.n)
        if max(jnp.ndim(t0), jnp.ndim(tf)):  # per-object spans: one row each
            conf = np.repeat(conf, n_objects, axis=0)
        conf = jnp.asarray(conf).at[:, layout.t0].set(t0).at[:, layout.tf].set(tf)
    shapes = problem.output_shapes(n_objects)
    try:
        kernel = xla_kernel(per_object_kernel(problem), what)
        # the argument order of Problem.run: y0, t_eval, params, then the shared rows
        outputs = kernel(y0, t_eval, params, conf, *rows, n=n_objects,
                         sizes=kernel.output_sizes(shapes.values()))
    except Exception as error:  # told as the numpy front tells it (`build.explain`)
        build.explain(error, problem.user_functions, _diagnosis(problem, y0, params, known[0]))
        raise
    return problem.trim(dict(zip(shapes, outputs)))


def _diagnosis(problem, y0, params, t0):
    """The problem's ``diagnose()`` on the first object, or None; traced values
    are replaced by zeros of their shape (what a function returns is what is
    checked, rarely its numbers)."""
    if problem.diagnose is None or not y0.shape[0]:
        return None
    first_y = concrete(y0[:1])
    first_p = concrete(params[:1])
    y = np.zeros((1, y0.shape[1])) if first_y is None else first_y
    p = np.zeros((1, params.shape[1])) if first_p is None else first_p
    t = 0.0 if t0 is None else float(np.ravel(t0)[0])  # per-object spans: the first's
    return lambda: problem.diagnose(y, p, t)


class JaxArrays(Arrays):
    """`hapsira_core.ivp.call.Arrays` for JAX arrays, traced ones checked by shape only."""

    xp = jnp

    def states(self, y0):
        return _states(y0)

    def times(self, t_span, t_eval, n_objects):
        t0, tf, times = _span(t_span, t_eval, n_objects)
        # the options' checks read concrete values: a traced span (None here) leaves
        # first_step unchecked against it; made inside jit from the span as given: read that
        span = [concrete(t) for t in (t0, tf)]
        if any(t is None for t in span):
            span = [concrete(t) for t in t_span]
        # the default output times are the ends: read as given where traced inside jit
        known = (concrete(times) if t_eval is not None or span[1] is None
                 else np.atleast_1d(span[1]))
        return t0, tf, times, (span[0], span[1], known)

    def params(self, params, n_objects, stacklevel):
        return params_rows(params, n_objects)

    def option(self, value, name):
        return option(value, name)


def solve_ivp(fun, t_span, y0, method="DOP853", t_eval=None, rtol=1e-3, atol=1e-6, *,
              params=None, events=(), max_steps=100_000, max_event_records=64,
              max_step=float("inf"), first_step=None, args=None, stm=False, jac=None,
              dense_output=False, progress=False):
    """:func:`hapsira_core.ivp.solve_ivp` on JAX arrays, usable inside ``jax.jit``.

    Same arguments, semantics and numbers as the numpy call. ``y0``,
    ``params``, ``t_span`` and ``t_eval`` may be traced (traced times are
    not checked: keep ``t_eval`` inside ``t_span`` and sorted in the
    direction of integration); per-object spans (``t0``, ``tf`` of shape
    ``(N,)``) and output times (``t_eval`` ``(N, M)``, trailing NaN padding) as
    in the numpy call, ``res.t`` then ``(N, M)``. ``fun``, ``method``, ``rtol``,
    ``atol``, ``events``, ``max_steps``, ``max_event_records`` and ``stm`` fix the
    compiled program and must be concrete; so must ``max_step``, ``first_step`` and
    ``args`` (numbers, as in the numpy call; they do not recompile). ``stm=True``:
    ``res.stm`` ``(N, n, n, M)``, ``res.stm_events`` and ``res.stm_events_total``
    (one ``(N, C, n, n)`` per event) and ``res.dt_events_dy0`` (one ``(N, C, n)``) as
    in the numpy call (tuple form of ``fun`` only). ``jax.vmap`` over
    ``y0``/``params`` runs the batch as one call with more objects; ``jax.grad``
    raises :class:`~hapsira_core.fronts.jax.xla.DerivativeError`. ``jac``,
    ``dense_output``, ``progress`` and ``t_eval="steps"`` are refused, naming this
    front (`hapsira_core.ivp.call.FEATURES`).

    Returns
    -------
    IVPResult
        `hapsira_core.ivp.IVPResult`'s fields as JAX arrays, a pytree.
    """
    require_x64("hapsira_core.jax.solve_ivp")
    call, y0, rows = Call.check("JAX", fun, t_span, y0, method, t_eval, rtol, atol,
                                params=params, events=events, max_steps=max_steps,
                                max_event_records=max_event_records, progress=progress,
                                max_step=max_step, first_step=first_step, args=args, stm=stm,
                                jac=jac, dense_output=dense_output, arrays=ARRAYS,
                                stacklevel=3)
    y0, rows = call.inputs(y0, rows, jnp)
    raw = run(call.problem(), y0, rows, call.t0, call.tf, call.rtol, call.atol,
              "hapsira_core.jax.solve_ivp kernel")
    return call.result(raw, rows, IVPResult, _event_launch, tuple)


ARRAYS = JaxArrays()
