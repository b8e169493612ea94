"""numba-cuda-mlir as the cuda target's code generator: does it compile our kernel?

    HAPSIRA_TARGET=cuda PYTHONPATH=<numba-cuda-mlir>:src python \
        benchmarks/investigations/mlir_trial.py [--cc 9.0] [--n 1000000] [--out PATH]

numba-cuda-mlir (PyPI ``numba-cuda-mlir``, NVIDIA's successor to numba-cuda) is
"intended to be compatible with Numba-CUDA kernels" through its ``cuda`` module.
`hapsira_core.targets.cuda` is the only place that imports numba-cuda, so the
trial puts ``numba_cuda_mlir.cuda`` where ``numba.cuda`` is imported (an import
redirect for ``numba.cuda`` and its submodules, tried first under
``numba_cuda_mlir.cuda``, then ``numba_cuda_mlir.numba_cuda``) and then, step by
step, each printed with its time or the error that stopped it:

1. a small kernel (a device function, ``math.sqrt``, a grid-stride write) compiled
   and, where a GPU is present, run and checked;
2. the reference kernel (``cowell``'s DOP853 loop, two-body + J2), compiled to PTX
   for ``--cc`` (`benchmarks/kernel_stats.py`'s route);
3. where a GPU is present: ``cowell`` on ``--n`` objects through the public API,
   first call and the median of three, against the same call under numba-cuda in a
   child process.

Without a GPU (``--cc`` given) the compute capability numba-cuda-mlir asks the
driver for is answered with ``--cc``; its linker still needs the driver.
Writes JSON (``--out``) with each step's outcome.
"""

import argparse
import importlib
import importlib.abc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)


class _Redirect(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``numba.cuda[.X]`` imported as ``numba_cuda_mlir.cuda[.X]`` or
    ``numba_cuda_mlir.numba_cuda[.X]``, whichever exists."""

    PREFIXES = ("numba_cuda_mlir.cuda", "numba_cuda_mlir.numba_cuda", "numba_cuda_mlir")

    def find_spec(self, name, path=None, target=None):
        if name != "numba.cuda" and not name.startswith("numba.cuda."):
            return None
        tail = name[len("numba.cuda"):]
        for prefix in self.PREFIXES:
            try:
                if importlib.util.find_spec(prefix + tail) is not None:
                    return importlib.util.spec_from_loader(name, self, origin=prefix + tail)
            except ModuleNotFoundError:
                continue
        return None

    def create_module(self, spec):
        return importlib.import_module(spec.origin)

    def exec_module(self, module):
        pass


def step(record, name, call):
    start = time.perf_counter()
    try:
        value = call()
        record[name] = {"ok": True, "seconds": time.perf_counter() - start}
        print(f"{name}: ok in {record[name]['seconds']:.2f} s", flush=True)
        return value
    except Exception as error:  # noqa: BLE001 - the finding is the error itself
        text = "".join(traceback.format_exception_only(type(error), error)).strip()
        record[name] = {"ok": False, "seconds": time.perf_counter() - start,
                        "error": text[-2000:],
                        "where": traceback.format_exc().splitlines()[-12:]}
        print(f"{name}: FAILED after {record[name]['seconds']:.2f} s\n"
              + "\n".join(record[name]["where"]), flush=True)
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default=None, help="compile for this capability (no GPU)")
    parser.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    parser.add_argument("--out", default=None)
    parser.add_argument("--baseline", action="store_true",
                        help="(child) time cowell under numba-cuda and print JSON")
    args = parser.parse_args()
    record = {}
    if args.baseline:
        print(json.dumps(time_cowell(args.n)))
        return

    import numba_cuda_mlir
    record["numba_cuda_mlir"] = getattr(numba_cuda_mlir, "__version__", "?")
    if args.cc:
        cc = tuple(int(x) for x in args.cc.split("."))
        import numba_cuda_mlir.tools as tools
        tools.get_gpu_compute_capability = lambda kind=tuple: cc
    sys.meta_path.insert(0, _Redirect())
    for name in [m for m in sys.modules if m == "numba.cuda" or m.startswith("numba.cuda.")]:
        del sys.modules[name]
    import numba
    from numba import cuda
    numba.cuda = cuda
    if args.cc:  # no driver here: the availability check would fail before compiling
        cuda.is_available = lambda: True
    record["shims"] = shim()
    print(f"numba.cuda is {cuda.__name__} ({record['numba_cuda_mlir']})", flush=True)

    gpu = args.cc is None
    step(record, "small kernel", lambda: small_kernel(cuda, gpu))
    step(record, "reference kernel to PTX",
         lambda: reference_ptx(cuda, args.cc or "9.0"))
    if gpu:
        timed = step(record, "cowell through the API", lambda: time_cowell(args.n))
        if timed:
            record["cowell_mlir"] = timed
        child = subprocess.run([sys.executable, __file__, "--baseline", "--n", str(args.n)],
                               capture_output=True, text=True,
                               env=dict(os.environ, PYTHONPATH=os.pathsep.join(
                                   p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                   if "mlir" not in p)))
        try:
            record["cowell_numba_cuda"] = json.loads(child.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            record["cowell_numba_cuda"] = {"error": child.stderr[-2000:]}
        print("numba-cuda:", record["cowell_numba_cuda"], flush=True)
    if args.out:
        with open(args.out, "w") as fh:
            json.dump(record, fh, indent=1)


#: Names numba-cuda has and numba-cuda-mlir 0.6.0 lacks, each given a stand-in so that
#: the trial gets to the next difference: (module, name, stand-in, what it was for).
SHIMS = [
    ("numba.cuda.memory_management.nrt", "NRT_LIBRARY", None,
     "the NRT library's path, told apart from foreign code a kernel links (cache)"),
]


def shim():
    done = []
    for module, name, value, why in SHIMS:
        owner = importlib.import_module(module)
        if not hasattr(owner, name):
            setattr(owner, name, value)
            done.append(f"{module}.{name}: {why}")
    return done


def small_kernel(cuda, gpu):
    import math

    import numpy as np

    @cuda.jit(device=True)
    def twice_root(x):
        return 2.0 * math.sqrt(x)

    @cuda.jit
    def kernel(a, out):
        i = cuda.grid(1)
        while i < out.shape[0]:
            out[i] = twice_root(a[i])
            i += cuda.gridsize(1)

    if not gpu:
        return cuda.compile_ptx(kernel.py_func, "void(float64[::1], float64[::1])")
    a = np.arange(1000.0)
    out = np.zeros_like(a)
    kernel[8, 128](a, out)
    assert np.array_equal(out, 2.0 * np.sqrt(a)), "wrong numbers"


def reference_ptx(cuda, cc):
    """`kernel_stats.kernel_ptx` with numba-cuda-mlir's own types (it does not take
    numba's)."""
    import kernel_stats
    import workloads
    return kernel_stats.kernel_ptx(
        workloads.two_body_j2, tuple(int(x) for x in cc.split(".")),
        importlib.import_module("numba_cuda_mlir.numba_cuda.types"),
        importlib.import_module("numba_cuda_mlir.numba_cuda.np.numpy_support").from_dtype)


def time_cowell(n):
    import numpy as np

    import workloads
    from hapsira_cowell import cowell
    from workloads import ATOL, DAY, K, RTOL
    rr, vv = workloads.leo_cloud(n, 0)
    tofs = np.array([DAY])
    start = time.perf_counter()
    res = cowell(K, rr, vv, tofs, RTOL, ATOL, f=workloads.two_body_j2)
    first = time.perf_counter() - start
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        res = cowell(K, rr, vv, tofs, RTOL, ATOL, f=workloads.two_body_j2)
        samples.append(time.perf_counter() - start)
    return {"first_s": first, "median_s": statistics.median(samples), "samples_s": samples,
            "steps": int(res.nsteps.sum()), "failed": int((res.status < 0).sum()),
            "rr_checksum": float(np.nansum(res.rr[:, -1]))}


if __name__ == "__main__":
    main()
