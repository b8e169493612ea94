"""A real catalog end to end: TLE -> common epoch -> one day of J2 + drag, no object lost."""

import sys
from pathlib import Path

import numpy as np

from hapsira_core import settings

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
import fengyun_1c  # noqa: E402
from reference import DATA_DIR  # noqa: E402


def test_fengyun_1c_whole_catalog_one_day():
    # The simulator runs Python per thread (24 objects for a day took 470 s):
    # there, the first six objects for two hours.
    simulated = settings.TARGET == "cuda" and settings.cuda_simulator_enabled()
    limit, span = (6, 7200.0) if simulated else (None, 86400.0)
    catalog, ok, res = fengyun_1c.propagate(DATA_DIR / "fengyun-1c-debris.tle", limit=limit,
                                            span=span)
    n = len(catalog) if limit is None else limit
    assert len(catalog) == 1918
    assert res.status.shape == (n,) and res.rr.shape == (n, 25, 3)
    assert set(np.unique(res.status)) <= {0, 1}  # every object done or re-entered
    done = res.status == 0
    assert np.isfinite(res.rr[done]).all()
    r = np.linalg.norm(res.rr[done][:, -1], axis=-1)
    assert np.all((r > 6378.137 + 100) & (r < 6378.137 + 4000))
    # re-entered objects: an event time within the span, NaN states after it
    reentered = res.status == 1
    t = res.t_events[0][reentered, 0]
    assert np.all((t > 0) & (t <= span))
