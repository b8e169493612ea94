"""The target's own memory (`hapsira_core.targets`: ``device_empty``, ``to_device``,
``to_host``, ``device_memory``) and `ObjectKernel` arrays already there, read and written
in place: two kernels in a row keep what passes between them in the target's memory."""

import numpy as np
import pytest

from hapsira_core import settings
from hapsira_core.jit import Arg, ObjectKernel, hjit
from hapsira_core.targets import active

#: whether the active target has memory of its own (cuda, the simulator's included)
OWN_MEMORY = active.device_memory() is not None


@hjit
def _double(x, out):
    for c in range(x.shape[0]):
        out[c] = 2.0 * x[c]


@hjit
def _both(x, kept, sent):
    for c in range(x.shape[0]):
        kept[c] = x[c] + 1.0
        sent[c] = x[c] - 1.0


_DOUBLE = ObjectKernel(_double, [Arg("x", np.float64, ("k",)),
                                 Arg("out", np.float64, ("k",), output=True)])
_BOTH = ObjectKernel(_both, [Arg("x", np.float64, ("k",)),
                             Arg("kept", np.float64, ("k",), output=True),
                             Arg("sent", np.float64, ("k",), output=True)])


def test_device_memory_is_none_exactly_on_the_host_targets():
    memory = active.device_memory()
    if settings.TARGET in ("cpu", "parallel"):
        assert memory is None
    else:
        free, total = memory
        assert 0 < free <= total


def test_empty_to_device_and_back():
    a = active.device_empty((5, 3), np.int32)
    assert tuple(a.shape) == (5, 3) and np.dtype(a.dtype) == np.int32
    x = np.arange(6.0).reshape(2, 3)
    on = active.to_device(x)
    back = active.to_host(on)
    assert isinstance(back, np.ndarray)
    np.testing.assert_array_equal(back, x)
    assert active.to_device(on) is on  # there already: itself
    if OWN_MEMORY:
        assert not isinstance(on, np.ndarray) and not np.shares_memory(back, x)
    else:  # the host targets: plain numpy, no copies
        assert on is x and back is x
        assert isinstance(a, np.ndarray)
    # a view the host could not hand over as it is: made C-ordered on the way
    np.testing.assert_array_equal(active.to_host(active.to_device(x.T)), x.T)


def test_a_column_view_gets_the_strides_of_a_fresh_array():
    """``np.arange(k)[:, None]`` has strides (4, 0), which numpy calls C-contiguous; in
    the GPU's memory it gets (4, 4), so that slices of it are views made in O(1) (numba
    walked every element of a stride-0 device array per slice: 37 s on an H100 for the
    broad phase's 4e6 items)."""
    column = np.arange(7, dtype=np.int32)[:, None]
    assert column.strides == (4, 0) and column.flags.c_contiguous
    on = active.to_device(column)
    np.testing.assert_array_equal(active.to_host(on[2:5]), column[2:5])
    if OWN_MEMORY:
        assert tuple(on.strides) == (4, 4)


@pytest.mark.parametrize("chunk", [None, 2])
def test_an_output_in_the_targets_memory_is_written_in_place(monkeypatch, chunk):
    """A kernel writes into a device_empty array, the next reads it: the numbers are
    those of host arrays, also when cuda runs the objects in launches of two."""
    if chunk is not None:
        monkeypatch.setattr(settings, "CUDA_CHUNK", chunk)
    x = np.arange(21.0).reshape(7, 3)
    middle = active.device_empty((7, 3))
    _DOUBLE(x, middle)
    out = np.zeros((7, 3))
    _DOUBLE(middle, out)
    np.testing.assert_array_equal(out, 4.0 * x)
    np.testing.assert_array_equal(active.to_host(middle), 2.0 * x)
    # one output there, one on the host: each where it was given
    kept, sent = active.device_empty((7, 3)), np.zeros((7, 3))
    _BOTH(active.to_device(x), kept, sent)
    np.testing.assert_array_equal(active.to_host(kept), x + 1.0)
    np.testing.assert_array_equal(sent, x - 1.0)


@pytest.mark.skipif(not OWN_MEMORY, reason="the host targets copy nothing")
def test_an_output_in_the_targets_memory_is_never_copied_back(monkeypatch):
    """cuda copies a host output's rows back after each launch, and nothing of an output
    given in the GPU's memory; its launches size their buffers without it."""
    from hapsira_core.targets.cuda import launch

    monkeypatch.setattr(settings, "CUDA_CHUNK", 2)
    x = np.arange(21.0).reshape(7, 3)
    kept, sent = active.device_empty((7, 3)), np.zeros((7, 3))
    copied = []
    original = launch._copy_out

    def counting(device, host, stream):
        copied.append(host)
        return original(device, host, stream)

    monkeypatch.setattr(launch, "_copy_out", counting)
    _BOTH(active.to_device(x), kept, sent)
    # four launches (7 objects, two a launch), each copying its rows of `sent` alone
    assert len(copied) == 4
    assert all(np.shares_memory(ary, sent) for ary in copied)
    monkeypatch.setattr(launch, "_copy_out", original)
    np.testing.assert_array_equal(active.to_host(kept), x + 1.0)
    np.testing.assert_array_equal(sent, x - 1.0)
    # launch buffers: only the host output's rows need one (24 bytes an object); with
    # memory for 3 such rows (a quarter of it for two chunks' rows), 3 objects a launch
    monkeypatch.setattr(settings, "CUDA_CHUNK", 100)

    class Context:
        def get_memory_info(self):
            return 4 * 24 * 3, 4 * 24 * 3

    monkeypatch.setattr(launch.cuda, "current_context", lambda: Context())
    kernel = launch.ObjectKernel(_both, _BOTH.args)
    assert kernel._chunk_size([active.to_device(x), kept, sent], {}) == 3
    assert kernel._chunk_size([x, kept, sent], {}) == 1  # a host input counts
    # every array in the GPU's memory: nothing to copy, all objects in one launch
    assert kernel._chunk_size([active.to_device(x), kept, active.device_empty((7, 3))],
                              {}) == 7


@pytest.mark.skipif(not OWN_MEMORY, reason="the host targets copy nothing")
def test_a_recent_reading_of_the_free_memory_sizes_the_next_launches(monkeypatch):
    """A reading of the GPU's free memory under `FREE_MEMORY_S` old sizes the next call's
    chunks where two chunks take at most a tenth of it; otherwise the driver is asked."""
    from hapsira_core.targets.cuda import launch

    free, readings = [10 ** 9], []

    class Context:
        def get_memory_info(self):
            readings.append(free[0])
            return free[0], free[0]

    context = Context()
    monkeypatch.setattr(launch.cuda, "current_context", lambda: context)
    monkeypatch.setattr(settings, "CUDA_CHUNK", 100)
    monkeypatch.setattr(launch, "FREE_MEMORY_S", 60.0)
    kernel = launch.ObjectKernel(_both, _BOTH.args)
    arrays = [np.arange(21.0).reshape(7, 3), active.device_empty((7, 3)), np.zeros((7, 3))]
    assert kernel._chunk_size(arrays, {}) == 100 and len(readings) == 1
    free[0] = 4 * 48 * 3  # (the next reading: room for three objects' rows)
    assert kernel._chunk_size(arrays, {}) == 100 and len(readings) == 1  # the reading decides
    monkeypatch.setattr(launch, "FREE_MEMORY_S", 0.0)  # too old: asked again
    assert kernel._chunk_size(arrays, {}) == 3 and len(readings) == 2
    monkeypatch.setattr(launch, "FREE_MEMORY_S", 60.0)
    assert kernel._chunk_size(arrays, {}) == 3 and len(readings) == 3  # too little to keep
