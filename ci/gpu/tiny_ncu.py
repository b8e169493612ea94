"""A plain numba kernel: ci/gpu/profile.sh checks that Nsight Compute sees numba launches."""
import numpy as np
from numba import cuda
@cuda.jit
def k(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = a[i] * 2.0 + 1.0
a = cuda.to_device(np.ones(1 << 20))
k[1024, 1024](a)
cuda.synchronize()
print("ran")
