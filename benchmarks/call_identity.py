"""A fixed set of calls through every front, their outputs hashed: two sources, the same bits.

    PYTHONPATH=<checkout>/src:<checkout> python benchmarks/call_identity.py out.json [--overhead]

Runs ``solve_ivp`` on numpy arrays (events with their states, ``dense_output``
evaluated on a grid, ``t_eval``, ``t_eval="steps"``, per-object spans,
``stm=True``, ``args``), Radau with ``jac=`` (a function and a constant matrix),
``cowell`` (J2, an event, per-object params, ``stm=True``, per-object tofs),
``hapsira_core.jax.solve_ivp`` and the JAX ``cowell`` inside ``jax.jit``, and the
Dask fronts of both (synchronous scheduler); writes ``{call: sha256 of every output
array's bytes, in field order}`` to ``out.json``. Run it with ``PYTHONPATH`` at two
checkouts and compare the files (``--compare a.json b.json``): every hash equal means
every number of every call is the same, bit for bit, on the active target.

``--overhead``: also the time of one ``solve_ivp`` call on 1 object and of one
``cowell`` call on 1 object (warm kernels, median of many calls), microseconds
(``--overhead-only``: that alone).
"""

import hashlib
import json
import sys
import time

import numpy as np


def digest(arrays):
    h = hashlib.sha256()
    for name, value in arrays:
        value = np.ascontiguousarray(np.asarray(value))
        h.update(name.encode())
        h.update(str(value.dtype).encode())
        h.update(str(value.shape).encode())
        h.update(value.tobytes())
    return h.hexdigest()


def of_result(res):
    """Every array of a result, in field order (``res.arrays()``; numpy'd)."""
    out = []
    for name, value in res.arrays().items():
        value = getattr(value, "value", value)  # Quantities
        out.append((name, np.asarray(value)))
    return out


def calls():
    import warnings

    from hapsira_core.ivp import Event, solve_ivp
    from hapsira_cowell import cowell
    from hapsira_cowell.events import LithobrakeEvent

    sys.path.insert(0, __import__("os").path.dirname(__file__))
    import call_identity_functions as fn

    rng = np.random.default_rng(7)
    y0 = np.array([[1.0, 2.0], [1.5, 0.5], [0.7, 1.1]])
    p = np.array([1.0, 0.5, 0.8, 0.3])
    out = {}
    out["numpy_plain"] = of_result(solve_ivp(fn.lotka, (0.0, 15.0), y0, params=p))
    out["numpy_t_eval_events"] = of_result(solve_ivp(
        fn.lotka, (0.0, 15.0), y0, t_eval=np.linspace(0, 15, 31), rtol=1e-8, atol=1e-10,
        params=p, events=[Event(fn.x_minus_one, direction=1),
                          Event(fn.y_minus_two, terminal=2)], max_event_records=5))
    res = solve_ivp(fn.lotka, (0.0, 15.0), y0, method="RK45", params=p, dense_output=True)
    out["numpy_dense"] = of_result(res) + [("sol", res.sol(np.linspace(0, 15, 77)))]
    res = solve_ivp(fn.lotka, (0.0, 15.0), y0, method="RK23", params=p, t_eval="steps")
    out["numpy_steps"] = of_result(res)
    out["numpy_spans"] = of_result(solve_ivp(
        fn.lotka, (np.array([0.0, 1.0, 2.0]), np.array([5.0, -3.0, 9.0])), y0, params=p,
        t_eval=np.array([[1.0, 2.0, np.nan], [0.5, -1.0, -2.0], [3.0, 4.0, 5.0]])))
    out["numpy_stm"] = of_result(solve_ivp(
        fn.lotka, (0.0, 8.0), y0, t_eval=[2.0, 8.0], params=p, stm=True,
        events=[Event(fn.x_minus_one)]))
    out["numpy_args_steps"] = of_result(solve_ivp(
        fn.lotka, (0.0, 10.0), y0, args=(1.0, 0.5, 0.8, 0.3), max_step=0.7,
        first_step=0.01))
    out["numpy_array_form"] = of_result(solve_ivp(fn.lotka_array, (0.0, 15.0), y0, params=p))
    out["radau_jac_fun"] = of_result(solve_ivp(
        fn.robertson, (0.0, 40.0), np.array([1.0, 0.0, 0.0]), method="Radau", rtol=1e-6,
        atol=1e-10, jac=fn.robertson_jac))
    out["radau_jac_auto"] = of_result(solve_ivp(
        fn.robertson, (0.0, 40.0), np.array([1.0, 0.0, 0.0]), method="Radau", rtol=1e-6,
        atol=1e-10))
    a = np.array([[-1.0, 0.5], [0.0, -3.0]])
    out["bdf_jac_matrix"] = of_result(solve_ivp(
        fn.linear, (0.0, 5.0), y0[:, :2], method="BDF", jac=a, params=a.ravel()))
    res = solve_ivp(fn.robertson, (0.0, 40.0), np.array([1.0, 0.0, 0.0]), method="Radau",
                    rtol=1e-6, atol=1e-10, dense_output=True)
    out["radau_dense"] = of_result(res) + [("sol", res.sol(np.linspace(0, 40, 41)))]

    k = 398600.4418
    n = 5
    r0 = np.array([7000.0, 0.0, 0.0]) + rng.normal(0, 50, (n, 3))
    v0 = np.array([0.0, 7.546, 0.5]) + rng.normal(0, 0.01, (n, 3))
    tofs = np.linspace(60.0, 6000.0, 9)
    params = np.array([1.08263e-3, 6378.137])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out["cowell_two_body"] = of_result(cowell(k, r0, v0, tofs))
        out["cowell_j2_event"] = of_result(cowell(
            k, r0, v0, tofs * 10, f=fn.j2, params=params, events=[LithobrakeEvent(6378.137)]))
        out["cowell_stm"] = of_result(cowell(k, r0, v0, tofs, f=fn.j2, params=params,
                                             stm=True))
        rows = np.tile(tofs, (n, 1))
        rows[1, 5:] = np.nan
        rows[2] = -rows[2]
        out["cowell_tofs_rows"] = of_result(cowell(k, r0, v0, rows, max_step=400.0))
        out["cowell_one"] = of_result(cowell(k, r0[0], v0[0], tofs))

    try:
        import jax
    except ImportError:
        jax = None
    if jax is not None:
        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp
        from hapsira_core.jax import solve_ivp as jax_solve_ivp
        from hapsira_cowell.jax import cowell as jax_cowell

        res = jax.jit(lambda y, q: jax_solve_ivp(
            fn.lotka, (0.0, 15.0), y, t_eval=jnp.linspace(0, 15, 31), params=q,
            events=[Event(fn.x_minus_one, direction=1)]))(jnp.asarray(y0), jnp.asarray(p))
        out["jax_solve_ivp"] = of_result(res)
        res = jax_solve_ivp(fn.lotka, (0.0, 8.0), y0, t_eval=[2.0, 8.0], params=p, stm=True)
        out["jax_stm"] = of_result(res)
        res = jax.jit(lambda r, v: jax_cowell(k, r, v, tofs, f=fn.j2, params=params))(
            jnp.asarray(r0), jnp.asarray(v0))
        out["jax_cowell"] = of_result(res)
        out["jax_cowell_stm"] = of_result(jax_cowell(k, r0, v0, tofs, stm=True))
    try:
        import dask
        import dask.array as da
    except ImportError:
        da = None
    if da is not None:
        with dask.config.set(scheduler="synchronous"):
            y = da.from_array(y0, chunks=(2, 2))
            res = solve_ivp(fn.lotka, (0.0, 15.0), y, t_eval=np.linspace(0, 15, 31), params=p,
                            events=[Event(fn.x_minus_one, direction=1)]).compute()
            out["dask_solve_ivp"] = of_result(res)
            res = solve_ivp(fn.lotka, (0.0, 8.0), y, t_eval=[2.0, 8.0], params=p,
                            stm=True).compute()
            out["dask_stm"] = of_result(res)
            res = solve_ivp(fn.lotka, (0.0, 15.0), y, params=p, dense_output=True).compute()
            out["dask_dense"] = of_result(res) + [("sol", res.sol(np.linspace(0, 15, 77)))]
            rr = da.from_array(r0, chunks=(2, 3))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                res = cowell(k, rr, v0, tofs, f=fn.j2, params=params).compute()
                out["dask_cowell"] = of_result(res)
                res = cowell(k, rr, v0, tofs, stm=True).compute()
                out["dask_cowell_stm"] = of_result(res)
    return {name: digest(arrays) for name, arrays in out.items()}


def overhead(repeats=2000):
    """Median microseconds of one warm call on one object: solve_ivp (DOP853, one
    output time) and cowell (two-body, one tof)."""
    import os
    from hapsira_core.ivp import solve_ivp
    from hapsira_cowell import cowell

    sys.path.insert(0, os.path.dirname(__file__))
    import call_identity_functions as fn

    y0 = np.array([1.0, 2.0])
    p = np.array([1.0, 0.5, 0.8, 0.3])
    r0, v0 = np.array([7000.0, 0.0, 0.0]), np.array([0.0, 7.546, 0.5])
    timings = {}
    for name, call in (("solve_ivp_1", lambda: solve_ivp(fn.lotka, (0.0, 1.0), y0, params=p)),
                       ("cowell_1", lambda: cowell(398600.4418, r0, v0, [60.0]))):
        call()
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            call()
            samples.append(time.perf_counter() - start)
        samples.sort()
        timings[name] = {"median_us": 1e6 * samples[len(samples) // 2],
                         "p10_us": 1e6 * samples[len(samples) // 10]}
    return timings


def main(argv):
    if argv[:1] == ["--compare"]:
        a, b = (json.load(open(path)) for path in argv[1:3])
        names = sorted(set(a["hashes"]) | set(b["hashes"]))
        differ = [name for name in names if a["hashes"].get(name) != b["hashes"].get(name)]
        for name in names:
            print(f"{name:24s} {'same' if name not in differ else 'DIFFERENT'}")
        print(f"{len(names) - len(differ)} of {len(names)} calls bit-identical")
        return 1 if differ else 0
    import hapsira_core
    from hapsira_core import settings

    record = {"source": hapsira_core.__file__, "target": settings.TARGET}
    if "--overhead-only" not in argv:
        record["hashes"] = calls()
    if "--overhead" in argv or "--overhead-only" in argv:
        record["overhead"] = overhead()
    with open(argv[0], "w") as out:
        json.dump(record, out, indent=1)
    print(json.dumps(record, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
