"""Monte Carlo probability of collision from the states and covariances at the TCA
(``probability(..., method="monte_carlo")``, docs/screening.md), and the Clopper-Pearson
interval of a count of hits.

Each sample draws the relative state's error at the TCA, ``(dr, dv) ~ N(0, C1 + C2)`` (the
difference of the two objects' independent Gaussian errors has that distribution; the
velocity block is used where a covariance is 6 x 6, velocity errors are 0 where both are
3 x 3), moves both objects along straight lines from there and counts a hit where the
relative path's closest approach, ``|r|^2 - (r . v)^2 / |v|^2`` over all times, is below
``hbr^2``. With velocity errors left out this is the 2D methods' own model sampled, so
its estimate converges to `foster`'s value; with them it adds the spread of the
encounter plane's orientation. Plain numpy, vectorised over approaches and samples in
blocks of `BLOCK` draws; the random numbers come from a ``numpy.random.Generator``.
"""

import math

import numpy as np

__all__ = ["BLOCK", "CONFIDENCE", "NEGATIVE", "SAMPLES", "clopper_pearson", "hits",
           "relative_covariance"]

#: Default number of samples per approach
SAMPLES = 1_000_000
#: Samples drawn at once over all approaches of a block (with velocity errors, their
#: draws, sums and relative states take about 90 MiB at this size)
BLOCK = 1 << 19
#: Confidence of `Probability.interval`
CONFIDENCE = 0.95
#: Negative eigenvalues below this fraction of the largest flag a covariance as repaired
#: (smaller ones are rounding, clipped to 0 without a word)
NEGATIVE = 1e-12


def relative_covariance(c1, c2):
    """``C1 + C2`` as ``(N, 6, 6)`` (3 x 3 inputs padded with zero velocity blocks) and
    whether it had an eigenvalue below ``-NEGATIVE`` times its largest (negative ones are
    clipped to 0 for the sampling, `hits`)."""
    total = np.zeros(np.broadcast_shapes(c1.shape[:-2], c2.shape[:-2]) + (6, 6))
    for c in (c1, c2):
        size = c.shape[-1]
        total[..., :size, :size] += c
    values = np.linalg.eigvalsh(total)
    return total, values[..., 0] < -NEGATIVE * np.maximum(values[..., -1], 0.0)


def _factor(total):
    """``F`` with ``F F^T = total`` (negative eigenvalues clipped to 0)."""
    values, vectors = np.linalg.eigh(total)
    return vectors * np.sqrt(np.maximum(values, 0.0))[..., None, :]


def hits(r, v, total, hbr, samples, rng, block=BLOCK):
    """Hits of ``samples`` draws per approach: ``r``, ``v`` ``(N, 3)`` the relative
    position and velocity at the TCA, ``total`` ``(N, 6, 6)`` the covariance of their
    error (`relative_covariance`), ``hbr`` ``(N,)``; returns ``(N,)`` int64. Approaches
    whose velocity blocks are 0 draw position errors only."""
    n = len(r)
    count = np.zeros(n, dtype=np.int64)
    per = max(1, min(samples, block))          # samples per approach in one draw
    rows = max(1, block // per)                # approaches in one draw
    for first in range(0, n, rows):
        part = slice(first, min(n, first + rows))
        dim = 6 if np.any(total[part, 3:, :] != 0.0) else 3
        factor = _factor(total[part, :dim, :dim])
        limit = hbr[part, None] ** 2
        for start in range(0, samples, per):
            size = min(per, samples - start)
            z = rng.standard_normal((dim, factor.shape[0], size))
            error = [sum(factor[:, j, k, None] * z[k] for k in range(dim)) for j in range(dim)]
            pos = [r[part, j, None] + error[j] for j in range(3)]
            vel = ([v[part, j, None] + error[3 + j] for j in range(3)] if dim == 6 else
                   [v[part, j, None] for j in range(3)])
            along = pos[0] * vel[0] + pos[1] * vel[1] + pos[2] * vel[2]
            speed2 = vel[0] * vel[0] + vel[1] * vel[1] + vel[2] * vel[2]
            closest = pos[0] * pos[0] + pos[1] * pos[1] + pos[2] * pos[2] - along * along / speed2
            count[part] += np.count_nonzero(closest < limit, axis=1)
    return count


def _log_beta(a, b):
    lgamma = np.vectorize(math.lgamma, otypes=[float])
    return lgamma(a) + lgamma(b) - lgamma(a + b)


def _fraction(a, b, x, iterations=100_000, eps=1e-15, tiny=1e-300):
    """The continued fraction of the incomplete beta function (modified Lentz), for
    ``x < (a + 1) / (a + b + 2)``, where it converges fast."""
    c = np.ones_like(x)
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / np.where(np.abs(d) < tiny, tiny, d)
    h = d.copy()
    done = np.zeros(x.shape, dtype=bool)
    for m in range(1, iterations):
        for term in (m * (b - m) * x / ((a - 1.0 + 2 * m) * (a + 2 * m)),
                     -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 1.0 + 2 * m))):
            d = 1.0 + term * d
            d = 1.0 / np.where(np.abs(d) < tiny, tiny, d)
            c = 1.0 + term / c
            c = np.where(np.abs(c) < tiny, tiny, c)
            delta = d * c
            h = np.where(done, h, h * delta)
        done |= np.abs(delta - 1.0) < eps
        if done.all():
            break
    return h


def _beta_cdf(a, b, x):
    """The regularized incomplete beta function ``I_x(a, b)``, ``0 < x < 1``."""
    swap = x > (a + 1.0) / (a + b + 2.0)
    a1, b1, x1 = np.where(swap, b, a), np.where(swap, a, b), np.where(swap, 1.0 - x, x)
    log_front = a1 * np.log(x1) + b1 * np.log1p(-x1) - _log_beta(a1, b1)
    part = np.exp(log_front) * _fraction(a1, b1, x1) / a1
    return np.where(swap, 1.0 - part, part)


def _beta_quantile(a, b, target, steps=200):
    """``x`` with ``I_x(a, b) = target``: Newton's steps on the density, kept inside a
    bracket that bisection shrinks where a step leaves it."""
    lo, hi = np.zeros_like(target), np.ones_like(target)
    mean = a / (a + b)
    spread = np.sqrt(a * b / ((a + b) ** 2 * (a + b + 1.0)))
    x = np.clip(mean + spread * np.sqrt(2.0) * _erfinv(2.0 * target - 1.0), 1e-300, 1 - 1e-16)
    log_norm = _log_beta(a, b)
    for _ in range(steps):
        value = _beta_cdf(a, b, x) - target
        lo = np.where(value < 0, x, lo)
        hi = np.where(value >= 0, x, hi)
        density = np.exp((a - 1.0) * np.log(x) + (b - 1.0) * np.log1p(-x) - log_norm)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            step = x - value / density
        inside = np.isfinite(step) & (step > lo) & (step < hi)
        new = np.where(inside, step, 0.5 * (lo + hi))
        if np.all(np.abs(new - x) <= 1e-13 * np.maximum(x, 1e-300)):
            return new
        x = new
    return x


def _erfinv(y):
    """A start for Newton's steps (Giles' single-precision approximation is enough)."""
    w = -np.log((1.0 - y) * (1.0 + y))
    small = w < 5.0
    ws = w - 2.5
    wl = np.sqrt(np.maximum(w, 5.0)) - 3.0
    ps = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503,
              -0.00417768164, 0.246640727, 1.50140941):
        ps = c + ps * ws
    pl = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613,
              0.00943887047, 1.00167406, 2.83297682):
        pl = c + pl * wl
    return np.where(small, ps, pl) * y


def clopper_pearson(hits, samples, confidence=CONFIDENCE):
    """The Clopper-Pearson ("exact") interval of a binomial proportion: ``(lower,
    upper)`` arrays, such that the probability lies outside it with at most
    ``1 - confidence`` (half on each side) whatever its value; ``lower`` is 0 where
    ``hits`` is 0, ``upper`` 1 where ``hits`` is ``samples``."""
    k = np.asarray(hits, dtype=np.float64)
    n = np.broadcast_to(np.asarray(samples, dtype=np.float64), k.shape)
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence: expected a number between 0 and 1, got {confidence}")
    if np.any((k < 0) | (k > n) | (k != np.round(k))):
        raise ValueError("hits: expected whole numbers between 0 and samples")
    tail = 0.5 * (1.0 - confidence)
    lower, upper = np.zeros(k.shape), np.ones(k.shape)
    some, short = k > 0, k < n
    if some.any():
        lower[some] = _beta_quantile(k[some], n[some] - k[some] + 1.0,
                                     np.full(int(some.sum()), tail))
    if short.any():
        upper[short] = _beta_quantile(k[short] + 1.0, n[short] - k[short],
                                      np.full(int(short.sum()), 1.0 - tail))
    return lower, upper
