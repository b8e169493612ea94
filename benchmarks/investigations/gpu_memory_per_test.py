"""GPU memory held by each pytest process after each test: a pytest plugin.

    GPU_MEMORY_LOG=out/dir python -m pytest -p gpu_memory_per_test tests/...
        (with benchmarks/investigations on PYTHONPATH; any number of xdist workers)
    python benchmarks/investigations/gpu_memory_per_test.py out/dir   (the summary)

After each test's teardown, asks ``nvidia-smi`` for the memory of this process
(``--query-compute-apps``, what the driver has given the process: its context,
allocations, the local-memory reservation of the kernels it launched) and
appends ``pid, seconds, MiB, nodeid`` to ``GPU_MEMORY_LOG/<pid>.tsv``. The
summary lists, per process, the tests after which its memory grew by more than
256 MiB, and each process's peak. Written to find the test process that took
108 GB of an H200 and kept it (2026-11-29, tests/cowell/propagation at -n 8).
"""

import os
import subprocess
import sys
import time

_START = time.time()


def _own_mib():
    try:
        out = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return -1
    for line in out.splitlines():
        pid, _, mib = line.partition(",")
        if pid.strip() == str(os.getpid()):
            return int(mib)
    return 0  # no context on the GPU yet


def pytest_runtest_teardown(item, nextitem):
    folder = os.environ.get("GPU_MEMORY_LOG")
    if not folder:
        return
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"{os.getpid()}.tsv"), "a") as log:
        log.write(f"{os.getpid()}\t{time.time() - _START:.1f}\t{_own_mib()}\t{item.nodeid}\n")


def summary(folder, jump=256):
    for name in sorted(os.listdir(folder)):
        if not name.endswith(".tsv"):
            continue
        rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(folder, name))]
        before, peak = 0, 0
        print(f"-- process {name[:-4]}: {len(rows)} tests")
        for pid, seconds, mib, nodeid in rows:
            mib = int(mib)
            peak = max(peak, mib)
            if mib - before > jump:
                print(f"   {seconds:>7s} s  {before:>7d} -> {mib:>7d} MiB  {nodeid}")
            before = mib
        print(f"   peak {peak} MiB, at the end {before} MiB")


if __name__ == "__main__":
    summary(sys.argv[1])
