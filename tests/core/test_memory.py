"""The size check of a call's outputs (`hapsira_core.memory`)."""

import numpy as np
import pytest

from hapsira_core import memory


def _shapes(size):
    return {"y": ((int(size),), np.uint8)}


def test_a_recent_reading_decides_calls_that_need_a_tenth_of_it(monkeypatch):
    """The available memory is read again only for a call that needs more than a tenth of
    the last reading, or once that reading is `RECENT_S` old; a limit set by `LIMIT` or
    the environment is never taken from a reading."""
    readings = []

    def available():
        readings.append(1e9)
        return 1e9

    monkeypatch.setattr(memory, "available", available)
    monkeypatch.setattr(memory, "_READINGS", {})
    monkeypatch.setattr(memory, "LIMIT", None)
    monkeypatch.delenv(memory.ENV, raising=False)
    memory.check(_shapes(1e6), 1, 1)
    assert len(readings) == 1
    memory.check(_shapes(1e8), 1, 1)  # a tenth: the reading decides
    assert len(readings) == 1
    memory.check(_shapes(2e8), 1, 1)  # more: read again
    assert len(readings) == 2
    with pytest.raises(memory.OutputTooLargeError, match="the memory available now"):
        memory.check(_shapes(2e9), 7, 3)
    monkeypatch.setattr(memory, "RECENT_S", 0.0)  # every reading is old
    memory.check(_shapes(1e6), 1, 1)
    assert len(readings) == 4
    monkeypatch.setattr(memory, "RECENT_S", 60.0)
    monkeypatch.setenv(memory.ENV, "1MB")
    with pytest.raises(memory.OutputTooLargeError, match=memory.ENV):
        memory.check(_shapes(2e6), 1, 1)  # under a tenth of the reading, over the limit
    assert len(readings) == 4
