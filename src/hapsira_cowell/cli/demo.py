"""The demo's physics: a synthetic LEO debris cloud with a few fragments low enough to re-enter.

``hapsira-cowell demo`` propagates it for a day with J2 and drag. The cloud is
made from classical elements (`hapsira_cowell.inputs.elements.from_classical`) on
the active target: call these functions only after choosing the target.
"""

import math

import numpy as np

from ..constants import K_EARTH, R_EARTH

__all__ = ["demo_cloud", "demo_catalog", "run_demo"]


def demo_cloud(n, seed=0, low_fraction=0.04):
    """A synthetic LEO debris cloud: ``(names, r0, v0, area_to_mass)`` (km, km/s, m^2/kg).

    Perigees 300-1200 km, eccentricities below 0.02, any inclination, A/m
    log-uniform in 0.005-0.1 m^2/kg; about ``low_fraction`` of the objects
    (at least 3) are fragments on near-circular orbits at 120-180 km with A/m
    0.02-0.1 m^2/kg, which re-enter within a day under ``drag``.
    """
    from ..inputs.elements import from_classical

    rng = np.random.default_rng(seed)
    u = rng.random((n, 7))
    low = np.zeros(n, dtype=bool)
    low[: min(n, max(3, int(round(low_fraction * n))))] = True
    rng.shuffle(low)
    perigee = np.where(low, 120.0 + 60.0 * u[:, 0], 300.0 + 900.0 * u[:, 0])
    ecc = np.where(low, 0.001 * u[:, 1], 0.02 * u[:, 1])
    inc = np.arccos(2 * u[:, 2] - 1)
    raan, argp, nu = 2 * math.pi * u[:, 3:6].T
    r0, v0 = from_classical(K_EARTH, ecc=ecc, inc=inc, raan=raan, argp=argp, nu=nu,
                            p=(R_EARTH + perigee) * (1 + ecc))
    area_to_mass = np.where(low, 0.02 * 5 ** u[:, 6], 0.005 * 20 ** u[:, 6])
    names = [f"DEMO {i:05d}" + (" LOW" if low[i] else "") for i in range(n)]
    return names, r0, v0, area_to_mass


def demo_catalog(n, seed=0):
    """`demo_cloud` as a `hapsira_cowell.catalog.Catalog`, ready for `hapsira_cowell.batch.propagate`."""
    from .catalog import Catalog

    names, r0, v0, area_to_mass = demo_cloud(n, seed)
    return Catalog(names, r0, v0, "synthetic demo cloud", "inertial, Earth-centred",
                   area_to_mass=area_to_mass,
                   notes=[f"{sum(' LOW' in s for s in names)} fragments start at "
                          "120-180 km and should re-enter within the day"])


def run_demo(out="demo.png", n=500, seed=0, progress=True):
    """The ``hapsira-cowell demo`` run: ``n`` objects for a day with J2 and drag, plotted.

    Writes the altitude plot to ``out`` and the ground tracks of the first
    3 h beside it (``<stem>-tracks.png``); returns ``(run, catalog, paths)``
    (a `hapsira_cowell.batch.RunResult`, the catalog, the two PNG paths).
    Needs matplotlib.
    """
    import os

    from .batch import propagate
    from .inputs import make_tofs
    from .plots import altitude_vs_time, ground_tracks

    catalog = demo_catalog(n, seed)
    tofs = make_tofs(86400.0, 120.0)
    run = propagate(catalog, tofs, ("j2", "drag"), keep_states=True, progress=progress)
    altitude_vs_time(run, tofs, R_EARTH, out, reentry_altitude=100.0,
                     title=f"demo: {n} synthetic debris, two-body + J2 + drag, 1 day")
    stem, suffix = os.path.splitext(out)
    tracks = f"{stem}-tracks{suffix or '.png'}"
    ground_tracks(run, tofs, tracks, hours=3.0,
                  title="demo: ground tracks over the first 3 h (longitude 0 on the x axis at t = 0)")
    return run, catalog, [str(out), tracks]
