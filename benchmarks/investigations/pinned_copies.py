"""A chunk's rows to and from the GPU: pageable copies (the launcher's) against a copy
through page-locked staging (numpy's copy into it, then the driver's asynchronous one).

    python benchmarks/investigations/pinned_copies.py [--rows 131072] [--columns 3]
        [--repeat 50]

The copies of the first chunk in and of the last chunk back are the part of a
``cowell`` call on the GPU that nothing overlaps (`call_timeline.py`). Times each way
on one stream, the host clock around each (the copy and its wait), median of
``--repeat``; the source rows are touched before (as a user's arrays are).
"""

import argparse
import statistics
import time

import numpy as np
from numba import cuda


def median_ms(run, repeat):
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return 1e3 * statistics.median(samples)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1 << 17)
    parser.add_argument("--columns", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    shape = (args.rows, args.columns)
    host = np.random.default_rng(0).standard_normal((4 * args.rows, args.columns))
    out = np.empty_like(host)
    out.fill(0.0)  # (pages touched: the launcher's prefault does it for outputs)
    stream = cuda.stream()
    device = cuda.device_array(shape, np.float64, stream=stream)
    staging = cuda.pinned_array(shape, np.float64)
    start = time.perf_counter()
    cuda.pinned_array(shape, np.float64)
    allocate_ms = 1e3 * (time.perf_counter() - start)
    rows = slice(args.rows, 2 * args.rows)

    def pageable_in():
        device.copy_to_device(host[rows], stream=stream)
        stream.synchronize()

    def pinned_in():
        np.copyto(staging, host[rows])
        device.copy_to_device(staging, stream=stream)
        stream.synchronize()

    def pageable_back():
        device.copy_to_host(out[rows], stream=stream)
        stream.synchronize()

    def pinned_back():
        device.copy_to_host(staging, stream=stream)
        stream.synchronize()
        np.copyto(out[rows], staging)

    def numpy_copy():
        np.copyto(staging, host[rows])

    mb = host[rows].nbytes / 1e6
    print(f"{args.rows} rows x {args.columns} float64 ({mb:.2f} MB); a pinned buffer of "
          f"that size allocated in {allocate_ms:.2f} ms")
    for name, run in (("in, pageable", pageable_in), ("in, through pinned", pinned_in),
                      ("back, pageable", pageable_back),
                      ("back, through pinned", pinned_back),
                      ("numpy copy into pinned alone", numpy_copy)):
        run()
        ms = median_ms(run, args.repeat)
        print(f"{name}: {ms:.3f} ms ({mb / ms:.2f} GB/s)")
    np.testing.assert_array_equal(out[rows], host[rows])


if __name__ == "__main__":
    main()
