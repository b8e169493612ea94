"""The joined cowell lane kernel of one fresh process, whatever its cache folder holds and
whatever the process did before: its speed and its machine code.

    HAPSIRA_CACHE_DIR=... python benchmarks/investigations/lane_join_fresh.py
        [--objects 256] [--rounds 20] [--width 8] [--f two_body_j2|two_body]
        [--auto] [--small-first N] [--perturb NAME[,NAME]] [--label-offset N]
        [--dump DIR] [--out NAME]

The cpu target (``HAPSIRA_TARGET`` may say parallel), ``HAPSIRA_LANES`` = ``--width``: one
`cowell` call of the LEO cloud for a day (`benchmarks/workloads.py`) with ``--f`` as its
right-hand side, then the lane kernel alone on the same arrays, ``--rounds`` times, in
process CPU time. Run on an empty cache folder (the generic lane loop compiled here, then
joined), again on the same folder (the joined kernel loaded), and after ``--f two_body``
(the loop loaded, the join done here): the three cases of a first call.

What the process does first: ``--auto`` (``HAPSIRA_LANES=auto`` with lanes from
``AUTO_LANES_MIN_OBJECTS`` compiled or not), ``--small-first N`` (a call of N objects under
``auto`` first: the per-object kernel), ``--label-offset N`` (numba's block labels moved
on, as earlier compiles of a process move them), ``--perturb`` (`PERTURBATIONS`: states
forced on the join to see which gives a slow kernel, and histories: another lane kernel
first, a first call interrupted in the lanes' vectoriser window).

Prints (and with ``--out`` writes ``benchmarks/results/<NAME>.json``): whether the loop
was compiled or loaded and the join done here or loaded, the first call's CPU seconds,
the kernel's CPU ms (best, median), packed and scalar multiplications in the joined
kernel's object code (objdump; from its cache entry, else from memory), numba's SLP
setting when the joined module's passes ran, the output's digest and the load average.
``--dump DIR``: the joined module's LLVM IR before its passes, to compare processes.
"""

import argparse
import hashlib
import json
import os
import pickle
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)
os.environ.setdefault("HAPSIRA_TARGET", "cpu")

import numpy as np  # noqa: E402

import workloads  # noqa: E402
from hapsira_core import settings  # noqa: E402


def _multiplications(object_code):
    """Packed and scalar multiplications in ``object_code`` (the joined kernel's ELF
    object: one function, the entry, everything else inlined or private), by objdump."""
    with tempfile.NamedTemporaryFile(suffix=".o") as handle:
        handle.write(object_code)
        handle.flush()
        asm = subprocess.run(["objdump", "-d", "--no-show-raw-insn", handle.name],
                             capture_output=True, text=True, check=True).stdout
    return {"packed": len(re.findall(r"\bvmulpd\b", asm)),
            "scalar": len(re.findall(r"\bvmulsd\b", asm)),
            "instructions": len(re.findall(r"^\s+[0-9a-f]+:\s", asm, re.M))}


def _watch(dump):
    """Record numba's SLP setting where the joined module is optimised; dump its IR."""
    import numba
    from numba.core import codegen

    seen = {}
    library = codegen.CPUCodeLibrary
    add, final = library.add_llvm_module, library._optimize_final_module

    def joined(module):
        return any(f.name.startswith("hapsira.join.") and not f.is_declaration
                   for f in module.functions)

    def add_llvm_module(self, ll_module):
        if joined(ll_module):
            text = str(ll_module)
            seen["function_passes_slp"] = numba.core.config.SLP_VECTORIZE
            seen["ir_sha"] = hashlib.sha256(text.encode()).hexdigest()[:16]
            seen["ir_functions"] = sum(1 for f in ll_module.functions if not f.is_declaration)
            if dump:
                os.makedirs(dump, exist_ok=True)
                with open(os.path.join(dump, "joined_before.ll"), "w") as out:
                    out.write(text)
        return add(self, ll_module)

    def optimize_final_module(self):
        if joined(self._final_module):
            seen["module_passes_slp"] = numba.core.config.SLP_VECTORIZE
            if dump:
                with open(os.path.join(dump, "joined_after_function_passes.ll"), "w") as out:
                    out.write(str(self._final_module))
        return final(self)

    library.add_llvm_module = add_llvm_module
    library._optimize_final_module = optimize_final_module
    return seen


def _f_compiled_with_slp():
    """The user's function's wrapper (and so the function) compiled with SLP on."""
    import numba

    from hapsira_core.targets import _join
    wrapper = _join.wrapper

    def perturbed(*args):
        old = numba.core.config.SLP_VECTORIZE
        numba.core.config.SLP_VECTORIZE = 1
        try:
            return wrapper(*args)
        finally:
            numba.core.config.SLP_VECTORIZE = old
    _join.wrapper = perturbed


def _join_depth(depth):
    """The join's SLP depth set to ``depth`` inside the lanes' vectoriser."""
    import contextlib

    import llvmlite.binding as llvm

    from hapsira_core.targets import _join
    vectoriser = _join.lane_vectoriser

    @contextlib.contextmanager
    def perturbed():
        with vectoriser():
            llvm.set_option("", f"-slp-recursion-max-depth={depth}")
            yield
    _join.lane_vectoriser = perturbed
    _join.JoinedLaneKernel.optimising = lambda self: perturbed()


def _function_passes_without_slp():
    """The joined module's function passes (numba's, as it is added) without SLP."""
    import numba
    from numba.core import codegen

    library = codegen.CPUCodeLibrary
    functions = library._optimize_functions

    def perturbed(self, ll_module):
        old = numba.core.config.SLP_VECTORIZE
        numba.core.config.SLP_VECTORIZE = 0
        try:
            return functions(self, ll_module)
        finally:
            numba.core.config.SLP_VECTORIZE = old
    library._optimize_functions = perturbed


def _van_der_pol_first():
    """Another lane kernel (Van der Pol's, its own loop) compiled and run first, as a
    process that ran other lanes before (a test run, a benchmark of several workloads)."""
    from hapsira_core.ivp import solve_ivp

    y0, params = workloads.problem("van_der_pol", 64)
    solve_ivp(workloads.van_der_pol, workloads.SPANS["van_der_pol"], y0, method="DOP853",
              rtol=workloads.ENSEMBLE_RTOL, atol=workloads.ENSEMBLE_ATOL, params=params)


def _interrupted_first():
    """The first call interrupted (Ctrl-C) while the lanes' attempt is lowered, then
    called again, as a user would: the loop is compiled twice."""
    import numba
    from numba.core import lowering
    from hapsira_cowell import cowell

    plain = lowering.Lower.lower

    def interrupted(self):
        if numba.core.config.SLP_VECTORIZE:  # (inside the lanes' vectoriser window)
            lowering.Lower.lower = plain
            raise KeyboardInterrupt
        return plain(self)

    lowering.Lower.lower = interrupted
    r0, v0 = workloads.leo_cloud(16, seed=2)
    try:
        cowell(workloads.K, r0, v0, np.array([workloads.DAY]), f=workloads.two_body_j2)
    except KeyboardInterrupt:
        pass
    finally:
        lowering.Lower.lower = plain
    from hapsira_core.ivp import build
    build.KERNELS.clear()


#: hypotheses' states forced on the join, to see which gives the slow kernel
PERTURBATIONS = {"none": lambda: None, "f_slp": _f_compiled_with_slp,
                 "join_depth12": lambda: _join_depth(12),
                 "join_depth32": lambda: _join_depth(32),
                 "function_passes_no_slp": _function_passes_without_slp,
                 "van_der_pol_first": _van_der_pol_first,
                 "interrupted_first": _interrupted_first}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--width", type=int, default=8)
    parser.add_argument("--f", default="two_body_j2", choices=("two_body_j2", "two_body"))
    parser.add_argument("--small-first", type=int, default=0)
    parser.add_argument("--auto", action="store_true",
                        help="HAPSIRA_LANES=auto, lanes from AUTO_LANES_MIN_OBJECTS "
                             "compiled or not")
    parser.add_argument("--perturb", default="none",
                        help="comma-separated: " + ", ".join(PERTURBATIONS))
    parser.add_argument("--label-offset", type=int, default=0,
                        help="numba's next block label moved on by this much first, as "
                             "earlier compiles of the process move it")
    parser.add_argument("--dump", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()

    from hapsira_core.ivp import build
    from hapsira_core.targets import _join
    from hapsira_cowell import cowell
    from hapsira_cowell.perturbations import two_body

    settings.LANES = args.width
    if args.auto:
        from hapsira_core.targets import _host
        _host.AUTO_LANES_COMPILE_OBJECTS = 0
    fun = {"two_body_j2": workloads.two_body_j2, "two_body": two_body}[args.f]
    load_before = os.getloadavg()
    seen = _watch(args.dump)
    if args.label_offset:
        from numba.core import ir_utils
        ir_utils._the_max_label.update(ir_utils._the_max_label.next() + args.label_offset)
    for name in args.perturb.split(","):
        PERTURBATIONS[name]()
    generics = {}
    generic = _join.generic

    def watched_generic(key, make_kernel):
        generics["loop"] = "cached" if _join.generic_ready(key) else "compiled"
        return generic(key, make_kernel)

    _join.generic = watched_generic
    if args.small_first:  # auto's per-object kernel first, as a small call runs it
        settings.LANES = "auto"
        r0, v0 = workloads.leo_cloud(args.small_first, seed=1)
        cowell(workloads.K, r0, v0, np.array([workloads.DAY]), f=fun, rtol=workloads.RTOL,
               atol=workloads.ATOL)
    settings.LANES = "auto" if args.auto else args.width
    r0, v0 = workloads.leo_cloud(args.objects, seed=0)
    start = time.process_time()
    out = cowell(workloads.K, r0, v0, np.array([workloads.DAY]), f=fun, rtol=workloads.RTOL,
                 atol=workloads.ATOL)
    first_s = time.process_time() - start
    (kernel,) = [k for s, k in build.KERNELS.items() if s.lanes and s.n == 6]
    arrays = []
    plain = type(kernel).__call__
    type(kernel).__call__ = lambda self, *a: arrays.append(a) or plain(self, *a)
    try:
        again = cowell(workloads.K, r0, v0, np.array([workloads.DAY]), f=fun,
                       rtol=workloads.RTOL, atol=workloads.ATOL)
    finally:
        type(kernel).__call__ = plain
    arrays = [np.asarray(a) for a in arrays[-1]]
    times = []
    for _ in range(args.rounds):
        start = time.process_time()
        kernel(*arrays)
        times.append(1e3 * (time.process_time() - start))
    found = _join._read(kernel.cache_name)
    stats = _multiplications(pickle.loads(found[1])[2][0] if found
                             else kernel._library._get_compiled_object())
    result = {"f": args.f, "perturb": args.perturb, "label_offset": args.label_offset,
              "objects": args.objects, "width": args.width,
              "loop": generics.get("loop", "not asked (joined kernel loaded)"),
              "join": "here" if "ir_sha" in seen else "loaded",
              "first_call_cpu_s": round(first_s, 2),
              "kernel_ms": {"best": round(min(times), 2),
                            "median": round(statistics.median(times), 2)},
              "multiplications": stats, "numba": seen,
              "digest": hashlib.sha256(out.rr.tobytes() + out.vv.tobytes()).hexdigest()[:16],
              "same_again": out.rr.tobytes() == again.rr.tobytes(),
              "load_average_before": load_before, "load_average_after": os.getloadavg()}
    print(json.dumps(result))
    if args.out:
        import harness
        harness.write_result(args.out, result, indent=1)


if __name__ == "__main__":
    main()
