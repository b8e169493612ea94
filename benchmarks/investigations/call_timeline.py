"""One warm ``cowell()`` call's host time line: which of our functions, and which library
calls they make, run when, from the call's start (ms), as an indented list.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/call_timeline.py [--n 1000000]
        [--outputs 1|2] [--min-ms 0.05] [--out PATH]

The reference workload (two-body + J2, one day; ``--outputs 1``: its end only, as
`benchmarks/gpu_user_f.py`, 2: half a day and the end). `gpu_timeline.py` says how long
the copies and kernels take; this says what the host does before the first kernel can
start and after the last one ends, the part of the call a faster kernel does not shorten.
Every call of a function in ``hapsira_core`` or ``hapsira_cowell``, and every call such a
function makes into another package, is timed with ``sys.setprofile`` (which slows Python
calls, numba-cuda's many small ones most: the profiled call's total is printed beside the
median of plain ones). ``--light``: instead, only the functions and methods of the modules
on the call's path (the cowell front, the kernel's call, the cuda launcher) and numba-cuda's
copies, allocations, events and launches are wrapped with a clock, which leaves the call
near its own time. Intervals shorter than ``--min-ms`` are left out. Writes JSON.
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import workloads  # noqa: E402

OURS = (os.sep + "hapsira_core" + os.sep, os.sep + "hapsira_cowell" + os.sep)


def _ours(code_or_name):
    return any(part in code_or_name for part in OURS)


def record(call):
    """Run ``call()`` under a profile hook; ``(intervals, total_s)``, each interval
    ``(depth, start_s, stop_s, name)`` in the order it began."""
    open_frames = []  # (key, depth, start, name, index into intervals)
    intervals = []
    depth = [0]
    origin = time.perf_counter()

    def hook(frame, event, arg):
        now = time.perf_counter() - origin
        if event in ("call", "c_call"):
            code = frame.f_code
            if event == "call":
                mine = _ours(code.co_filename)
                caller = frame.f_back
                from_ours = caller is not None and _ours(caller.f_code.co_filename)
                if not (mine or from_ours):
                    return
                name = f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}" \
                       f"({code.co_name})"
                key = id(frame)
            else:
                if not _ours(code.co_filename):
                    return
                name = f"~{getattr(arg, '__qualname__', repr(arg))}"
                key = ("c", id(frame), id(arg))
            intervals.append([depth[0], now, None, name])
            open_frames.append((key, len(intervals) - 1))
            depth[0] += 1
        elif event in ("return", "c_return", "c_exception"):
            key = id(frame) if event == "return" else ("c", id(frame), id(arg))
            if open_frames and open_frames[-1][0] == key:
                _, index = open_frames.pop()
                intervals[index][2] = now
                depth[0] -= 1

    sys.setprofile(hook)
    try:
        call()
    finally:
        sys.setprofile(None)
    total = time.perf_counter() - origin
    return [tuple(i) for i in intervals if i[2] is not None], total


#: ``--light``: the modules whose functions and methods are clocked
LIGHT_MODULES = (
    "hapsira_cowell.propagation.api", "hapsira_cowell.propagation.propagator",
    "hapsira_cowell.propagation.forms", "hapsira_cowell.propagation.results",
    "hapsira_core.ivp.api", "hapsira_core.ivp.build", "hapsira_core.ivp.checks",
    "hapsira_core.memory", "hapsira_core.kernels.kernel",
    "hapsira_core.targets.cuda.launch",
)


def light(call):
    """Run ``call()`` with the functions of `LIGHT_MODULES` (and numba-cuda's copies,
    allocations, events and launches) wrapped with a clock; ``(intervals, total_s)``."""
    import importlib
    import types

    from numba import cuda
    from numba.cuda import dispatcher
    from numba.cuda.cudadrv import devicearray, driver

    import threading

    intervals = []
    depth = threading.local()  # (helper threads: the units check, the prefault)
    origin = [0.0]

    def clocked(function, name):
        def wrapper(*args, **kwargs):
            level = getattr(depth, "level", 0)
            record = [level, time.perf_counter() - origin[0], None, name]
            intervals.append(record)
            depth.level = level + 1
            try:
                return function(*args, **kwargs)
            finally:
                depth.level = level
                record[2] = time.perf_counter() - origin[0]
        wrapper.__wrapped__ = function
        return wrapper

    replaced = []  # (owner, attribute, original)

    def wrap(owner, attribute, name):
        if isinstance(owner, type):  # the class of its MRO that defines it
            owner = next(c for c in owner.__mro__ if attribute in c.__dict__)
        original = owner.__dict__[attribute]
        if isinstance(original, (staticmethod, classmethod)):
            new = type(original)(clocked(original.__func__, name))
        elif isinstance(original, property):
            return
        else:
            new = clocked(original, name)
        setattr(owner, attribute, new)
        replaced.append((owner, attribute, original))

    functions = {}
    for module_name in LIGHT_MODULES:
        try:
            module = importlib.import_module(module_name)
        except RuntimeError:  # the cuda launcher without a GPU (a cpu run of this script)
            continue
        short = module_name.rsplit(".", 1)[-1]
        for attribute, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType) and value.__module__ == module_name:
                functions[value] = f"{short}.{attribute}"
            elif isinstance(value, type) and value.__module__ == module_name:
                for name, member in list(vars(value).items()):
                    inner = getattr(member, "__func__", member)
                    if isinstance(inner, types.FunctionType) and name not in (
                            "__getattr__", "__getattribute__", "__setattr__", "__repr__"):
                        wrap(value, name, f"{short}.{attribute}.{name}")
    # a function is looked up where it is called from: in every module that holds it
    for module in [m for n, m in list(sys.modules.items()) if n.startswith("hapsira")]:
        for attribute, value in list(vars(module).items()):
            if isinstance(value, types.FunctionType) and value in functions:
                wrap(module, attribute, functions[value])
    wrap(devicearray.DeviceNDArray, "copy_to_host", "numba.copy_to_host")
    wrap(devicearray.DeviceNDArray, "copy_to_device", "numba.copy_to_device")
    wrap(devicearray.DeviceNDArray, "__getitem__", "numba.device_array[...]")
    wrap(dispatcher._LaunchConfiguration, "__call__", "numba.launch")
    wrap(driver.Event, "record", "numba.event.record")
    wrap(driver.Event, "elapsed_time", "numba.event.elapsed_time")
    wrap(driver.Stream, "synchronize", "numba.stream.synchronize")
    for attribute in ("to_device", "device_array", "event", "stream"):
        wrap(cuda, attribute, f"numba.cuda.{attribute}")
    try:
        origin[0] = time.perf_counter()
        call()
        total = time.perf_counter() - origin[0]
    finally:
        for owner, attribute, original in reversed(replaced):
            setattr(owner, attribute, original)
    return [tuple(i) for i in intervals if i[2] is not None], total


def compare(call, spec, repeat):
    """The plain calls' median under each variant of ``spec`` (see ``--compare``), rounds
    alternating, then one clocked call of each: when its first kernel was queued."""
    import contextlib

    from hapsira_core.targets.cuda import launch
    from hapsira_cowell.propagation.forms import units_unchecked

    variants = {}
    for text in spec.split(";"):
        settings_of = {}
        for item in filter(None, text.split(",")):
            if item == "-":
                continue
            name, value = item.split("=")
            settings_of[name.strip()] = float(value) if "." in value else int(value)
        variants[text] = settings_of

    @contextlib.contextmanager
    def applied(settings_of):
        saved = {}
        for name, value in settings_of.items():
            if name != "units":
                saved[name] = getattr(launch, name)
                setattr(launch, name, type(saved[name])(value))
        context = units_unchecked() if settings_of.get("units", 1) == 0 else \
            contextlib.nullcontext()
        try:
            with context:
                yield
        finally:
            for name, value in saved.items():
                setattr(launch, name, value)

    samples = {name: [] for name in variants}
    for _ in range(repeat):
        for name, settings_of in variants.items():
            with applied(settings_of):
                start = time.perf_counter()
                call()
                samples[name].append(time.perf_counter() - start)
    for name, settings_of in variants.items():
        with applied(settings_of):
            got, total = light(call)
        launches = [i for i in got if i[3] == "numba.launch"]
        top = min(i[0] for i in launches)  # the solver's launches, not the joins'
        launches = [i for i in launches if i[0] == top]
        print(f"{name}: median {1e3 * statistics.median(samples[name]):.2f} ms "
              f"(best {1e3 * min(samples[name]):.2f}); clocked: first kernel queued at "
              f"{1e3 * launches[0][1]:.2f} ms, last at {1e3 * launches[-1][1]:.2f} ms, "
              f"{len(launches)} launches, call {1e3 * total:.2f} ms", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=lambda s: int(float(s)), default=1_000_000)
    parser.add_argument("--outputs", type=int, choices=(1, 2), default=1)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--min-ms", type=float, default=0.05)
    parser.add_argument("--max-depth", type=int, default=12)
    parser.add_argument("--light", action="store_true")
    parser.add_argument("--compare", default=None, metavar="VARIANTS",
                        help="';'-separated variants, each ','-separated NAME=VALUE settings "
                             "of hapsira_core.targets.cuda.launch (PREFAULT=0, PACKED_MAX_BYTES=0; "
                             "'units=0': without the background units check; '-': as is): "
                             "the plain calls' median of each, alternating, and where each "
                             "one queues its first kernel")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    from hapsira_cowell import cowell

    r0, v0 = workloads.leo_cloud(args.n, 0)
    tofs = np.array([workloads.DAY]) if args.outputs == 1 else \
        np.array([workloads.DAY / 2, workloads.DAY])

    def call():
        return cowell(workloads.K, r0, v0, tofs, workloads.RTOL, workloads.ATOL,
                      f=workloads.two_body_j2)

    call()  # compile
    samples = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    if args.compare:
        compare(call, args.compare, args.repeat)
    intervals, total = (light if args.light else record)(call)
    shown = [i for i in intervals
             if (i[2] - i[1]) * 1e3 >= args.min_ms and i[0] <= args.max_depth]
    print(f"plain calls: median {1e3 * statistics.median(samples):.2f} ms of "
          f"{[round(1e3 * s, 2) for s in samples]}; profiled call {1e3 * total:.2f} ms")
    for depth, start, stop, name in shown:
        print(f"{1e3 * start:8.2f} {1e3 * stop:8.2f} {1e3 * (stop - start):7.2f}  "
              f"{'  ' * depth}{name}")
    if args.out:
        with open(args.out, "w") as out:
            json.dump({"n": args.n, "outputs": args.outputs,
                       "median_s": statistics.median(samples), "samples_s": samples,
                       "profiled_s": total,
                       "intervals": [{"depth": d, "start_ms": 1e3 * a, "stop_ms": 1e3 * b,
                                      "name": n} for d, a, b, n in shown]}, out, indent=1)


if __name__ == "__main__":
    main()
