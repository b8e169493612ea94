"""Link a cuda kernel that calls a C function (hapsira_core.foreign) without a GPU.

Compiles a per-object kernel that evaluates ``examples/c_drag.py``'s
``drag_c`` (two-body + drag with the piecewise exponential atmosphere of
``examples/density.c``, a C function two hjit calls deep) to LTO-IR for a
compute capability (default 9.0, the H100), together with the code its
foreign declaration carries (the C source, compiled by NVRTC), and links them
with nvJitLink into a cubin, as numba-cuda does before a launch. Then the
same with the C precompiled to an ``.ltoir`` file and declared with
``device_code=``. Needs the CUDA toolkit's libNVVM, NVRTC, nvJitLink and
nvdisasm (``pip install "cuda-toolkit[nvvm,nvrtc,nvdisasm]==13.*"
"nvidia-nvjitlink==13.*"``), no device::

    HAPSIRA_TARGET=cuda python benchmarks/foreign_link.py [--cc 9.0]

Prints whether the kernel links without the C (it must not), the size of
each cubin, and whether a call to the C function is left in the machine code
(with LTO it is inlined into the kernel).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numba
from numba import cuda

# Compiling needs no device: let hapsira's start-up check pass on a machine
# without one, and give everything that asks the compute capability wanted.
cuda.is_available = lambda: True
CC = (9, 0)


class _Device:
    @property
    def compute_capability(self):
        return CC


def _device():
    return _Device()


for _module in ("dispatcher", "compiler"):
    setattr(sys.modules[f"numba.cuda.{_module}"], "get_current_device", _device)
cuda.get_current_device = _device  # foreign compiles the C once for "this" GPU

import numpy as np  # noqa: E402

from hapsira_core.foreign import declare  # noqa: E402
from hapsira_core.jit import Arg, ObjectKernel, hjit  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def nvidia_tool(name):
    """The pip-installed toolkit's tool first: it matches the pip-installed libraries."""
    try:
        import nvidia.cu13
        candidate = os.path.join(list(nvidia.cu13.__path__)[0], "bin", name)
        if os.path.exists(candidate):
            return candidate
    except ImportError:
        pass
    return shutil.which(name)


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
    from numba.cuda.compiler import compile_all

    @hjit
    def body(y, p, out):
        drr, dvv = f(0.0, (y[0], y[1], y[2]), (y[3], y[4], y[5]), 398600.4418, p)
        for i in range(3):
            out[i], out[3 + i] = drr[i], dvv[i]

    kernel = ObjectKernel(body, [Arg("y", np.float64, ("six",)), Arg("p", np.float64, ("np",)),
                                 Arg("out", np.float64, ("six",), output=True)])
    types = tuple(numba.types.Array(numba.from_dtype(arg.dtype), len(arg.core) + 1, "C")
                  for arg in kernel.args)
    codes, _ = compile_all(kernel._kernel_function(), types, device=False, cc=cc,
                           output="ltoir", abi="numba")
    return codes


def report(name, codes, cc, symbols):
    arch = f"sm_{cc[0]}{cc[1]}"
    cubin = link(codes, arch)
    nvdisasm = nvidia_tool("nvdisasm")
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


def main():
    global CC
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="9.0")
    args = parser.parse_args()
    cc = CC = tuple(int(x) for x in args.cc.split("."))

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
    from hapsira_core.vec import norm
    from hapsira_cowell.perturbations import R_EARTH, atmospheric_drag, two_body

    @hjit
    def drag(t, rr, vv, k, p):
        drr, dvv = two_body(t, rr, vv, k, p)
        rho = density(norm(rr) - R_EARTH, p[3:], int(p[2]))
        d = atmospheric_drag(t, rr, vv, k, p[0], p[1], rho)
        return drr, (dvv[0] + d[0], dvv[1] + d[1], dvv[2] + d[2])
    return drag


if __name__ == "__main__":
    main()
