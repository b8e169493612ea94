"""The generated stage code does the arithmetic of the plain stage sums, in fewer live states."""

import math

from hapsira_core.ivp import stages
from hapsira_core.ivp.methods.dop853 import A, B, C, D, E3, E5, N_STAGES


def f(t, y):
    """A smooth, non-linear, time-dependent test right-hand side."""
    return tuple(math.sin(0.3 * n + t) * y[n] + 0.1 * t * y[(n + 1) % 6] for n in range(6))


def run_generated(name, rows, outputs, given, args):
    source, switch = stages.generate(name, rows, outputs, given)
    namespace = {"rhs": lambda fun, t, y, k, p: fun(t, y)}
    exec(source, namespace)
    return namespace[name](f, *args), switch


def plain_sum(weights, ks):
    """Left to right over all columns, zeros included, as a dot product would."""
    total = [0.0] * 6
    for w, k in zip(weights, ks):
        total = [a + w * b for a, b in zip(total, k)]
    return total


def stage_rows(indices):
    return [(i, C[i], stages.weights(A[i])) for i in indices]


T, H = 0.7, 0.05
Y = (7000.0, -1200.0, 300.0, 1.1, 7.3, -0.4)


def plain_stages():
    ks = [f(T, Y)]
    for i in range(1, N_STAGES):
        s = plain_sum(A[i], ks)
        ks.append(f(T + C[i] * H, tuple(y + H * d for y, d in zip(Y, s))))
    return ks


def test_step_sums_equal_the_plain_sums_bit_for_bit():
    ks = plain_stages()
    (b, e5, e3), switch = run_generated(
        "step", stage_rows(range(1, N_STAGES)),
        {"b": stages.weights(B), "e5": stages.weights(E5), "e3": stages.weights(E3)},
        (0,), (T, Y, H, None, None, ks[0]))
    assert 0 < switch < N_STAGES
    assert b == tuple(plain_sum(B, ks))
    assert e5 == tuple(plain_sum(E5[:N_STAGES], ks))
    assert e3 == tuple(plain_sum(E3[:N_STAGES], ks))


def test_interpolant_sums_equal_the_plain_sums_bit_for_bit():
    ks = plain_stages()
    y_new = tuple(y + H * d for y, d in zip(Y, plain_sum(B, ks)))
    ks.append(f(T + H, y_new))
    for i in (13, 14, 15):
        s = plain_sum(A[i], ks)
        ks.append(f(T + C[i] * H, tuple(y + H * d for y, d in zip(Y, s))))
    sums, _ = run_generated(
        "dense", stage_rows(list(range(1, N_STAGES)) + [13, 14, 15]),
        {f"d{r}": stages.weights(D[r]) for r in range(4)},
        (0, N_STAGES), (T, Y, H, None, None, ks[0], ks[N_STAGES]))
    for r in range(4):
        assert sums[r] == tuple(plain_sum(D[r], ks))


def test_streaming_keeps_fewer_states_alive_than_storing_every_stage():
    rows = stage_rows(range(1, N_STAGES))
    outputs = {"b": stages.weights(B), "e5": stages.weights(E5), "e3": stages.weights(E3)}
    stored = stages._live_states(rows, outputs, (0,), N_STAGES + 1)  # never switch
    _, switch = stages.generate("step", rows, outputs, (0,))
    best = stages._live_states(rows, outputs, (0,), switch)
    assert best == 6 and stored == 9
    assert best == min(stages._live_states(rows, outputs, (0,), s) for s in range(N_STAGES + 1))
