import sys, numpy as np, numba, time
print("python", sys.version.split()[0], "numpy", np.__version__, "numba", numba.__version__)
import numba_cuda; print("numba_cuda", numba_cuda.__version__)
from numba import cuda
print(cuda.detect())
import math
@cuda.jit(device=True)
def f(t, rr, vv, k, p):
    r = math.sqrt(rr[0]**2 + rr[1]**2 + rr[2]**2)
    c = -k / r**3 * p[0]
    return vv, (c*rr[0], c*rr[1], c*rr[2])
@cuda.jit(device=True)
def rhs(fun, t, y, k, p):
    a, b = fun(t, (y[0], y[1], y[2]), (y[3], y[4], y[5]), k, p)
    return (a[0], a[1], a[2], b[0], b[1], b[2])
@cuda.jit(device=True)
def solve(fun, y, k, p, n):
    h = 1.0
    for i in range(n):
        d = rhs(fun, 0.0, y, k, p)
        y = (y[0]+h*d[0], y[1]+h*d[1], y[2]+h*d[2], y[3]+h*d[3], y[4]+h*d[4], y[5]+h*d[5])
    return y
def make(fun):
    @cuda.jit
    def kern(y0, p, out):
        i = cuda.grid(1)
        if i < y0.shape[0]:
            y = (y0[i,0], y0[i,1], y0[i,2], y0[i,3], y0[i,4], y0[i,5])
            y = solve(fun, y, 398600.0, p[i], 100)
            for j in range(6): out[i, j] = y[j]
    return kern
k = make(f)
y0 = np.random.rand(1000, 6) + 7000; p = np.ones((1000, 1)); out = np.zeros_like(y0)
t = time.perf_counter(); k[8, 128](y0, p, out); cuda.synchronize(); print("compile+run", time.perf_counter()-t)
print(out[0], "regs", list(k.overloads.values())[0].get_regs_per_thread())
