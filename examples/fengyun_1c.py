"""The whole Fengyun-1C debris catalog, one day, two-body + J2 + US76 drag.

    python examples/fengyun_1c.py [path/to/fengyun-1c-debris.tle]

Reads the TLE catalog, brings every object to the catalog's latest epoch with
SGP4, gives each an area-to-mass ratio (fragments: 0.005-0.1 m^2/kg, drawn
per object), and propagates one day on the active target with a terminal
re-entry event at 100 km. Prints how many objects ended how.
"""

import sys
import time
from pathlib import Path

import numpy as np

from hapsira_core.jit import hjit
from hapsira_cowell import STATUS_MESSAGES, cowell
from hapsira_cowell.events import AltitudeCrossEvent
from hapsira_cowell.inputs.tle import from_tle
from hapsira_cowell.perturbations import J2_perturbation, atmospheric_drag_us76, two_body

K = 398600.4418
R = 6378.137
DEFAULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "fengyun-1c-debris.tle"


@hjit
def j2_drag(t, rr, vv, k, p):
    """Two-body + J2 + US76 drag; p[0] = C_D, p[1] = A/m (km^2/kg)."""
    drr, dvv = two_body(t, rr, vv, k, p)
    a = J2_perturbation(t, rr, vv, k, 1.08262668e-3, 6378.137)
    d = atmospheric_drag_us76(t, rr, vv, k, 6378.137, p[0], p[1])
    return drr, (dvv[0] + a[0] + d[0], dvv[1] + a[1] + d[1], dvv[2] + a[2] + d[2])


def propagate(path=DEFAULT, limit=None, seed=0, span=86400.0):
    """The first ``limit`` objects (default all) over ``span`` seconds, 25 outputs."""
    catalog = from_tle(path)
    r0, v0, ok = catalog.states_at(catalog.epochs.max())
    n = len(catalog) if limit is None else min(limit, len(catalog))
    area_to_mass = 10 ** np.random.default_rng(seed).uniform(np.log10(0.005), -1.0, n) * 1e-6
    params = np.column_stack([np.full(n, 2.2), area_to_mass])
    tofs = np.linspace(0.0, span, 25)
    res = cowell(K, r0[:n], v0[:n], tofs, f=j2_drag, params=params,
                 events=[AltitudeCrossEvent(100.0, R)])
    return catalog, ok[:n], res


def main():
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    start = time.perf_counter()
    catalog, ok, res = propagate(path)
    seconds = time.perf_counter() - start
    print(f"{len(catalog)} objects from {path.name}; SGP4 to a common epoch failed for "
          f"{int((~ok).sum())}")
    for status in np.unique(res.status):
        print(f"  status {status:2d}: {int((res.status == status).sum()):5d}  "
              f"({STATUS_MESSAGES[int(status)]})")
    print(f"{seconds:.1f} s including compilation")


if __name__ == "__main__":
    main()
