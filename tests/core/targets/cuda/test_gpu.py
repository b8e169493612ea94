"""The cuda target's own functions (`hapsira_core.targets.cuda.gpu`, the simulator's twins)."""

import math

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.jit import Arg, ObjectKernel, hjit, reciprocal, rsqrt

pytestmark = pytest.mark.skipif(settings.TARGET != "cuda", reason="the cuda target's functions")

SPECIAL = np.array([0.0, -0.0, math.inf, -1.0, -math.inf, math.nan])


@hjit
def _rsqrt_row(x, out):
    out[0] = rsqrt(x[0])


_RSQRT = ObjectKernel(_rsqrt_row, [Arg("x", np.float64, ("one",)),
                                   Arg("out", np.float64, ("one",), output=True)])


@hjit
def _reciprocal_row(x, out):
    out[0] = reciprocal(x[0])


_RECIPROCAL = ObjectKernel(_reciprocal_row, [Arg("x", np.float64, ("one",)),
                                             Arg("out", np.float64, ("one",), output=True)])


def _run(kernel, x):
    """``kernel``'s function of each entry of ``x``, each in a GPU thread of its own."""
    out = np.empty((x.size, 1))
    with np.errstate(divide="ignore", invalid="ignore"):  # the simulator's numpy floats
        kernel(np.ascontiguousarray(x.reshape(-1, 1)), out)
    return out[:, 0]


def _kernel_rsqrt(x):
    return _run(_RSQRT, x)


def _on_gpu(device_function, x):
    """``device_function`` of each entry of ``x`` in a plain numba-cuda kernel (a GPU
    thread per entry): the reference that our branch-free functions must match."""
    from numba import cuda

    function = cuda.jit(device=True)(device_function)

    @cuda.jit
    def reference(x, out):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = function(x[i])

    out = np.empty_like(x)
    reference[(x.size + 127) // 128, 128](x, out)
    return out


def _draws():
    """Normal floats over the whole exponent range, and the squared distances of orbits."""
    rng = np.random.default_rng(29)
    spread = np.ldexp(rng.uniform(1.0, 2.0, 4000), rng.integers(-1020, 1023, 4000))
    orbits = rng.uniform(6.5e3, 4.5e4, 4000) ** 2
    edges = np.array([np.finfo(float).tiny, np.finfo(float).max, 1.0, 4.0, 0.25])
    return np.concatenate([spread, orbits, edges])


def test_rsqrt_is_within_one_ulp_everywhere_a_float_is_normal():
    x = _draws()
    got = _kernel_rsqrt(x)
    exact = [1.0 / math.sqrt(v) for v in x]  # correctly rounded within 1 ulp itself...
    # ...so bound by the ulp of the result: 2 ulp of 1/sqrt's own rounding at most
    ulps = np.abs(got - exact) / np.spacing(np.abs(exact))
    assert ulps.max() <= 2.0, x[np.argmax(ulps)]
    assert np.mean(got == exact) > 0.8  # mostly the same bits, not merely close


def test_rsqrt_of_zero_infinity_negative_and_nan_is_libdevices():
    got = _kernel_rsqrt(SPECIAL)
    assert got[0] == math.inf and abs(got[1]) == math.inf  # 1/sqrt(-0.0) = 1/-0.0
    assert got[2] == 0.0
    assert np.isnan(got[3:]).all()


@pytest.mark.skipif(settings.cuda_simulator_enabled(),
                    reason="libdevice itself runs on a GPU only (the simulator's rsqrt "
                           "is numpy's, checked above)")
def test_rsqrt_gives_libdevices_bits_for_every_normal_float():
    """The branch-free rsqrt (no slow path) is libdevice's fast path, step for step."""
    from numba.cuda import libdevice

    x = _draws()
    expected = _on_gpu(lambda v: libdevice.rsqrt(v), x)
    np.testing.assert_array_equal(_kernel_rsqrt(x).view(np.int64), expected.view(np.int64))


def test_reciprocal_of_zero_infinity_and_nan():
    got = _run(_RECIPROCAL, np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 4.0, -0.5]))
    np.testing.assert_array_equal(got, [math.inf, -math.inf, 0.0, -0.0, math.nan, 0.25, -2.0])
    assert math.copysign(1.0, got[3]) == -1.0


@pytest.mark.skipif(settings.cuda_simulator_enabled(),
                    reason="the GPU's division runs on a GPU only (the simulator's "
                           "reciprocal is the division itself)")
def test_reciprocal_gives_the_divisions_bits_for_every_normal_float():
    """The branch-free reciprocal (no slow path) rounds as the GPU's division does."""
    rng = np.random.default_rng(30)
    x = _draws()
    x = np.concatenate([x, -x[::7], rng.uniform(1e-12, 1e-6, 4000),  # error scales
                        np.nextafter(np.ldexp(1.0, rng.integers(-1000, 1000, 500)), 0.0),
                        np.ldexp(rng.uniform(1.0, 2.0, 200), 1022)])  # 1/x subnormal
    expected = _on_gpu(lambda v: 1.0 / v, x)
    got = _run(_RECIPROCAL, x)
    # where 1/x is subnormal (|x| > 2^1022) the approximation flushes it to 0 (docstring)
    large = np.abs(x) > 2.0 ** 1022
    assert large.sum() >= 200 and (got[large] == 0.0).all()
    differ = np.flatnonzero(got[~large].view(np.int64) != expected[~large].view(np.int64))
    assert differ.size == 0, [(float.hex(float(x[~large][i])), float.hex(float(got[~large][i])),
                               float.hex(float(expected[~large][i]))) for i in differ[:8]]


@pytest.mark.skipif(settings.cuda_simulator_enabled(),
                    reason="the selects on x's exponent are PTX: a GPU only (the "
                           "simulator's functions are numpy's and the division)")
def test_the_fast_paths_end_where_their_ranges_end():
    """The selects on ``x``'s upper word (`gpu._SELECTS`) at the edges of their ranges:
    the smallest normal, the largest subnormal, 2^1022 and the largest float, both signs."""
    from numba.cuda import libdevice

    tiny, top = np.finfo(float).tiny, 2.0 ** 1022
    x = np.array([tiny, np.nextafter(tiny, 0.0), 5e-324, np.nextafter(top, 0.0), top,
                  np.finfo(float).max])
    x = np.concatenate([x, -x])
    got = _kernel_rsqrt(x)
    normal = x >= tiny  # positive, normal, finite: libdevice's bits
    assert normal.sum() == 4
    expected = _on_gpu(lambda v: libdevice.rsqrt(v), x)
    np.testing.assert_array_equal(got[normal].view(np.int64), expected[normal].view(np.int64))
    # subnormal: inf of x's sign (read as a zero of that sign, as libdevice takes -0.0 to
    # -inf); negative and normal: NaN
    subnormal = np.abs(x) < tiny
    np.testing.assert_array_equal(got[subnormal], np.copysign(math.inf, x[subnormal]))
    assert np.isnan(got[x <= -tiny]).all()
    got = _run(_RECIPROCAL, x)
    fast = (np.abs(x) >= tiny) & (np.abs(x) < top)  # the division's bits
    assert fast.sum() == 4
    expected = _on_gpu(lambda v: 1.0 / v, x)
    np.testing.assert_array_equal(got[fast].view(np.int64), expected[fast].view(np.int64))
    # the approximation: inf of x's sign
    np.testing.assert_array_equal(got[subnormal], np.copysign(math.inf, x[subnormal]))
    large = np.abs(x) >= top  # the approximation: 1/x flushed, at most the smallest normal
    assert (np.abs(got[large]) <= tiny).all()
    np.testing.assert_array_equal(np.signbit(got[large]), np.signbit(x[large]))
