"""Kernels of one call compiled side by side, each in a worker process.

numba compiles under the GIL and a global compiler lock, so threads do not
overlap compiles; processes do. A call that will need several kernels (the
screen's sampling solver, its broad phase and its refining solver) names them
first (`Need`: `solver`, `named`) and calls `prepare`. Those not in the disk
cache yet are compiled at once, each by a new Python process that rebuilds the
kernel from importable names and compiles it into ``HAPSIRA_CACHE_DIR``, as
many at a time as this process has cores; the calling process then loads them
from the cache at their first use. Kernels that share a generic loop not compiled
yet (`hapsira_core.targets._join`) go to one worker, one after another, so that the
loop compiles once (`_chains`). `every` names each kernel that calls of any size may
run (a lane kernel and its per-object twin): ``hapsira-cowell prepare`` compiles a
fixed set so, ahead of any call.

Compiled in this process as before, at their first use, are: every kernel with
``HAPSIRA_CACHE=0`` or a cache folder that cannot be used, on one core, or where
only one kernel is missing; and a kernel whose functions a new process cannot
import (a lambda, a closure no factory made, a function defined in ``__main__``
or an interactive session). A worker that fails (a compile error in a user's
function) leaves its kernel to that first use, which raises the error the
in-process compile raises, in the same words; the failure is also logged on the
``hapsira`` logger. The user is told once what compiles (`..progress.compiling`).

The workers themselves are `.compile_worker`'s, whose `in_background` starts one and
returns at once: under ``HAPSIRA_LANES=auto`` a call whose lane kernel is not compiled
yet runs per object and has its lane kernel compiled so (``HAPSIRA_LANES_BACKGROUND``),
for the calls after it.
"""

import dataclasses
import os
import subprocess
import sys

from .. import progress, settings
from ..kernels import cache
from .compile_worker import (_COMMAND, Need, _job, _last_line, in_background, kernel_source,
                             missing)

__all__ = ["LANE_COST", "Need", "solver", "named", "every", "missing", "prepare", "workers",
           "in_background"]


def solver(fun, n, method="DOP853", events=(), event_states=False, objects=None):
    """The solver kernel that ``solve_ivp(fun, ..., method=method, events=events)`` runs
    on ``n``-component states (``event_states``: the states at events are kept,
    ``max_event_records`` > 0), with ``fun`` and the events' ``g`` checked as
    `solve_ivp` checks them; ``objects``: the call's objects, where known."""
    from . import build, checks
    from .api import Event

    events = checks.event_list(events, Event)
    fun, events = checks.kernel_functions(fun, n, events)
    device = tuple(e.device_function for e in events)
    made = build.kernel(method, n, fun, device, event_states)
    # a solver's loop is the longest compile there is, and grows with the state
    return Need(made, kernel_source(method, n, fun, device, event_states), objects,
                cost=10.0 + n)


def named(module, attribute, objects=None):
    """The kernel bound to ``attribute`` in the importable ``module`` (a name)."""
    loaded = sys.modules.get(module)
    if loaded is None:
        import importlib
        loaded = importlib.import_module(module)
    source = None if module == "__main__" else f"from {module} import {attribute} as kernel\n"
    return Need(getattr(loaded, attribute), source, objects)


#: A lane kernel's compile beside its per-object twin's (`Need.cost`), roughly
#: (docs/benchmarks.md, "Compile ahead")
LANE_COST = 4.0


def every(need):
    """The kernels that calls of ``need``'s kernel may run, whatever their objects, as
    needs without ``objects``: under ``HAPSIRA_LANES=auto`` a lane kernel and its
    per-object twin (auto runs the lane kernel for at least
    `hapsira_core.targets._host.AUTO_LANES_MIN_OBJECTS` objects once it is compiled, the
    per-object one for fewer); otherwise the one kernel."""
    kernel = need.kernel
    if not hasattr(kernel, "scalar"):
        return [dataclasses.replace(need, objects=None)]
    # a lane kernel compiles for several times as long as its per-object twin
    whole = dataclasses.replace(need, objects=None, cost=LANE_COST * need.cost)
    if settings.LANES != "auto":
        return [whole]
    source = None if need.source is None else need.source + "kernel = kernel.scalar\n"
    return [whole, Need(kernel.scalar, source, None, need.cost)]


def workers():
    """The cores this process may run on (at most so many workers at once)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") \
        else (os.cpu_count() or 1)


def _chains(needs):
    """``needs`` in chains, each compiled one after another by one worker: the kernels
    that share a generic loop not compiled yet (`hapsira_core.targets._join`: the
    per-object or lane loop of one method, state size and form, joined to each kernel's
    functions), so that one worker compiles it and the others of its chain join to it,
    instead of each worker compiling it again; every other kernel alone."""
    chains = {}
    for need in needs:
        key = getattr(need.runs(), "generic_key", None)
        if key is not None:  # (a joined kernel: the host targets)
            from ..targets import _join
            if _join.generic_ready(key):
                key = None
        if key is None:
            key = id(need)
        chains.setdefault(key, []).append(need)
    return list(chains.values())


def prepare(needs):
    """Compile the kernels of ``needs`` (`Need`) that are not in the disk cache, side by
    side in worker processes (see the module's notes for what stays in this process).
    Returns the number compiled by workers."""
    from ..targets import active

    if not settings.CACHE or getattr(active, "SIMULATOR", False) or not cache.usable():
        return 0  # (the CUDA simulator compiles nothing)
    left = [need for need in missing(needs) if need.source is not None
            and need.runs().recipe is not None]
    cores = workers()
    chains = _chains(left)
    if len(chains) < 2 or cores < 2:
        return 0
    at_once = min(cores, len(chains))
    # the longest first: the wait is the longest
    chains.sort(key=lambda chain: -sum(need.cost for need in chain))
    described = [need.runs().description for need in left]
    what = (f"{len(left)} kernels side by side on {at_once} cores: "
            + "; ".join(d if described.count(d) == 1 else f"{d} ({described.count(d)} kernels)"
                        for d in dict.fromkeys(described)))
    with progress.compiling(what):
        failures = _run(chains, at_once)
    for chain, message in failures:
        for need in chain:
            if not need.on_disk():
                progress.LOG.warning("hapsira: compiling %s in a worker process failed (%s); "
                                     "it is compiled in this process at its first use",
                                     need.runs().description, message)
    return sum(need.on_disk() for need in left)


def _run(chains, at_once):
    """Run one worker per chain of needs (`_chains`), ``at_once`` at a time;
    ``[(chain, message)]`` of those that failed."""
    from concurrent.futures import ThreadPoolExecutor

    from ..targets import active

    env = dict(os.environ, HAPSIRA_TARGET=active.NAME)

    def one(chain):
        done = subprocess.run(_COMMAND, input=_job(chain), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env)
        if done.returncode == 0:
            return None
        return chain, _last_line(done.stderr, done.returncode)

    with ThreadPoolExecutor(at_once) as pool:
        return [failed for failed in pool.map(one, chains) if failed is not None]


