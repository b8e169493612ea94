"""What every benchmark script shares: the machine, timing, child processes, result files.

* `machine()`: CPU model, cores, vector-width flags, GPU name and driver (if
  ``nvidia-smi`` answers), the versions of python, numpy, numba and the peers
  that import, the git revision of this checkout and the load average;
* `best_of`, `first_and_best`: best-of-k wall clock (or process CPU time);
  `alternate`: paired alternation of several sources, round by round;
* `run_child`: a Python snippet or script in a new process (the target is
  fixed at import), its last stdout line read as JSON;
* `write_result(name, payload)`: ``benchmarks/results/<name>.json`` (or a
  path) with the machine added under ``"machine"``.
"""

import json
import os
import platform
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")

PEER_MODULES = ("numba_cuda", "scipy", "jax", "jaxlib", "diffrax", "heyoka", "CyRK", "cubie",
                "dask", "distributed")


def cpu_model():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def vector_flags():
    """The SIMD flags of the first CPU that matter for numba's code (x86: avx*, fma; arm: asimd, sve)."""
    wanted = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512dq", "avx512vl", "asimd", "sve", "sve2")
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith(("flags", "Features")):
                    have = set(line.split(":", 1)[1].split())
                    return [f for f in wanted if f in have]
    except OSError:
        pass
    return []


def gpus():
    """Name, driver and memory of each GPU that nvidia-smi lists ([] without one)."""
    try:
        done = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                               "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if done.returncode:
        return []
    return [dict(zip(("name", "driver", "memory"), (x.strip() for x in line.split(","))))
            for line in done.stdout.strip().splitlines() if line.strip()]


def git_revision(root=ROOT):
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--", "src"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (rev + ("+dirty src" if dirty else "")) or None


def src_digest(root=ROOT):
    """The first 12 hex digits of a SHA-256 over ``src``'s Python files (each one's path
    and bytes, in path order): which code ran, where ``git_revision`` cannot say. The
    device machine runs a copy of the working tree whose ``.git`` may be older than its
    files (2026-11-29: results of a later commit's code recorded as ``80e4ac1+dirty
    src``); this digest of the same files is the same wherever they are."""
    import hashlib

    digest = hashlib.sha256()
    src = os.path.join(root, "src")
    paths = sorted(os.path.relpath(os.path.join(folder, name), src)
                   for folder, _, names in os.walk(src) for name in names
                   if name.endswith(".py"))
    if not paths:
        return None
    for path in paths:
        digest.update(path.replace(os.sep, "/").encode() + b"\0")
        with open(os.path.join(src, path), "rb") as source:
            digest.update(source.read() + b"\0")
    return digest.hexdigest()[:12]


def versions(extra=PEER_MODULES):
    """python, numpy, numba, and each module of ``extra`` that imports (without importing jax
    and its like unless they are already imported: that costs seconds; their installed version
    from the package metadata instead)."""
    import importlib.metadata

    import numba
    import numpy
    out = {"python": platform.python_version(), "numpy": numpy.__version__,
           "numba": numba.__version__}
    for name in extra:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__version__", None):
            out[name] = module.__version__
            continue
        for dist in (name, name.replace("_", "-"), name.lower()):
            try:
                out[name] = importlib.metadata.version(dist)
                break
            except importlib.metadata.PackageNotFoundError:
                pass
    return out


def simulated():
    """Whether numba's CUDA simulator stands in for a GPU (``NUMBA_ENABLE_CUDASIM`` read as
    ``hapsira_core.settings.cuda_simulator_enabled`` reads it; not imported from there, which
    would fix the target): a cuda run then checks code paths, and its times mean nothing."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0").strip() not in ("", "0")


def machine():
    """A description of this machine and checkout, for every result file."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count()
    return {"cpu": cpu_model(), "cores": cores, "cpus": os.cpu_count(),
            "vector_flags": vector_flags(), "platform": platform.platform(),
            "gpus": gpus(), "versions": versions(), "git_revision": git_revision(),
            "src_digest": src_digest(),
            "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
            "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}


def result_path(name):
    """``benchmarks/results/<name>.json``, or ``name`` itself when it is a path."""
    if os.sep in name or name.endswith(".json"):
        return os.path.abspath(name)
    return os.path.join(RESULTS, f"{name}.json")


def write_result(name, payload, indent=1):
    """Write ``payload`` with ``"machine"`` added (unless it has one) as JSON; returns the path."""
    path = result_path(name)
    record = dict(payload)
    record.setdefault("machine", machine())
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as out:
        json.dump(record, out, indent=indent)
    print(f"written to {path}", flush=True)
    return path


# --- timing ---

def best_of(call, repeat=3, clock=time.perf_counter):
    """(best seconds, every sample, the last result) of ``repeat`` calls;
    ``clock=time.process_time`` for the process's CPU time (less disturbed by other jobs)."""
    times, result = [], None
    for _ in range(repeat):
        start = clock()
        result = call()
        times.append(clock() - start)
    return min(times), times, result


def first_and_best(call, repeat=3, clock=time.perf_counter):
    """(first call's seconds, compile included; best of ``repeat`` further calls; last result)."""
    start = clock()
    result = call()
    first = clock() - start
    best, _, result = best_of(call, repeat, clock) if repeat else (first, None, result)
    return first, best, result


def median_of(call, repeat=3, clock=time.perf_counter):
    """(median seconds, every sample, the last result)."""
    import statistics
    best, times, result = best_of(call, repeat, clock)
    return statistics.median(times), times, result


def alternate(measure, sources, rounds):
    """``measure(name, source)`` for each source, in turn, ``rounds`` times (paired: a slow
    spell of the machine hits every source alike); ``{name: [result per round]}``."""
    out = {name: [] for name in sources}
    for _ in range(rounds):
        for name, source in sources.items():
            out[name].append(measure(name, source))
    return out


# --- child processes ---

def child_env(target=None, cache=False, pythonpath=None, **extra):
    """This environment with ``HAPSIRA_TARGET`` (the simulator kept only for cuda), the kernel
    cache off unless ``cache``, and ``PYTHONPATH`` replaced when given."""
    env = dict(os.environ)
    if target is not None:
        env["HAPSIRA_TARGET"] = target
        if target != "cuda":
            env.pop("NUMBA_ENABLE_CUDASIM", None)
    if not cache:
        env["HAPSIRA_CACHE"] = "0"
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_child(script, env=None, timeout=None, args=(), check=True):
    """Run ``script`` (Python source, or the path of a .py file with ``args``) in a new process;
    its last stdout line is JSON and is returned (with ``"process_s"``, the whole process).
    ``check=False``: a failure or a timeout gives ``{"error": ...}`` instead of raising."""
    command = ([sys.executable, script, *args] if script.endswith(".py") and os.path.exists(script)
               else [sys.executable, "-c", script, *args])
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        if check:
            raise
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode:
        if check:
            raise RuntimeError(f"child failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return {"error": (done.stderr.strip() or done.stdout.strip())[-2000:]}
    lines = done.stdout.strip().splitlines()
    record = json.loads(lines[-1]) if lines else {}
    if isinstance(record, dict):
        record["process_s"] = time.perf_counter() - start
    return record


def relative_difference(states, reference):
    """The largest ``|y - y_ref| / |y_ref|`` over objects (norms along the last axis)."""
    import numpy as np
    return float(np.max(np.linalg.norm(states - reference, axis=-1)
                        / np.linalg.norm(reference, axis=-1)))


def platform_from_argv(default=None, choices=("cpu", "parallel", "cuda")):
    """Set ``HAPSIRA_TARGET`` from ``--platform X`` of the command line before hapsira is
    imported (the target is fixed at import); without it, ``HAPSIRA_TARGET`` or ``default``.
    Returns the platform; the scripts declare ``--platform`` to argparse too (for --help)."""
    argv = sys.argv[1:]
    value = None
    for i, arg in enumerate(argv):
        if arg == "--platform" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--platform="):
            value = arg.split("=", 1)[1]
    value = value or os.environ.get("HAPSIRA_TARGET") or default or "cpu"
    if value in choices:
        os.environ["HAPSIRA_TARGET"] = value
    return value


def add_platform(parser, default, choices=("cpu", "parallel", "cuda"), help=None):
    parser.add_argument("--platform", default=default, choices=choices,
                        help=help or "the hapsira target (sets HAPSIRA_TARGET; default: "
                                     "HAPSIRA_TARGET, else %(default)s)")


# --- compiling for a GPU without one (kernel_stats.py, foreign.py link) ---

CC = (9, 0)


def pretend_device(cc):
    """Compiling needs no device: let hapsira's start-up check pass on a machine without one,
    and give everything that asks the compute capability wanted (before hapsira is imported)."""
    global CC
    CC = tuple(int(x) for x in cc.split("."))
    import importlib

    from numba import cuda

    class _Device:
        @property
        def compute_capability(self):
            return CC

    def _device():
        return _Device()

    cuda.is_available = lambda: True
    for module in ("dispatcher", "compiler"):
        setattr(importlib.import_module(f"numba.cuda.{module}"), "get_current_device", _device)
    cuda.get_current_device = _device  # foreign compiles the C once for "this" GPU
    return CC


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
