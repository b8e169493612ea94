"""A C function in a cuda kernel (hapsira_core.foreign): linked without a GPU, and timed on one.

    python benchmarks/foreign.py link [--cc 9.0]            (sets HAPSIRA_TARGET=cuda itself)
    HAPSIRA_TARGET=cuda python benchmarks/foreign.py run [--n 1000000] [--repeat 2] [--out NAME]

``link`` (no GPU): compiles a per-object kernel that evaluates
``examples/c_drag.py``'s ``drag_c`` (two-body + drag with the piecewise
exponential atmosphere of ``examples/density.c``, a C function two hjit calls
deep) to LTO-IR for a compute capability (default 9.0, the H100), together
with the code its foreign declaration carries (the C source, compiled by
NVRTC), and links them with nvJitLink into a cubin, as numba-cuda does before
a launch. Then the same with the C precompiled to an ``.ltoir`` file and
declared with ``device_code=``. Needs the CUDA toolkit's libNVVM, NVRTC,
nvJitLink and nvdisasm (``pip install "cuda-toolkit[nvvm,nvrtc,nvdisasm]==13.*"
"nvidia-nvjitlink==13.*"``). Prints whether the kernel links without the C
(it must not), the size of each cubin, and whether a call to the C function
is left in the machine code (with LTO it is inlined into the kernel).

``run`` (one GPU): ``c_drag.drag_c`` against the same model written in hjit
(``drag_hjit``). N objects, one day, 25 output times. Two processes in a row
share one empty kernel cache (``HAPSIRA_CACHE=1``, a fresh
``HAPSIRA_CACHE_DIR``); each reports, for the C kernel and the hjit twin: the
first call (compile or cache load, plus one run), the best of ``--repeat``
further calls, registers, whether the kernel was on disk before the first
call, the warnings raised, and whether the two agree to the bit. The second
process shows what it reuses: its first calls against the first process's.
Writes ``benchmarks/results/gpu_foreign.json`` (``--out``).
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")
sys.path.insert(0, HERE)

import harness  # noqa: E402

# --- link: without a GPU ---

def link(codes, arch):
    """nvJitLink, as numba-cuda links a kernel with LTO: the cubin's bytes."""
    from cuda.core import Linker, LinkerOptions, ObjectCode

    objects = []
    for code in codes:  # LTO-IR bytes, NVRTC's ObjectCode, or numba's LinkableCode (a file)
        if not isinstance(code, ObjectCode):
            code = ObjectCode.from_ltoir(getattr(code, "data", code))
        objects.append(code)
    linker = Linker(*objects, options=LinkerOptions(arch=arch, link_time_optimization=True))
    return linker.link("cubin").code


def kernel_codes(f, cc):
    """LTO-IR of a kernel evaluating ``f`` once per object, and the code its
    foreign declarations carry (the C compiled by NVRTC, or the given file)."""
    import numba
    from numba.cuda.compiler import compile_all

    from hapsira_core.jit import Arg, ObjectKernel, hjit

    @hjit
    def body(y, p, out):
        drr, dvv = f(0.0, (y[0], y[1], y[2]), (y[3], y[4], y[5]), 398600.4418, p)
        for i in range(3):
            out[i], out[3 + i] = drr[i], dvv[i]

    kernel = ObjectKernel(body, [Arg("y", np.float64, ("six",)), Arg("p", np.float64, ("np",)),
                                 Arg("out", np.float64, ("six",), output=True)])
    types = tuple(numba.types.Array(numba.from_dtype(arg.dtype), len(arg.core) + 1, "C")
                  for arg in kernel.args)
    codes, _ = compile_all(kernel._kernel_function()[0], types, device=False, cc=cc,
                           output="ltoir", abi="numba")
    return codes


def report(name, codes, cc, symbols):
    arch = f"sm_{cc[0]}{cc[1]}"
    cubin = link(codes, arch)
    nvdisasm = harness.nvidia_tool("nvdisasm")
    left = "not checked (no nvdisasm)"
    if nvdisasm:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "kernel.cubin")
            with open(path, "wb") as out:
                out.write(cubin)
            sass = subprocess.run([nvdisasm, "-c", path], capture_output=True, text=True,
                                  check=True).stdout
        calls = [s for s in symbols if re.search(rf"CALL\S*\s+`?\(?{s}", sass)]
        left = f"calls left to {calls}" if calls else "no call left: inlined by LTO"
    print(f"{name}: {len(codes)} codes linked into a {arch} cubin of {len(cubin)} bytes; {left}")


def link_main(args):
    os.environ["HAPSIRA_TARGET"] = "cuda"  # compiled for a GPU, whatever the environment says
    cc = harness.pretend_device(args.cc)

    sys.path.insert(0, EXAMPLES)
    import c_drag

    codes = kernel_codes(c_drag.drag_c, cc)
    try:  # control: the kernel alone does not link, the C it calls is missing
        link(codes[:1], f"sm_{cc[0]}{cc[1]}")
        print("control: the kernel linked without the C code (unexpected)")
    except Exception as error:
        lines = [x for x in str(error).splitlines() if "ndefined" in x] or [type(error).__name__]
        print(f"control: the kernel alone does not link: {lines[0].strip()[:160]}")
    report("C source (CUSource)", codes, cc, [c_drag.density_c.symbol])

    # The same C precompiled to LTO-IR, in the C ABI, and linked as device_code.
    from numba.cuda.cudadrv import nvrtc

    from hapsira_core.foreign import declare

    with open(os.path.join(EXAMPLES, "density.c")) as handle:
        text = handle.read()
    source = ("typedef long long int64_t;\n#define HAPSIRA_FUNC static __device__\n" + text
              + 'extern "C" __device__ double density_ltoir(double h, const double *table, '
              "int64_t rows) { return density(h, table, rows); }\n")
    ltoir, _ = nvrtc.compile(source, "density_ltoir.cu", cc, ltoir=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "density.ltoir")
        with open(path, "wb") as out:
            out.write(ltoir.code if hasattr(ltoir, "code") else ltoir)
        density_ltoir = declare(
            "double density_ltoir(double h, const double *table, int64_t rows)",
            os.path.join(EXAMPLES, "density.c"), device_code=path, device_abi="c")
        report("precompiled LTO-IR (device_code)", kernel_codes(drag_with(density_ltoir), cc),
               cc, ["density_ltoir"])


def drag_with(density):
    """c_drag.drag_c with another density function."""
    from hapsira_core.jit import hjit
    from hapsira_core.vec import norm
    from hapsira_cowell.perturbations import R_EARTH, atmospheric_drag, two_body

    @hjit
    def drag(t, rr, vv, k, p):
        drr, dvv = two_body(t, rr, vv, k, p)
        rho = density(norm(rr) - R_EARTH, p[3:], int(p[2]))
        d = atmospheric_drag(t, rr, vv, k, p[0], p[1], rho)
        return drr, (dvv[0] + d[0], dvv[1] + d[1], dvv[2] + d[2])
    return drag



# --- run: on one GPU ---

def child(n, repeat):
    sys.path.insert(0, EXAMPLES)
    t = time.perf_counter()
    import c_drag  # declares the C: NVRTC compiles it once on a GPU
    from hapsira_cowell import cowell
    from hapsira_core.ivp.build import KERNELS as _KERNELS
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


def run_main(args):
    folder = tempfile.mkdtemp(prefix="hapsira-foreign-")
    env = dict(os.environ, HAPSIRA_CACHE="1", HAPSIRA_CACHE_DIR=folder)
    record = {"n_objects": args.n, "processes": []}
    try:
        for number in (1, 2):
            start = time.perf_counter()
            done = subprocess.run([sys.executable, os.path.abspath(__file__), "run", "--child",
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
    harness.write_result(args.out, record)
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



def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    link = sub.add_parser("link", help="link a kernel calling C without a GPU")
    link.add_argument("--cc", default="9.0", help="compute capability")
    run = sub.add_parser("run", help="the C kernel against its hjit twin on a GPU")
    run.add_argument("--n", type=int, default=1_000_000)
    run.add_argument("--repeat", type=int, default=2)
    run.add_argument("--timeout", type=float, default=240.0)
    run.add_argument("--out", default="gpu_foreign", help="result name or path")
    run.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.mode == "link":
        return link_main(args)
    if args.child:
        return child(args.n, args.repeat)
    return run_main(args)


if __name__ == "__main__":
    main()
