"""A C function linked into a cuda kernel, against its hjit twin, in two fresh processes.

    HAPSIRA_TARGET=cuda python benchmarks/gpu_foreign.py [--n 1000000] [--out PATH]

``examples/c_drag.py``: two-body + drag whose density comes from
``examples/density.c`` (declared with ``hapsira_core.foreign.declare``, so on
a GPU the C is compiled by NVRTC and linked into every kernel that calls it),
and the same model written in hjit. N objects, one day, 25 output times. Two
processes in a row share one empty kernel cache (``HAPSIRA_CACHE=1``, a
fresh ``HAPSIRA_CACHE_DIR``); each reports, for the C kernel and the hjit
twin: the first call (compile or cache load, plus one run), the best of
``--repeat`` further calls, registers, whether the kernel was on disk before
the first call, the warnings raised, and whether the two agree to the bit.
The second process shows what it reuses: its first calls against the first
process's. Writes JSON (default ``benchmarks/results/gpu_foreign.json``).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")


def child(n, repeat):
    sys.path.insert(0, EXAMPLES)
    t = time.perf_counter()
    import c_drag  # declares the C: NVRTC compiles it once on a GPU
    from hapsira_cowell import cowell
    from hapsira_cowell.cowell import _KERNELS
    import_s = time.perf_counter() - t
    r0, v0, p = c_drag.low_orbits(n)
    tofs = np.linspace(0.0, 86400.0, 25)
    report = {"n_objects": n, "import_and_declare_s": import_s}
    results = {}
    for name, f in (("C", c_drag.drag_c), ("hjit", c_drag.drag_hjit)):
        known = set(_KERNELS)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = time.perf_counter()
            results[name] = cowell(c_drag.K, r0, v0, tofs, f=f, params=p)
            first = time.perf_counter() - t
        kernel = next(_KERNELS[k] for k in _KERNELS if k not in known)
        best = 1e99
        for _ in range(repeat):
            t = time.perf_counter()
            results[name] = cowell(c_drag.K, r0, v0, tofs, f=f, params=p)
            best = min(best, time.perf_counter() - t)
        report[name] = {"first_call_s": first, "seconds": best,
                        "kernel_seconds": kernel.last_kernel_seconds,
                        "cache_name": kernel.cache_name,
                        "resources": kernel.resources(),
                        "warnings": sorted({f"{w.category.__name__}: {w.message}"[:300]
                                            for w in caught})}
    c, twin = results["C"], results["hjit"]
    diff = np.linalg.norm(c.rr - twin.rr, axis=-1) / np.linalg.norm(twin.rr, axis=-1)
    report["max_rel_diff_c_vs_hjit"] = float(np.nanmax(diff))
    report["bit_equal"] = bool(np.array_equal(c.rr, twin.rr) and np.array_equal(c.vv, twin.vv))
    report["same_steps"] = bool(np.array_equal(c.nsteps, twin.nsteps))
    report["status_all_zero"] = bool(np.all(c.status == 0) and np.all(twin.status == 0))
    print(json.dumps(report))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=240.0)
    parser.add_argument("--out", default=os.path.join(HERE, "results", "gpu_foreign.json"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.n, args.repeat)
    folder = tempfile.mkdtemp(prefix="hapsira-foreign-")
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=folder)
    record = {"n_objects": args.n, "processes": []}
    try:
        for number in (1, 2):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                                   "--n", str(args.n), "--repeat", str(args.repeat)],
                                  env=env, capture_output=True, text=True, timeout=args.timeout)
            if done.returncode:
                record["processes"].append({"error": done.stderr.strip()[-3000:]})
                break
            result = json.loads(done.stdout.strip().splitlines()[-1])
            result["process_s"] = time.perf_counter() - start
            result["cache_files_after"] = sorted(
                os.path.relpath(os.path.join(d, f), folder)
                for d, _, files in os.walk(folder) for f in files)[:40]
            record["processes"].append(result)
            print(f"process {number}:", json.dumps(result), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as stream:
        json.dump(record, stream, indent=1)
    print("| process | C first call s | C best s | hjit first call s | hjit best s | "
          "bit-equal | whole process s |")
    print("|---|---|---|---|---|---|---|")
    for number, p in enumerate(record["processes"], 1):
        if "error" in p:
            print(f"| {number} | failed: {p['error'][-200:]} |")
            continue
        print(f"| {number} | {p['C']['first_call_s']:.2f} | {p['C']['seconds']:.3f} | "
              f"{p['hjit']['first_call_s']:.2f} | {p['hjit']['seconds']:.3f} | "
              f"{p['bit_equal']} | {p['process_s']:.1f} |")
    print(f"written to {args.out}")


if __name__ == "__main__":
    main()
