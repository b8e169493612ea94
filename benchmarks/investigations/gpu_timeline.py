"""Where one ``cowell()`` call on the GPU spends its host time, per chunk size.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/gpu_timeline.py [--n 1000000] [--chunks 17,18,19,20]

The reference workload (two-body + J2, one day, two output times or ``--outputs 1``) on N
objects. The cuda launcher's host steps are timed with a host clock around
each of them (they block: copies from and to pageable memory wait for the
GPU): before the launch (checks, conversions), copies in (with the join of
``cowell``'s states on the GPU), launching, copies back (including the wait for the chunk's
kernel), after the launch (trimming, the result). The kernels' own time
comes from CUDA events (overlapping chunks counted once). Median of
``--repeat`` calls per chunk size (2^k objects per launch).

``--trace``: one more call per chunk size, each chunk's copies in and back
placed on the host clock and on the GPU's (CUDA events around each copy on
its stream, from an event recorded before the call): a copy back that starts
on the GPU long after its kernel could end, or a kernel that waits for its
copy in, shows who paces whom. Writes JSON.
"""

import argparse
import collections
import inspect
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # benchmarks/
sys.path.insert(0, HERE)

import workloads as workload  # noqa: E402
from hapsira_core import settings  # noqa: E402
from hapsira_core.ivp import build  # noqa: E402
from hapsira_cowell import cowell  # noqa: E402
from hapsira_cowell.propagation.forms import orbit_rhs  # noqa: E402

SPENT = collections.Counter()


def patch(owner, name, around):
    """Replace the method ``owner.name`` with ``around(original)`` (a static one stays static)."""
    static = isinstance(inspect.getattr_static(owner, name), staticmethod)
    wrapper = around(getattr(owner, name))
    setattr(owner, name, staticmethod(wrapper) if static else wrapper)


def timed(owner, name, label):
    patch(owner, name, lambda original: _timed(original, label))


def _timed(original, label):
    depth = [0]  # (a nested call, a block of Columns, is counted in its caller)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        depth[0] += 1
        try:
            return original(*args, **kwargs)
        finally:
            depth[0] -= 1
            if not depth[0]:
                SPENT[label] += time.perf_counter() - start

    return wrapper


class Trace:
    """Host and GPU times of each chunk's copies in one call."""

    def __init__(self):
        self.records = None

    def wrap(self, owner, name, label, stream_of):
        patch(owner, name, lambda original: self._traced(original, label, stream_of))

    def _traced(self, original, label, stream_of):
        trace = self

        def wrapper(*args, **kwargs):
            stream, start = stream_of(*args)
            if trace.records is None or start is None:
                return original(*args, **kwargs)
            from numba import cuda
            before, after = cuda.event(), cuda.event()
            host = time.perf_counter()
            before.record(stream)
            try:
                return original(*args, **kwargs)
            finally:
                after.record(stream)
                trace.records.append((label, start, host, time.perf_counter(), before, after))

        return wrapper

    def run(self, call):
        from numba import cuda
        cuda.synchronize()
        origin = cuda.event()
        origin.record()
        self.records = []
        host = time.perf_counter()
        call()
        cuda.synchronize()
        records, self.records = self.records, None
        rows = collections.defaultdict(dict)
        for label, start, t0, t1, before, after in records:
            row = rows[start]
            # (copy in: one record per block; the chunk's span is first to last)
            row.setdefault(f"{label} host ms", [1e3 * (t0 - host), 0.0])[1] = 1e3 * (t1 - host)
            row.setdefault(f"{label} gpu ms", [origin.elapsed_time(before), 0.0])[1] = \
                origin.elapsed_time(after)
        return [{"chunk_start": start, **row} for start, row in sorted(rows.items())]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--chunks", default="17,18,19,20")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--trace", action="store_true")
    parser.add_argument("--outputs", type=int, choices=(1, 2), default=2,
                        help="output times: 2 (half the span and its end), 1 (its end, as "
                             "benchmarks/gpu_user_f.py)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="propagation time (default: one day; shorter to check the "
                             "script under the simulator)")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "gpu_timeline.json"))
    args = parser.parse_args()
    r0, v0 = workload.leo_cloud(args.n, 2)
    span = args.seconds or workload.DAY
    tofs = np.array([span / 2, span]) if args.outputs == 2 else np.array([span])

    def call():
        return cowell(workload.K, r0, v0, tofs, workload.RTOL, workload.ATOL,
                      f=workload.two_body_j2)

    call()  # compile
    kernel = build.kernel("DOP853", 6, orbit_rhs(workload.two_body_j2), ())
    cls = type(kernel)
    timed(cls, "_launch", "launch")
    timed(cls, "_to_device", "copy in (with joining)")
    timed(cls, "_copy_back", "copy back (with waiting)")
    timed(cls, "_chunk_size", "chunk size")
    trace = Trace()
    trace.wrap(cls, "_to_device", "in", lambda array, rows, key, start=None, stop=None:
               (rows.stream, start))
    trace.wrap(cls, "_copy_back", "back", lambda self, arrays, device, stream, start, stop, *rest:
               (stream, start))
    rows = []
    for k in [int(x) for x in args.chunks.split(",")]:
        settings.CUDA_CHUNK = 1 << k
        samples = collections.defaultdict(list)
        for _ in range(args.repeat):
            SPENT.clear()
            start = time.perf_counter()
            result = call()
            samples["call"].append(time.perf_counter() - start)
            if kernel.last_kernel_seconds is not None:  # (the simulator keeps no time)
                samples["kernels (events)"].append(kernel.last_kernel_seconds)
            for label, seconds in SPENT.items():
                samples[label].append(seconds)
            samples["outside the launch"].append(samples["call"][-1] - SPENT["launch"])
        row = {"chunk": 1 << k, **{label: statistics.median(v) for label, v in samples.items()},
               "orbit_steps": int(result.nsteps.sum())}
        if args.trace:
            row["trace"] = trace.run(call)
            for chunk in row["trace"]:
                print("  " + " ".join(f"{key}={value}" if key == "chunk_start" else
                                      f"{key}=[{value[0]:.1f}, {value[1]:.1f}]"
                                      for key, value in chunk.items()), flush=True)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "trace"}), flush=True)
    with open(args.out, "w") as out:
        json.dump({"n_objects": args.n, "rows": rows}, out, indent=1)
    labels = [k for k in rows[0] if k not in ("chunk", "orbit_steps", "trace")]
    print("| chunk | " + " | ".join(labels) + " |")
    print("|---|" + "---|" * len(labels))
    for row in rows:
        print(f"| 2^{row['chunk'].bit_length() - 1} | "
              + " | ".join(f"{1e3 * row[k]:.1f} ms" for k in labels) + " |")


if __name__ == "__main__":
    main()
