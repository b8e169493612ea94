"""How the cuda target splits a call into launches (the other targets make one call)."""

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_cowell import cowell
from hapsira_core.jit import ObjectKernel

from reference import K_EARTH, varied_orbits

pytestmark = pytest.mark.skipif(settings.TARGET != "cuda", reason="launches exist on cuda only")


class _Context:
    def __init__(self, free):
        self.free = free

    def get_memory_info(self):
        return self.free, self.free


def test_chunks_shrink_to_fit_the_free_memory(monkeypatch):
    """Many output times per object: a chunk takes at most a quarter of the free memory."""
    from numba import cuda

    states = list(varied_orbits(9).values())
    r0 = np.array([s[0] for s in states])
    v0 = np.array([s[1] for s in states])
    tofs = np.linspace(60.0, 600.0, 30)  # ten minutes: the simulator interprets each step
    whole = cowell(K_EARTH, r0, v0, tofs)
    # rr and vv alone take 2 * 30 * 3 * 8 bytes per object: with this much
    # free memory a chunk holds at most 3 objects
    monkeypatch.setattr(cuda, "current_context", lambda: _Context(4 * 1440 * 3))
    launches = []
    original = ObjectKernel._copy_back

    def counting(self, arrays, device, stream, start, stop):
        launches.append((start, stop))
        return original(self, arrays, device, stream, start, stop)

    monkeypatch.setattr(ObjectKernel, "_copy_back", counting)
    split = cowell(K_EARTH, r0, v0, tofs)
    assert len(r0) > 3
    assert max(stop - start for start, stop in launches) <= 3
    assert sum(stop - start for start, stop in launches) == len(r0)
    np.testing.assert_array_equal(split.status, whole.status)
    np.testing.assert_array_equal(split.rr, whole.rr)
    np.testing.assert_array_equal(split.vv, whole.vv)


def test_kernel_time_counts_overlapping_chunks_once():
    """Chunks on two streams overlap: their kernel time is the union of their intervals."""
    from hapsira_core.targets.cuda.launch import _busy_seconds

    assert _busy_seconds([(0.0, 16.0), (12.5, 30.0), (29.0, 31.0), (40.0, 41.5)]) == 0.0325
    assert _busy_seconds([(3.0, 4.0), (0.0, 10.0)]) == 0.01
    assert _busy_seconds([]) == 0.0
