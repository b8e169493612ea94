"""Right-hand sides of benchmarks/latency.py, importable so that their kernels are cached."""

from hapsira_core.jit import hjit


@hjit
def van_der_pol(t, y, p):
    return (y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0])
