"""Static resources of the cuda kernel for the reference workload, without a GPU.

Compiles ``cowell``'s kernel (the core's DOP853 loop on 6 components) for the workload's ``f`` to PTX for a compute
capability (default 9.0, the H100), assembles it with ``ptxas`` and counts
the SASS instructions by kind. Needs the CUDA toolkit's libNVVM, ``ptxas`` and
``nvdisasm`` (``pip install "cuda-toolkit[nvvm,nvcc,nvdisasm]==13.*"``), no device::

    python benchmarks/kernel_stats.py [--drag] [--cc 9.0]   (sets HAPSIRA_TARGET=cuda itself)

Counts are static (each instruction once, loops not unrolled): the step
body is straight-line code, so they approximate the instructions per
attempted step.
"""

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import harness  # noqa: E402

nvidia_tool = harness.nvidia_tool


def kernel_ptx(f, cc, types=None, from_dtype=None):
    """PTX of ``cowell(f=f)``'s kernel for compute capability ``cc``; ``types`` and
    ``from_dtype``: the code generator's own (numba's by default; numba-cuda-mlir has
    its own type system, `investigations/mlir_trial.py`)."""
    import numba
    import numpy as np
    from numba import cuda

    from hapsira_core.ivp import build
    from hapsira_cowell.propagation.forms import orbit_rhs
    types = types or numba.types
    from_dtype = from_dtype or numba.from_dtype
    kernel = build.kernel("DOP853", 6, orbit_rhs(f), ())  # what cowell(f=f) runs
    pyfunc = kernel._kernel_function()[0]
    signature = tuple(types.Array(from_dtype(arg.dtype),
                                  len(arg.core) + (1 if arg.per_object else 0), "C")
                      for arg in kernel.args)
    if getattr(kernel, "fetch", False):  # HAPSIRA_CUDA_FETCH: and the launch's counter
        signature += (types.Array(from_dtype(np.dtype(np.int64)), 1, "C"),)
    ptx, _ = cuda.compile_ptx(pyfunc, signature, cc=cc)
    return ptx


def sass_counts(sass):
    counts = collections.Counter()
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]+)?", line)
        if m:
            counts[m.group(1)] += 1
    return counts


def sass_loops(sass):
    """The loops of ``sass`` (a backward branch to a label and what lies between), most
    FP64 operations first: ``(DFMA, DMUL and DADD, instructions, local loads and
    stores)`` each (the FP64 count of the step-attempt loop in docs/gpu.md since
    2026-11-28; `main`'s kernel-wide count adds comparisons and min/max). The solver's
    step-attempt loop is the innermost of those with the most; a register cap's spills
    (``LDL``/``STL``) inside it would cost every attempt."""
    body, labels = [], {}
    for line in sass.splitlines():
        label = re.match(r"\s*(\.L_x_\d+):", line)
        if label:
            labels[label.group(1)] = len(body)
            continue
        m = re.search(r"/\*[0-9a-f]{4,}\*/\s+(.*?);", line)
        if m:
            body.append(m.group(1).strip())
    loops = []
    for end, instruction in enumerate(body):
        m = re.search(r"BRA\s+(?:`\()?(\.L_x_\d+)", instruction)
        if m and labels.get(m.group(1), end + 1) <= end:
            inside = body[labels[m.group(1)]:end + 1]
            loops.append((sum(1 for x in inside
                              if re.match(r"(@!?U?P\w+\s+)?D(FMA|MUL|ADD)", x)),
                          len(inside),
                          sum(1 for x in inside if re.search(r"\b(LDL|STL)", x))))
    return sorted(loops, key=lambda loop: (-loop[0], loop[1]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cc", default="9.0")
    parser.add_argument("--drag", action="store_true", help="the drag variant's f")
    parser.add_argument("--max-registers", type=int, default=None,
                        help="ptxas -maxrregcount (0: ptxas decides; default: the cuda "
                             "target's own, HAPSIRA_CUDA_MAX_REGISTERS)")
    parser.add_argument("--keep", help="write the PTX and SASS to this folder")
    parser.add_argument("--fetch", type=int, choices=(0, 1), default=None,
                        help="HAPSIRA_CUDA_FETCH for the kernel (default: the environment's, "
                             "else the default, 1: fetching threads)")
    args = parser.parse_args()
    os.environ["HAPSIRA_TARGET"] = "cuda"  # compiled for a GPU, whatever the environment says
    if args.fetch is not None:
        os.environ["HAPSIRA_CUDA_FETCH"] = str(args.fetch)
    cc = harness.pretend_device(args.cc)  # before hapsira is imported
    import workloads as workload
    f = workload.two_body_j2_drag if args.drag else workload.two_body_j2
    ptx = kernel_ptx(f, cc)
    if args.max_registers is None:
        from hapsira_core import settings
        args.max_registers = settings.CUDA_MAX_REGISTERS
    arch = f"sm_{cc[0]}{cc[1]}"
    with tempfile.TemporaryDirectory() as tmp:
        ptx_path = os.path.join(tmp, "kernel.ptx")
        cubin = os.path.join(tmp, "kernel.cubin")
        with open(ptx_path, "w") as out:
            out.write(ptx)
        info = subprocess.run([nvidia_tool("ptxas"), f"-arch={arch}", "-v", "-O3",
                               *([f"-maxrregcount={args.max_registers}"] if args.max_registers else []),
                               ptx_path, "-o", cubin], capture_output=True, text=True)
        print(info.stderr.strip())
        if info.returncode:
            sys.exit("ptxas failed")
        nvdisasm = nvidia_tool("nvdisasm")
        sass = subprocess.run([nvdisasm, "-c", cubin], capture_output=True, text=True,
                              check=True).stdout if nvdisasm else ""
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        with open(os.path.join(args.keep, "kernel.ptx"), "w") as out:
            out.write(ptx)
        with open(os.path.join(args.keep, "kernel.sass"), "w") as out:
            out.write(sass)
    counts = sass_counts(sass)
    fp64 = sum(v for k, v in counts.items() if k.startswith("D") and k[1:4] in ("FMA", "MUL", "ADD", "SET", "MNM") or k in ("DSETP",))
    print(f"SASS instructions: {sum(counts.values())}, FP64 arithmetic: {fp64}")
    for name, n in counts.most_common(25):
        print(f"  {name:10s} {n}")
    for fp64_in, size, local in sass_loops(sass)[:3]:
        print(f"loop: {size} instructions, {fp64_in} DFMA/DMUL/DADD, {local} local loads/stores")


if __name__ == "__main__":
    main()
