"""What a lane join costs, phase by phase, under other LLVM settings for the joined module,
and the speed of what each setting compiles.

    python benchmarks/investigations/join_cost.py [--workload leo|lorenz] [--variants a,b]
        [--rounds 60] [--repeat 1] [--out NAME]

One process, the cpu target, W = 8. The workload's joined lane kernel
(`hapsira_core.targets._join.JoinedLaneKernel`) is compiled once as a first call does; then
the same function is joined again to the same generic lane loop under each variant
(`VARIANTS`: the joined module's pass pipeline, SLP depth and options), each join timed
in process CPU seconds by phase:

* ``wrapper_s``: the user's function's wrapper compiled by numba, and the modules linked;
* ``cheap_s``: numba's cheap module passes (O0 with inlining, before reference pruning);
* ``full_s``: the full module passes (numba's: O3, with the lanes' SLP vectoriser);
* ``codegen_s``: machine code (MCJIT's ``finalize_object``).

Each variant's kernel then runs on the workload's arrays, its outputs checked byte for
byte against the default join's, and all kernels are timed alone, alternated round by
round, in process CPU time (``kernel_ms``: best and median). ``--repeat``: joins per
variant (each phase's least kept, ``join_s_all`` every join's total).

``--cold``: instead, the workload's first call on an empty cache folder (the lane loop
compiled, then joined), in a new process, timed in process CPU seconds by numba pass
and by LLVM stage (``finalize_object``: machine code; nested compiles count in their
caller's pass too), with the output's digest.

Writes ``benchmarks/results/<NAME>.json`` (default ``join_cost_<workload>``, with
``--cold`` ``join_cost_<workload>_cold``).
"""

import argparse
import collections
import contextlib
import hashlib
import json
import os
import re
import statistics
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
os.environ.setdefault("HAPSIRA_TARGET", "cpu")

import numpy as np  # noqa: E402

import harness  # noqa: E402
import workloads  # noqa: E402
from hapsira_core import settings  # noqa: E402

#: name: {"opt": full passes' level, "slp": SLP on, "depth": -slp-recursion-max-depth,
#: "cheap": numba's cheap passes first, "options": other LLVM options set around it}
VARIANTS = {
    "o3_slp64": dict(opt=3, slp=True, depth=64),
    "o3_slp32": dict(opt=3, slp=True, depth=32),
    "o3_slp24": dict(opt=3, slp=True, depth=24),
    "o3_slp12": dict(opt=3, slp=True, depth=12),
    "o2_slp64": dict(opt=2, slp=True, depth=64),
    "o1_slp64": dict(opt=1, slp=True, depth=64),
    "o3_noslp": dict(opt=3, slp=False, depth=12),
    "o3_slp64_nocheap": dict(opt=3, slp=True, depth=64, cheap=False),
    "o3_slp64_nohor": dict(opt=3, slp=True, depth=64,
                           options=("-slp-vectorize-hor=false",)),
    "o2_slp64_nohor": dict(opt=2, slp=True, depth=64,
                           options=("-slp-vectorize-hor=false",)),
}

LORENZ_OBJECTS = 4000


def _call(workload):
    if workload == "leo":
        from hapsira_cowell import cowell

        r0, v0 = workloads.leo_cloud(256, seed=0)
        return lambda: cowell(workloads.K, r0, v0, np.array([workloads.DAY]),
                              f=workloads.two_body_j2, rtol=workloads.RTOL,
                              atol=workloads.ATOL).rr.tobytes()
    from hapsira_core.ivp import solve_ivp
    from hapsira_core.jit import hjit

    @hjit
    def lorenz(t, y, p):
        return (p[0] * (y[1] - y[0]), y[0] * (p[1] - y[2]) - y[1], y[0] * y[1] - p[2] * y[2])

    y0 = np.random.default_rng(0).uniform(-10, 10, (LORENZ_OBJECTS, 3))
    return lambda: np.asarray(solve_ivp(lorenz, (0.0, 10.0), y0, method="DOP853", rtol=1e-8,
                                        atol=1e-8, params=[10.0, 28.0, 8 / 3]).y).tobytes()


def _kernel_and_arrays(call):
    """The joined lane kernel that ``call`` runs and the arrays the front hands it."""
    from hapsira_core.ivp import build

    build.KERNELS = {}
    call()
    (kernel,) = [k for s, k in build.KERNELS.items() if s.lanes]
    seen = []
    plain = type(kernel).__call__
    type(kernel).__call__ = lambda self, *arrays: seen.append(arrays) or plain(self, *arrays)
    try:
        call()
    finally:
        type(kernel).__call__ = plain
    return kernel, [np.array(a) for a in seen[-1]]


@contextlib.contextmanager
def _phases(variant, spent):
    """numba's final-module optimisation and machine code replaced by ``variant``'s,
    each phase's process CPU seconds added to ``spent``."""
    import llvmlite.binding as llvm
    from numba.core import codegen, config

    from hapsira_core.targets import _host

    library, jit = codegen.CPUCodeLibrary, codegen.JITCodeLibrary
    final, specific = library._optimize_final_module, jit._finalize_specific

    def optimise(self):
        cg = self._codegen
        start = time.process_time()
        if variant.get("cheap", True):
            pm, pb = cg._module_pass_manager(loop_vectorize=cg._loopvect, slp_vectorize=False,
                                             opt=cg._opt_level, cost="cheap")
            pm.run(self._final_module, pb)
        spent["cheap_s"] += time.process_time() - start
        llvm.set_option("", f"-slp-recursion-max-depth={variant['depth']}")
        for option in variant.get("options", ()):
            llvm.set_option("", option)
        start = time.process_time()
        pm, pb = cg._module_pass_manager(opt=variant["opt"], slp_vectorize=variant["slp"],
                                         loop_vectorize=config.LOOP_VECTORIZE)
        pm.run(self._final_module, pb)
        spent["full_s"] += time.process_time() - start
        llvm.set_option("", f"-slp-recursion-max-depth={_host._SLP_DEPTH_DEFAULT}")
        if variant.get("options"):
            llvm.set_option("", "-slp-vectorize-hor=true")

    def finish(self):
        start = time.process_time()
        specific(self)
        spent["codegen_s"] += time.process_time() - start

    library._optimize_final_module = optimise
    jit._finalize_specific = finish
    try:
        yield
    finally:
        library._optimize_final_module, jit._finalize_specific = final, specific


def _join_once(kernel, generic, name, variant):
    from hapsira_core.targets import _join

    spent = {"cheap_s": 0.0, "full_s": 0.0, "codegen_s": 0.0}
    entry = f"hapsira.join.investigation_{name}_{time.monotonic_ns()}"
    start = time.process_time()
    with _phases(variant, spent):
        library = _join.join(generic, kernel.functions, entry)
        address = library.get_pointer_to_function(entry)
    total = time.process_time() - start
    spent["wrapper_s"] = total - sum(spent.values())
    spent["join_s"] = total
    record = {k: round(v, 2) for k, v in spent.items()}
    asm = library.get_asm_str()
    record["packed_multiplications"] = len(re.findall(r"\bvmulpd\b", asm))
    record["scalar_multiplications"] = len(re.findall(r"\bvmulsd\b", asm))
    return library, address, record


def _cold_child(workload):
    """The first call on an empty cache (this process's), timed by numba pass and LLVM stage."""
    from numba.core import codegen, compiler_machinery

    spent = collections.Counter()

    def timed(owner, name, key):
        plain = getattr(owner, name)

        def run(*args):
            start = time.process_time()
            try:
                return plain(*args)
            finally:
                spent[key(*args) if callable(key) else key] += time.process_time() - start
        setattr(owner, name, run)

    timed(codegen.JITCodeLibrary, "_finalize_specific", "llvm: finalize_object")
    timed(codegen.CPUCodeLibrary, "_optimize_final_module", "llvm: module passes")
    timed(codegen.CPUCodeLibrary, "_optimize_functions", "llvm: function passes")
    timed(compiler_machinery.PassManager, "_runPass",
          lambda self, index, pss, state: "numba: " + pss.name())
    settings.LANES = 8
    call = _call(workload)
    start = time.process_time()
    out = call()
    first = time.process_time() - start
    print(json.dumps({"first_call_cpu_s": round(first, 2),
                      "digest": hashlib.sha1(out).hexdigest(),
                      "phases_cpu_s": {k: round(v, 2) for k, v in spent.most_common(12)}}))


def _cold(workload):
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hapsira-join-cost-") as folder:
        env = harness.child_env(cache=True, HAPSIRA_CACHE_DIR=folder, HAPSIRA_JOIN="1",
                                HAPSIRA_TARGET="cpu")
        return harness.run_child(
            f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r}); "
            f"import join_cost; join_cost._cold_child({workload!r})", env=env)


def _outputs(kernel, arrays):
    return [a for a, arg in zip(arrays, kernel.args) if arg.output]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="leo", choices=("leo", "lorenz"))
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=1,
                        help="joins per variant, alternated; each phase's least kept")
    parser.add_argument("--cold", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.cold:
        result = {"workload": args.workload, "width": 8, "load_average_before": os.getloadavg(),
                  "cold": _cold(args.workload), "load_average_after": os.getloadavg()}
        print(result)
        harness.write_result(args.out or f"join_cost_{args.workload}_cold", result, indent=1)
        return
    from hapsira_core.targets import _join

    settings.LANES = 8
    settings.JOIN = "on"
    load_before = os.getloadavg()
    kernel, arrays = _kernel_and_arrays(_call(args.workload))
    generic = _join.generic(kernel.generic_key, lambda: kernel._loop("investigation"))
    caller = kernel._caller()

    def run(address, given):
        kernel._run((address, caller), given)

    reference = [np.array(a) for a in arrays]
    run(kernel.compile()[0], reference)
    reference_bytes = [a.tobytes() for a in _outputs(kernel, reference)]

    joins, addresses, keep = {}, {}, []
    for name in args.variants.split(",") * args.repeat:
        library, address, record = _join_once(kernel, generic, name, VARIANTS[name])
        keep.append(library)
        if name in joins:
            joins[name]["join_s_all"].append(record["join_s"])
            for key in ("cheap_s", "full_s", "codegen_s", "wrapper_s", "join_s"):
                joins[name][key] = min(joins[name][key], record[key])
            print(name, record, flush=True)
            continue
        record["join_s_all"] = [record["join_s"]]
        mine = [np.array(a) for a in arrays]
        run(address, mine)
        record["same_bytes"] = [a.tobytes() for a in _outputs(kernel, mine)] == reference_bytes
        joins[name] = record
        addresses[name] = address
        print(name, record, flush=True)

    times = {name: [] for name in addresses}
    names = list(addresses)
    work = {name: [np.array(a) for a in arrays] for name in names}
    for r in range(args.rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            start = time.process_time()
            run(addresses[name], work[name])
            times[name].append(1e3 * (time.process_time() - start))
    for name, t in times.items():
        joins[name]["kernel_ms"] = {"best": round(min(t), 3),
                                    "median": round(statistics.median(t), 3)}
        print(name, joins[name]["kernel_ms"])
    result = {"workload": args.workload, "width": 8,
              "objects": 256 if args.workload == "leo" else LORENZ_OBJECTS,
              "variants": {n: VARIANTS[n] for n in joins}, "joins": joins,
              "rounds": args.rounds, "load_average_before": load_before,
              "load_average_after": os.getloadavg()}
    harness.write_result(args.out or f"join_cost_{args.workload}", result, indent=1)
    if not all(r["same_bytes"] for r in joins.values()):
        print("A VARIANT'S RESULTS DIFFER")
        sys.exit(1)


if __name__ == "__main__":
    main()
