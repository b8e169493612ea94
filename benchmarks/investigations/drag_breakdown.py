"""Where the drag + re-entry variant loses time on the GPU: f, the event, or both.

    HAPSIRA_TARGET=cuda python benchmarks/investigations/drag_breakdown.py [--n 1e6]

Times four kernels on the same drag cloud (median of 3): two-body + J2, the same
with the re-entry event, two-body + J2 + drag, and drag with the event; prints
seconds, orbit-steps per second and each kernel's registers and local memory.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # benchmarks/
import workloads as workload  # noqa: E402
from hapsira_cowell import cowell  # noqa: E402
from hapsira_core.ivp.build import KERNELS as _KERNELS  # noqa: E402
from hapsira_cowell.events import AltitudeCrossEvent  # noqa: E402
from hapsira_cowell.propagation.forms import orbit_rhs  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=float, default=1e6)
    args = parser.parse_args()
    n = int(args.n)
    r0, v0, area_to_mass = workload.drag_cloud(n, seed=2)
    tofs = np.array([workload.DAY / 2, workload.DAY])
    event = [AltitudeCrossEvent(workload.REENTRY_ALT, workload.R)]
    cases = {"j2": (workload.two_body_j2, ()), "j2+event": (workload.two_body_j2, event),
             "drag": (workload.two_body_j2_drag, ()),
             "drag+event": (workload.two_body_j2_drag, event)}
    for name, (f, events) in cases.items():
        cowell(workload.K, r0[:64], v0[:64], tofs, f=f, params=area_to_mass[:64], events=events)
        times = []
        for _ in range(3):
            t = time.perf_counter()
            res = cowell(workload.K, r0, v0, tofs, f=f, params=area_to_mass, events=events)
            times.append(time.perf_counter() - t)
        # the core's key (build.KERNELS, the active target's):
        # (method, n, fun, event functions, event states)
        kernel = _KERNELS[next(k for k in _KERNELS
                               if k[2] is orbit_rhs(f) and len(k[3]) == len(events))]
        seconds = float(np.median(times))
        print(json.dumps({"case": name, "n": n, "seconds": seconds,
                          "orbit_steps_per_s": float(res.nsteps.sum()) / seconds,
                          "mean_steps": float(res.nsteps.mean()),
                          "resources": list(kernel.resources().values())}), flush=True)


if __name__ == "__main__":
    main()
