"""The joined lane kernel against the lane kernel compiled at once: the attempts' machine
code, what a join's time goes to, and the two kernels alone, alternated.

    python benchmarks/investigations/joined_lanes.py [--workload leo|van_der_pol|lotka_volterra]
        [--width 8] [--rounds 300] [--out NAME]

One process, the cpu target (`benchmarks/lanes.py`'s workloads). It builds the workload's
lane kernel compiled at once (``HAPSIRA_JOIN=0``) and joined
(`hapsira_core.targets._join.JoinedLaneKernel`), each called once through the front, and
checks that their outputs are the same bytes. Then:

* ``attempt``: the lanes' attempt that each kernel runs (the kernel compiled at once
  calls `hapsira_core.ivp.lanes.make_attempt`'s own code; the joined one its copy in the
  joined library): its instructions, packed and scalar multiplications, stack accesses
  and register moves, from the assembly;
* ``join``: the same function joined again to the generic lane loop, with the lanes'
  vectoriser (as a first call does) and without it: seconds in all, seconds of LLVM's
  module passes, packed multiplications left in the joined library;
* ``kernels``: each kernel alone on the workload's arrays (the front's Python left out),
  alternated round by round (the order turned every round), process CPU time in ms:
  best, quartiles, median.

Writes ``benchmarks/results/<NAME>.json`` (default ``joined_lanes_<workload>``).
"""

import argparse
import contextlib
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


def _call(workload):
    """The workload's call through its front (`benchmarks/lanes.py`'s), its outputs' bytes."""
    if workload == "leo":
        from hapsira_cowell import cowell

        r0, v0 = workloads.leo_cloud(256, seed=0)
        return lambda: cowell(workloads.K, r0, v0, np.array([workloads.DAY]),
                              f=workloads.two_body_j2, rtol=workloads.RTOL,
                              atol=workloads.ATOL).rr.tobytes()
    from hapsira_core.ivp import solve_ivp

    y0, params = workloads.problem(workload, 4000)
    fun = workloads.ENSEMBLES[workload]
    return lambda: np.asarray(solve_ivp(
        fun, workloads.SPANS[workload], y0, method="DOP853", rtol=workloads.ENSEMBLE_RTOL,
        atol=workloads.ENSEMBLE_ATOL, params=params).y).tobytes()


def _kernel_and_arrays(call, join):
    """The lane kernel that ``call`` runs with ``HAPSIRA_JOIN`` as given, its spec, the
    arrays the front hands it, and the call's output bytes."""
    from hapsira_core.ivp import build

    settings.JOIN = join
    build.KERNELS = {}
    out = call()
    (spec, kernel), = [(s, k) for s, k in build.KERNELS.items() if s.lanes]
    seen = []
    plain = type(kernel).__call__
    type(kernel).__call__ = lambda self, *arrays: seen.append(arrays) or plain(self, *arrays)
    try:
        call()
    finally:
        type(kernel).__call__ = plain
    arrays = [np.asarray(a) for a in seen[-1]]
    return spec, kernel, arrays, out


def _attempt(asm):
    """Counts of the function ``lanes.attempt`` in ``asm``."""
    (name,) = set(re.findall(r"^(\S*lanes7attempt\S*):", asm, re.M))
    body = asm[asm.index(f"\n{name}:"):]
    body = body[:body.index(".Lfunc_end")]
    instructions = re.findall(r"^\s+([a-z][a-z0-9]*)\b", body, re.M)
    return {"instructions": len(instructions),
            "packed_multiplications": len(re.findall(r"\bvmulpd\b", body)),
            "scalar_multiplications": len(re.findall(r"\bvmulsd\b", body)),
            "stack_accesses": len(re.findall(r"\(%rsp\)", body)),
            "vector_moves": len(re.findall(r"\bvmov[au]pd\b", body))}


def _join_again(kernel):
    """The kernel's functions joined again, with the lanes' vectoriser and without."""
    from numba.core import codegen

    from hapsira_core.targets import _host, _join

    generic = _join.generic(kernel.generic_key, lambda: kernel.LOOP(
        kernel.make_generic(), kernel.args, recipe=None))
    library = codegen.CPUCodeLibrary
    passes = library._optimize_final_module
    spent = []

    def timed(self):
        start = time.perf_counter()
        passes(self)
        spent.append(time.perf_counter() - start)

    result = {}
    library._optimize_final_module = timed
    try:
        for name, optimising in (("vectorised", _join.lane_vectoriser),
                                 ("not_vectorised", contextlib.nullcontext)):
            spent.clear()
            start = time.perf_counter()
            joined = _join.join(generic, kernel.functions, f"hapsira.join.investigation_{name}",
                                optimising)
            total = time.perf_counter() - start
            result[name] = {"join_s": round(total, 2),
                            "module_passes_s": round(sum(spent), 2),
                            "packed_multiplications": len(re.findall(
                                r"\bvmulpd\b", joined.get_asm_str()))}
    finally:
        library._optimize_final_module = passes
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workload", default="leo",
                        choices=("leo", "van_der_pol", "lotka_volterra"))
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from hapsira_core.ivp import lanes

    settings.LANES = args.width
    call = _call(args.workload)
    load_before = os.getloadavg()
    once_spec, once, once_arrays, once_out = _kernel_and_arrays(call, "off")
    _, joined, joined_arrays, joined_out = _kernel_and_arrays(call, "on")
    attempt = lanes.make_attempt(once_spec.method, once_spec.n, once_spec.fun, args.width,
                                 once_spec.event_functions, once_spec.records)
    (overload,) = attempt.overloads.values()
    fresh = not getattr(joined._library, "_disable_inspection", False)
    result = {"workload": args.workload, "width": args.width,
              "same_bytes": once_out == joined_out,
              "attempt": {"at_once": _attempt(overload.library.get_asm_str()),
                          "joined": (_attempt(joined._library.get_asm_str()) if fresh else
                                     "loaded from the cache: run with HAPSIRA_CACHE=0")},
              "join": _join_again(joined)}
    times = {"at_once": [], "joined": []}
    kernels = {"at_once": (once, once_arrays), "joined": (joined, joined_arrays)}
    for r in range(args.rounds):
        for name in (("at_once", "joined") if r % 2 == 0 else ("joined", "at_once")):
            kernel, arrays = kernels[name]
            start = time.process_time()
            kernel(*arrays)
            times[name].append(1e3 * (time.process_time() - start))
    result["kernels_ms"] = {
        name: {"best": round(min(t), 3), "q1": round(float(np.percentile(t, 25)), 3),
               "median": round(statistics.median(t), 3),
               "q3": round(float(np.percentile(t, 75)), 3)} for name, t in times.items()}
    result.update(rounds=args.rounds, load_average_before=load_before,
                  load_average_after=os.getloadavg())
    print(result)
    harness.write_result(args.out or f"joined_lanes_{args.workload}", result, indent=1)
    if not result["same_bytes"]:
        print("THE JOINED LANE KERNEL'S RESULTS DIFFER")
        sys.exit(1)


if __name__ == "__main__":
    main()
