"""The first chunk's two blocks in, and the last chunk's two outputs back, from one host
thread or from two at once (pageable memory, one stream per copy).

    python benchmarks/investigations/parallel_copies.py [--rows 131072] [--repeat 40]

The driver stages a pageable copy through its own page-locked buffers with one host
core's ``memcpy`` (7-8.6 GB/s on the H200's host, `pinned_copies.py`), so copies issued
by two threads might overlap where one thread's run one after the other. In: two
blocks of ``rows x 3`` float64 (cowell's r and v); back: ``rows x 6`` float64 and
``rows x 5`` int64 (the states and the status rows). Variants alternate round by round;
median of ``--repeat`` each, the host clock around the copies and their waits.
"""

import argparse
import json
import statistics
import threading
import time

import numpy as np
from numba import cuda
from numba.cuda.cudadrv import driver


class Helper:
    """One kept thread that runs a function when asked (as a launcher would keep one)."""

    def __init__(self):
        self._go, self._done = threading.Event(), threading.Event()
        self._work = None
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        while True:
            self._go.wait()
            self._go.clear()
            self._work()
            self._done.set()

    def start(self, work):
        self._done.clear()
        self._work = work
        self._go.set()

    def join(self):
        self._done.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1 << 17)
    parser.add_argument("--repeat", type=int, default=40)
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = args.rows
    rng = np.random.default_rng(0)
    # a user's arrays are larger than one chunk: take rows from the middle of each
    r_host = rng.standard_normal((4 * rows, 3))
    v_host = rng.standard_normal((4 * rows, 3))
    y_host = np.empty((4 * rows, 6))
    info_host = np.empty((4 * rows, 5), np.int64)
    y_host.fill(0.0)
    info_host.fill(0)
    part = slice(rows, 2 * rows)
    r_dev = cuda.device_array((rows, 3))
    v_dev = cuda.device_array((rows, 3))
    y_dev = cuda.to_device(rng.standard_normal((rows, 6)))
    info_dev = cuda.to_device(np.arange(rows * 5, dtype=np.int64).reshape(rows, 5))
    s0, s1 = cuda.stream(), cuda.stream()
    helper = Helper()

    def h2d(dev, host, stream):
        return lambda: driver.host_to_device(dev, host, host.nbytes, stream=stream)

    def d2h(host, dev, stream):
        return lambda: driver.device_to_host(host, dev, host.nbytes, stream=stream)

    r_in, v_in = h2d(r_dev, r_host[part], s0), h2d(v_dev, v_host[part], s1)
    v_in_same = h2d(v_dev, v_host[part], s0)
    y_back, info_back = d2h(y_host[part], y_dev, s0), d2h(info_host[part], info_dev, s1)
    info_back_same = d2h(info_host[part], info_dev, s0)
    halves = [(slice(rows, rows + rows // 2), slice(0, rows // 2)),
              (slice(rows + rows // 2, 2 * rows), slice(rows // 2, rows))]
    r_half = [h2d(r_dev[d], r_host[h], s) for (h, d), s in zip(halves, (s0, s1))]

    def one_thread(first, second, streams):
        def run():
            first()
            second()
            for s in streams:
                s.synchronize()
        return run

    def two_threads(first, second, streams):
        def run():
            helper.start(second)
            first()
            helper.join()
            for s in streams:
                s.synchronize()
        return run

    variants = {
        "in: one thread, one stream": one_thread(r_in, v_in_same, (s0,)),
        "in: one thread, two streams": one_thread(r_in, v_in, (s0, s1)),
        "in: two threads, two streams": two_threads(r_in, v_in, (s0, s1)),
        "in: r's block in halves, two threads": two_threads(*r_half, (s0, s1)),
        "back: one thread, one stream": one_thread(y_back, info_back_same, (s0,)),
        "back: one thread, two streams": one_thread(y_back, info_back, (s0, s1)),
        "back: two threads, two streams": two_threads(y_back, info_back, (s0, s1)),
    }
    samples = {name: [] for name in variants}
    for _ in range(3):
        for run in variants.values():
            run()
    for _ in range(args.repeat):
        for name, run in variants.items():
            start = time.perf_counter()
            run()
            samples[name].append(time.perf_counter() - start)
    same = bool(np.array_equal(y_host[part], y_dev.copy_to_host())
                and np.array_equal(r_host[part], r_dev.copy_to_host()))
    report = {"rows": rows, "repeat": args.repeat, "copies_checked": same,
              "median_ms": {k: 1e3 * statistics.median(v) for k, v in samples.items()},
              "best_ms": {k: 1e3 * min(v) for k, v in samples.items()}}
    for name in variants:
        print(f"{name:40s} median {report['median_ms'][name]:.3f} ms "
              f"best {report['best_ms'][name]:.3f} ms")
    print("copies checked:", same)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
