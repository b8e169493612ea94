"""Time per evaluation of `gravity_field` (EGM96) at 8x8, 20x20 and 70x70 on the cpu target.

    HAPSIRA_TARGET=cpu python benchmarks/gravity.py [--label NAME] [--points N] [--repeat K]
    HAPSIRA_TARGET=cuda python benchmarks/gravity.py --propagate N [--label NAME]

With ``--propagate N``: N LEO orbits propagated for one orbit (about 95 min)
with `cowell` and two-body + the field at each degree (degree = order) on the
active target, warm (second) call timed; the time per right-hand-side
evaluation is the wall time over the objects' total ``nfev``.

A compiled loop evaluates the field at N points (LEO to GEO, all latitudes) and
sums the results (so nothing is optimised away); the best of K runs over N gives
the time per evaluation. `J2_perturbation` is timed the same way for scale.
Results: benchmarks/results/gravity_<label>.json, with the machine.
"""

import argparse
import os
import sys

os.environ.setdefault("HAPSIRA_TARGET", "cpu")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import harness  # noqa: E402
from hapsira_core.jit import hjit  # noqa: E402
from hapsira_cowell.perturbations import (EGM96, EGM96_K, EGM96_R, J2_perturbation,  # noqa: E402
                                          gravity_field)


@hjit
def _field_sum(points, degree, order):
    sx = 0.0
    for i in range(points.shape[0]):
        a = gravity_field(10.0 * i, (points[i, 0], points[i, 1], points[i, 2]), (0.0, 0.0, 0.0),
                          EGM96_K, EGM96_R, EGM96, degree, order, 0.3)
        sx += a[0] + a[1] + a[2]
    return sx


@hjit
def _j2_sum(points):
    sx = 0.0
    for i in range(points.shape[0]):
        a = J2_perturbation(0.0, (points[i, 0], points[i, 1], points[i, 2]), (0.0, 0.0, 0.0),
                            EGM96_K, 1.0826e-3, EGM96_R)
        sx += a[0] + a[1] + a[2]
    return sx


def points(n, seed=1):
    rng = np.random.default_rng(seed)
    d = rng.normal(size=(n, 3))
    d /= np.linalg.norm(d, axis=1)[:, None]
    return d * rng.uniform(6700.0, 42200.0, n)[:, None]


def propagate(n_objects, label, repeat, named=False):
    import workloads
    from hapsira_core import settings
    from hapsira_cowell import cowell
    from hapsira_cowell.perturbations import two_body

    @hjit
    def field_f(t, rr, vv, k, p):
        drr, dvv = two_body(t, rr, vv, k, p)
        g = gravity_field(t, rr, vv, EGM96_K, EGM96_R, EGM96, int(p[0]), int(p[1]), p[2])
        return drr, (dvv[0] + g[0], dvv[1] + g[1], dvv[2] + g[2])

    r0, v0 = workloads.leo_cloud(n_objects)[:2]
    tofs = np.array([5700.0])
    rows = {}
    for degree in (2, 8, 20, 70):
        params = np.tile([float(degree), float(degree), 0.3], (n_objects, 1))
        cowell(EGM96_K, r0[:2], v0[:2], tofs, f=field_f, params=params[:2])  # compile
        out = {}

        def call():
            out["res"] = cowell(EGM96_K, r0, v0, tofs, f=field_f, params=params,
                                rtol=1e-11, atol=1e-12)

        best, samples, _ = harness.best_of(call, repeat)
        res = out["res"]
        nfev = int(np.asarray(res.nfev).sum())
        rows[f"{degree}x{degree}"] = {
            "wall_s": best, "samples_s": samples, "ok": int((np.asarray(res.status) == 0).sum()),
            "nfev_total": nfev, "ns_per_rhs_eval": best / nfev * 1e9,
            "steps_mean": float(np.asarray(res.nsteps).mean())}
        print(f"{degree:>3}x{degree:<3}: {best:.3f} s, {best / nfev * 1e9:.2f} ns per f "
              f"evaluation, {rows[f'{degree}x{degree}']['steps_mean']:.0f} steps", flush=True)
    harness.write_result(label if named else f"gravity_{label}", {
        "what": f"cowell, two-body + gravity_field (EGM96), {n_objects} LEO orbits, one "
                f"orbit (5700 s), rtol 1e-11, atol 1e-12, target {settings.TARGET}",
        "objects": n_objects, "results": rows})


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="2core")
    parser.add_argument("--out", default=None,
                        help="the result's path (default benchmarks/results/gravity_<label>.json)")
    parser.add_argument("--points", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--propagate", type=int, default=0,
                        help="objects to propagate (0: time evaluations alone)")
    args = parser.parse_args()
    if args.propagate:
        return propagate(args.propagate, args.out or args.label, min(args.repeat, 3),
                         named=bool(args.out))
    p = points(args.points)
    rows = {}
    _j2_sum(p[:2])
    best, samples, _ = harness.best_of(lambda: _j2_sum(p), args.repeat)
    rows["J2_perturbation"] = {"us_per_eval": best / len(p) * 1e6,
                               "samples_s": samples}
    for n in (8, 20, 70):
        _field_sum(p[:2], n, n)  # compile (once) and warm
        best, samples, _ = harness.best_of(lambda: _field_sum(p, n, n), args.repeat)
        rows[f"{n}x{n}"] = {"us_per_eval": best / len(p) * 1e6, "samples_s": samples}
    for name, row in rows.items():
        print(f"{name:>16}: {row['us_per_eval']:.3f} us per evaluation", flush=True)
    harness.write_result(args.out or f"gravity_{args.label}", {
        "what": "gravity_field (EGM96) time per evaluation, cpu target, one core",
        "points": args.points, "repeat": args.repeat, "results": rows})


if __name__ == "__main__":
    main()
