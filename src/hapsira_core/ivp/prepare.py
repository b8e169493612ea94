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
"""

import dataclasses
import os
import pickle
import subprocess
import sys

from .. import progress, settings
from ..kernels import cache

__all__ = ["LANE_COST", "Need", "solver", "named", "every", "missing", "prepare", "workers"]


@dataclasses.dataclass
class Need:
    """One kernel a call will run: ``kernel`` (this process's object, not compiled
    yet), ``source`` (Python that binds ``kernel`` to the same kernel in a new process,
    by import; None: not importable, compiled in this process) and ``objects`` (the
    objects of the call where known: under ``HAPSIRA_LANES=auto`` a lane kernel runs
    its per-object kernel for few objects, which is then the one compiled)."""

    kernel: object
    source: object = None
    objects: object = None
    #: how long its compile takes, roughly, beside the others': the longest start first
    cost: float = 1.0

    def runs(self, kernel=None):
        """The kernel the call runs: a lane kernel's per-object kernel where it runs that
        (without ``objects``: the kernel itself)."""
        kernel = self.kernel if kernel is None else kernel
        if self.objects is not None and hasattr(kernel, "runs_lanes") \
                and not kernel.runs_lanes(self.objects):
            return kernel.scalar
        return kernel

    def on_disk(self):
        """Whether the kernel the call runs is compiled here or in the disk cache; without
        ``objects``, a lane kernel itself (not its per-object twin, which ``auto`` would
        run in its place)."""
        kernel = self.runs()
        if self.objects is None and hasattr(kernel, "lanes_on_disk"):
            return kernel.lanes_on_disk()
        return kernel.on_disk()


def _importable_source(imports, expression):
    """``imports`` and ``expression`` as a worker's source, or None where something
    comes from ``__main__`` (a script's functions are not the worker's)."""
    if expression is None or any(module == "__main__" for module, _ in imports.values()):
        return None
    return f"{cache.import_lines(imports)}\nkernel = {expression}\n"


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
    imports = {}
    parts = [cache.expression(x, imports) for x in (fun, device)]
    expression = None if None in parts else (
        f"_build.kernel({method!r}, {n}, {parts[0]}, {parts[1]}, {bool(event_states)!r})")
    source = _importable_source(imports, expression)
    if source is not None:
        source = "from hapsira_core.ivp import build as _build\n" + source
    # a solver's loop is the longest compile there is, and grows with the state
    return Need(made, source, objects, cost=10.0 + n)


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


def missing(needs):
    """The needs whose kernel is neither compiled here nor in the disk cache (`Need.on_disk`),
    each kernel once."""
    found, seen = [], set()
    for need in needs:
        kernel = need.runs()
        if id(kernel) in seen or need.on_disk():
            continue
        seen.add(id(kernel))
        found.append(need)
    return found


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


def _job(chain):
    import numba

    from ..targets import active
    return pickle.dumps({
        "path": list(sys.path),
        "settings": {name: value for name, value in vars(settings).items()
                     if name.isupper() and isinstance(value, (bool, int, float, str, tuple,
                                                              type(None)))},
        "numba": {name: getattr(numba.config, name) for name in
                  ("BOUNDSCHECK", "OPT", "DEBUGINFO_DEFAULT", "FASTMATH")
                  if hasattr(numba.config, name)},
        "target": active.NAME,
        "kernels": [(need.source, need.objects) for need in chain],
    })


def _run(chains, at_once):
    """Run one worker per chain of needs (`_chains`), ``at_once`` at a time;
    ``[(chain, message)]`` of those that failed."""
    from concurrent.futures import ThreadPoolExecutor

    from ..targets import active

    env = dict(os.environ, HAPSIRA_TARGET=active.NAME)
    # the caller's sys.path first: the same hapsira_core and the same user modules
    command = [sys.executable, "-c",
               "import pickle, sys; job = pickle.load(sys.stdin.buffer); sys.path[:] = "
               "job['path']; from hapsira_core.ivp.prepare import _worker; _worker(job)"]

    def one(chain):
        done = subprocess.run(command, input=_job(chain), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, env=env)
        if done.returncode == 0:
            return None
        lines = [line for line in done.stderr.decode(errors="replace").splitlines()
                 if line.strip()]
        return chain, lines[-1] if lines else f"exit status {done.returncode}"

    with ThreadPoolExecutor(at_once) as pool:
        return [failed for failed in pool.map(one, chains) if failed is not None]


def _worker(job):
    """A worker process: compile the kernels of ``job`` (`_job`) into the cache, one after
    another; the first that fails ends it (its error is the worker's last line)."""
    import logging

    for name, value in job["settings"].items():
        setattr(settings, name, value)
    import numba
    for name, value in job["numba"].items():
        setattr(numba.config, name, value)
    from ..targets import active
    if active.NAME != job["target"]:
        raise RuntimeError(f"the worker's target is {active.NAME}, not {job['target']}")
    logging.getLogger("hapsira").setLevel(logging.ERROR)  # the caller tells the user
    for source, objects in job["kernels"]:
        namespace = {}
        exec(compile(source, "<hapsira compile worker>", "exec"), namespace)
        Need(namespace["kernel"], objects=objects).runs().compile()
