"""``hapsira-cowell prepare``: the kernels the library fixes, compiled before the first call.

A first call compiles its kernels (numba), and later processes load them from the
disk cache (``HAPSIRA_CACHE_DIR``). `prepare` compiles, for the active target, the
kernels of ``hapsira-cowell screen`` with its default options (`screen`'s default
force model `hapsira_cowell.conjunctions.two_body_j2`: the sampling solver, the
broad phase's kernels, the refining solver) and of ``hapsira-cowell propagate`` with
its default force model (``--perturbations j2``: `cowell`'s solver), each kernel
that a call of any size may run (`hapsira_core.ivp.prepare.every`: under
``HAPSIRA_LANES=auto`` the lane kernel and its per-object twin). They compile side
by side in worker processes, as many at once as this process has cores
(`hapsira_core.ivp.prepare`); what workers leave (one core, one kernel) compiles
here. A later call with other kernels (another force model, events, method...:
docs/guide.md, "Which kernels a call needs") still compiles those at its first use.
"""

import dataclasses
import time

from .models import build_rhs

__all__ = ["DEFAULT_PERTURBATIONS", "Prepared", "cowell_kernel", "needs", "prepare"]

#: ``hapsira-cowell propagate``'s default ``--perturbations``
DEFAULT_PERTURBATIONS = ("j2",)


def cowell_kernel(perturbations=DEFAULT_PERTURBATIONS):
    """The solver kernel that `cowell` runs (as ``hapsira-cowell propagate`` calls it)
    for the force model of ``perturbations`` without drag (with drag the call has a
    re-entry event: another kernel): built by the same steps as `cowell`'s call."""
    import numpy as np

    from ..propagation.forms import bounds_checked, orbit_call

    if "drag" in perturbations:
        raise ValueError(f"perturbations: {perturbations!r}: with drag the call has a "
                         "re-entry event, which this kernel has not")
    f = build_rhs(perturbations)
    checked, events = bounds_checked(f, ())
    call = orbit_call("cowell", checked, f, events, np.array([1.0]), 1e-11, 1e-12, 100_000, 64)
    return call.problem().kernel


def needs():
    """``{"screen": [...], "propagate": [...]}``: the kernels `prepare` compiles, as
    `hapsira_core.ivp.prepare.Need` without objects (`hapsira_core.ivp.prepare.every`)."""
    from hapsira_core.ivp import prepare as ahead

    from ..propagation import conjunctions

    # a screen without params: each object's row is one number wide (`conjunctions._rows`)
    screen = conjunctions.kernels(conjunctions.two_body_j2, 1, 2)
    model = ahead.Need(cowell_kernel(DEFAULT_PERTURBATIONS),
                       f"from {__name__} import cowell_kernel as _k\n"
                       f"kernel = _k({DEFAULT_PERTURBATIONS!r})\n", cost=16.0)
    return {"screen": [each for need in screen for each in ahead.every(need)],
            "propagate": ahead.every(model)}


@dataclasses.dataclass
class Prepared:
    """What `prepare` did: ``kernels`` (how many it covers), ``cached`` (of those, found
    in the disk cache), ``side_by_side`` (compiled by worker processes), ``here``
    (compiled in this process), ``cores`` (the workers' at most), ``seconds`` (wall),
    ``target``, ``cache_dir`` and ``simulated`` (numba's CUDA simulator, which runs
    kernels in Python: nothing to compile)."""

    target: str
    kernels: int
    cached: int
    side_by_side: int
    here: int
    cores: int
    seconds: float
    cache_dir: str
    simulated: bool = False

    def lines(self):
        """The command's report."""
        if self.simulated:
            return [f"target {self.target}: numba's CUDA simulator runs kernels in Python; "
                    "nothing to compile"]
        compiled = self.side_by_side + self.here
        how = []
        if self.side_by_side:
            how.append(f"{self.side_by_side} side by side on up to {self.cores} cores")
        if self.here:
            how.append(f"{self.here} in this process")
        return [f"target {self.target}: {self.kernels} kernels (the screen's and propagate's "
                f"with their default options)",
                f"compiled {compiled}" + (f" ({', '.join(how)})" if how else "")
                + f"; {self.cached} were in the cache already",
                f"cache: {self.cache_dir}",
                f"wall time: {self.seconds:.1f} s"]


def prepare():
    """Compile into the disk cache, for the active target, every kernel of
    ``hapsira-cowell screen`` and ``hapsira-cowell propagate`` with their default
    options (the module's notes say which), side by side on this process's cores;
    kernels already in the cache are kept. Later processes then load them. Returns a
    `Prepared`; the ``hapsira`` logger says what compiles (`hapsira_core.progress`).

    Raises `RuntimeError` where no kernel can be kept for later processes:
    ``HAPSIRA_CACHE=0`` or a ``HAPSIRA_CACHE_DIR`` that cannot be written. Under numba's
    CUDA simulator (which runs kernels in Python) it compiles nothing and says so.
    """
    from hapsira_core import settings
    from hapsira_core.ivp import prepare as ahead
    from hapsira_core.kernels import cache
    from hapsira_core.targets import active

    started = time.perf_counter()
    found = [need for group in needs().values() for need in group]
    if getattr(active, "SIMULATOR", False):  # (compiles nothing, caches nothing)
        return Prepared(settings.TARGET, len(found), 0, 0, 0, ahead.workers(),
                        time.perf_counter() - started, settings.CACHE_DIR, simulated=True)
    if not settings.CACHE:
        raise RuntimeError("HAPSIRA_CACHE=0: kernels are not kept on disk, so nothing "
                           "compiled now would serve a later process; unset it")
    if not cache.usable():
        raise RuntimeError(f"HAPSIRA_CACHE_DIR={settings.CACHE_DIR!r} cannot be written "
                           "(see the warning), so nothing compiled now would serve a later "
                           "process; point it at a writable folder")
    left = ahead.missing(found)
    workers = ahead.prepare(left)
    here = 0
    for need in ahead.missing(left):
        need.runs().compile()
        here += 1
    return Prepared(settings.TARGET, len(found), len(found) - len(left), workers, here,
                    ahead.workers(), time.perf_counter() - started, settings.CACHE_DIR)
