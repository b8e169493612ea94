"""Right-hand sides of benchmarks/gpu_ensembles.py, importable (Van der Pol is latency.py's)."""

from hapsira_core.jit import hjit


@hjit
def lotka_volterra(t, y, p):
    return (p[0] * y[0] - p[1] * y[0] * y[1], -p[2] * y[1] + p[3] * y[0] * y[1])
