"""What the per-object generic loop's first compile costs, and the speed of what it joins.

    python benchmarks/investigations/generic_cost.py cold --variants before=SRC,after=SRC
        [--workloads dop853,radau,cowell] [--rounds 3] [--out NAME]
    python benchmarks/investigations/generic_cost.py speed --variants before=SRC,after=SRC
        [--workloads cowell,vdp,hires] [--rounds 3] [--objects 256] [--repeat 7] [--out NAME]

A variant is a label, the ``src`` folder a child process imports hapsira from (another
checkout's, an exported revision's) and, after a colon, a value of
``HAPSIRA_GENERIC_PASSES`` (``label=SRC:none``: a switch that only the experiment's
commit has, which stub callers the generic loop leaves unoptimised: ``none``, ``none_t``
(and the callers of their callers), ``cheap``, ``full`` (all optimised, no machine code)).
Every measurement is one new process on an empty cache folder (``HAPSIRA_LANES=off``, the
cpu target), the variants alternated round by round, Lorenz (16 objects, DOP853 or Radau),
cowell (LEO, two-body + J2, one day), Van der Pol mu ~ 1000 and HIRES (Radau).

``cold``: the workload's first call: process CPU seconds of the call (``first_s``), of the
generic loop's compile (``generic_s``, `hapsira_core.targets._join.generic`) and of the
join (``join_s``, `_join.join`), with the LLVM stages inside each (``_optimize_functions``:
function passes, ``_optimize_final_module``: module passes, ``_finalize_final_module``:
machine code; numba's ``CPUCodeLibrary`` methods), and the output's digest.

``speed``: the first call, then the joined per-object kernel alone ``--repeat`` times on
the arrays the front handed it (process CPU ms), the front's output digested, the joined
machine code counted (instructions, calls, ``NRT_incref``/``NRT_decref`` calls left in
its IR, bytes of object code). The same machine code ran 25 to 30% slower in a few
processes of a loaded box: compare bests over processes.

Writes ``benchmarks/results/<NAME>.json`` (per-run records and medians).
"""

import argparse
import collections
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
os.environ.setdefault("HAPSIRA_TARGET", "cpu")
os.environ["HAPSIRA_LANES"] = "off"

import numpy as np  # noqa: E402

STAGES = ("_optimize_functions", "_optimize_final_module", "_finalize_final_module")


def _call(workload, n=16):
    """``call()``: the workload's front call, returning its output's bytes."""
    import workloads
    from hapsira_core.ivp import solve_ivp
    from hapsira_core.jit import hjit

    if workload == "cowell":
        from hapsira_cowell import cowell

        r0, v0 = workloads.leo_cloud(n, seed=0)
        return lambda: cowell(workloads.K, r0, v0, np.array([workloads.DAY]),
                              f=workloads.two_body_j2, rtol=workloads.RTOL,
                              atol=workloads.ATOL).rr.tobytes()
    if workload in ("vdp", "hires"):
        name = {"vdp": "van_der_pol_stiff", "hires": "hires"}[workload]
        y0, p = workloads.stiff_problem(name, n)
        rtol, atol = workloads.STIFF_TOL[name]
        fun = workloads.STIFF[name]
        return lambda: np.asarray(solve_ivp(fun, workloads.STIFF_SPANS[name], y0, method="Radau",
                                            rtol=rtol, atol=atol, params=p).y).tobytes()

    @hjit
    def lorenz(t, y, p):
        return (p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2])

    y0 = np.random.default_rng(1).normal(size=(n, 3)) + 1
    method = {"dop853": "DOP853", "radau": "Radau"}[workload]
    return lambda: np.asarray(solve_ivp(lorenz, (0.0, 1.0), y0, method=method, rtol=1e-8,
                                        atol=1e-10, params=[10.0, 28.0, 8 / 3]).y).tobytes()


def _cold_child(workload):
    """One first call on this process's (empty) cache folder, timed by part and stage."""
    from numba.core import codegen

    from hapsira_core.targets import _join

    spent = collections.Counter()
    inside = []  # the part (generic, join) running now

    def timed(owner, name, key):
        plain = getattr(owner, name)

        def run(*args, **kwargs):
            start = time.process_time()
            try:
                return plain(*args, **kwargs)
            finally:
                used = time.process_time() - start
                spent[key] += used
                if inside and key in STAGES:
                    spent[f"{inside[-1]}{key}"] += used
        setattr(owner, name, run)

    for stage in STAGES:
        timed(codegen.CPUCodeLibrary, stage, stage)
    generic, join = _join.generic, _join.join

    def part(name, function):
        def run(*args, **kwargs):
            inside.append(name)
            start = time.process_time()
            try:
                return function(*args, **kwargs)
            finally:
                spent[f"{name}_s"] += time.process_time() - start
                inside.pop()
        return run

    _join.generic, _join.join = part("generic", generic), part("join", join)
    call = _call(workload)
    start = time.process_time()
    out = call()
    record = {"first_s": time.process_time() - start}
    record.update(spent)
    record = {k: round(v, 3) for k, v in record.items()}
    record["digest"] = hashlib.sha256(out).hexdigest()[:16]
    print(json.dumps(record))


def _kernel_and_arrays(call):
    """The joined per-object kernel that ``call`` runs and the arrays the front hands it."""
    from hapsira_core.ivp import build
    from hapsira_core.targets import _join

    build.KERNELS = {}
    call()
    kernels = [k for k in build.KERNELS.values() if isinstance(k, _join.JoinedKernel)
               and not isinstance(k, _join.JoinedLaneKernel)]
    seen = []
    kind = type(kernels[0])
    plain = kind.__call__
    kind.__call__ = lambda self, *arrays: seen.append((self, arrays)) or plain(self, *arrays)
    try:
        call()
    finally:
        kind.__call__ = plain
    kernel, arrays = seen[-1]
    return kernel, [np.array(a) for a in arrays]


def _machine_code(library):
    from numba.core import registry

    asm = library.get_asm_str()
    instructions = [line.split()[0] for line in asm.splitlines()
                    if line.startswith("\t") and not line.startswith("\t.")]
    ir = str(library._final_module)
    tm = registry.cpu_target.target_context.codegen()._tm
    return {"instructions": len(instructions),
            "calls": sum(i.startswith("call") for i in instructions),
            "scalar_multiplications": len(re.findall(r"\bvmulsd\b", asm)),
            "stack_moves": len(re.findall(r"\(%rsp\)", asm)),
            "nrt_increfs": len(re.findall(r"call [^@\n]*@NRT_incref\b", ir)),
            "nrt_decrefs": len(re.findall(r"call [^@\n]*@NRT_decref\b", ir)),
            "object_bytes": len(tm.emit_object(library._final_module))}


def _speed_child(workload, objects, repeat):
    """The workload's first call on this process's cache folder, then its joined kernel
    alone ``repeat`` times (process CPU ms), its machine code counted."""
    call = _call(workload, objects)
    kernel, arrays = _kernel_and_arrays(call)
    front = hashlib.sha256(call()).hexdigest()[:16]
    times = []
    for _ in range(repeat):
        work = [a.copy() for a in arrays]
        start = time.process_time()
        kernel(*work)
        times.append(1e3 * (time.process_time() - start))
    # (digests: of the front's output; the kernel's own arrays hold unwritten rows)
    record = {"kernel_ms": [round(t, 2) for t in times], "digests": [front]}
    record.update(_machine_code(kernel._library))
    # where the code landed: the same machine code ran at other speeds in other processes
    record["entry_mod_4096"] = kernel._library.get_pointer_to_function(kernel.entry) % 4096
    print(json.dumps(record))


def _variants(text):
    """``label=src[:passes],...`` -> {label: (src, passes or None)}."""
    out = {}
    for item in text.split(","):
        label, spec = item.split("=")
        tree, _, passes = spec.partition(":")
        out[label] = (os.path.abspath(tree), passes or None)
    return out


def _child(variant, args, folder):
    tree, passes = variant
    env = dict(os.environ, PYTHONPATH=f"{tree}:{os.path.dirname(tree)}", HAPSIRA_CACHE="1",
               HAPSIRA_CACHE_DIR=folder)
    env.pop("HAPSIRA_GENERIC_PASSES", None)
    if passes:
        env["HAPSIRA_GENERIC_PASSES"] = passes
    done = subprocess.run([sys.executable, __file__] + args, env=env, capture_output=True,
                          text=True)
    if done.returncode:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _alternated(args, child_args):
    variants = _variants(args.variants)
    labels = list(variants)
    runs = {w: {v: [] for v in labels} for w in args.workloads}
    for round_ in range(args.rounds):
        for workload in args.workloads:
            for label in (labels if round_ % 2 == 0 else labels[::-1]):
                with tempfile.TemporaryDirectory() as folder:
                    record = _child(variants[label], child_args(workload), folder)
                record["load"] = round(os.getloadavg()[0], 2)
                runs[workload][label].append(record)
                print(workload, label, json.dumps(record), flush=True)
    return variants, runs


def cold(args):
    variants, runs = _alternated(args, lambda w: ["cold-child", w])
    summary = {}
    for workload, by_label in runs.items():
        summary[workload] = {}
        for label, records in by_label.items():
            keys = sorted({k for r in records for k in r} - {"digest", "load"})
            summary[workload][label] = {
                k: round(statistics.median(r.get(k, 0.0) for r in records), 3) for k in keys}
            summary[workload][label]["digests"] = sorted({r["digest"] for r in records})
    return {"mode": "cold", "variants": variants, "rounds": args.rounds, "median": summary,
            "runs": runs}


def speed(args):
    variants, runs = _alternated(
        args, lambda w: ["speed-child", w, str(args.objects), str(args.repeat)])
    summary = {}
    for workload, by_label in runs.items():
        summary[workload] = {}
        for label, records in by_label.items():
            times = [t for r in records for t in r["kernel_ms"]]
            made = {k: v for k, v in records[0].items()
                    if k not in ("kernel_ms", "digests", "load")}
            summary[workload][label] = dict(
                best_ms=min(times), median_ms=round(statistics.median(times), 2),
                digests=sorted({d for r in records for d in r["digests"]}), **made)
    return {"mode": "speed", "variants": variants, "rounds": args.rounds,
            "objects": args.objects, "repeat": args.repeat, "median": summary, "runs": runs}


def main():
    if sys.argv[1] == "cold-child":
        return _cold_child(sys.argv[2])
    if sys.argv[1] == "speed-child":
        return _speed_child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("cold", "speed"))
    parser.add_argument("--variants", required=True, help="label=src[:passes],...")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workloads", default="")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--objects", type=int, default=256)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    default = "dop853,radau,cowell" if args.mode == "cold" else "cowell,vdp,hires"
    args.workloads = (args.workloads or default).split(",")
    start = time.time()
    record = cold(args) if args.mode == "cold" else speed(args)
    import harness

    record.update(machine=harness.machine(),
                  load_end=[round(x, 2) for x in os.getloadavg()],
                  wall_s=round(time.time() - start))
    name = args.out or f"generic_cost_{args.mode}"
    with open(os.path.join(HERE, "results", f"{name}.json"), "w") as out:
        json.dump(record, out, indent=1)
    print("wrote", name)


if __name__ == "__main__":
    main()
