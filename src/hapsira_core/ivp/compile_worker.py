"""Worker processes that compile kernels into the disk cache (`hapsira_core.ivp.prepare`
runs them side by side and waits; `in_background` starts one and returns at once).

A worker is a new Python process that rebuilds each kernel from importable names
(`Need.source`) and compiles it into ``HAPSIRA_CACHE_DIR``; the calling process then
loads it from the cache at its first use.

Under ``HAPSIRA_LANES=auto`` a call whose lane kernel is not compiled yet runs the
per-object kernel (`hapsira_core.targets._host._Lanes`) and, with
``HAPSIRA_LANES_BACKGROUND`` on, has its lane kernel compiled by a background worker
(`Background`, made by `hapsira_core.ivp.build.kernel`), so that later calls, in this
process or later ones, run lanes without a first call ever waiting for that compile.
"""

import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
import threading

from .. import progress, settings
from ..kernels import cache

__all__ = ["Need", "kernel_source", "missing", "in_background", "running_in_background",
           "Background", "BACKGROUND_NICE"]


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


def kernel_source(method, n, fun, event_functions, event_states=False, jac=None, records=False):
    """`Need.source` of the kernel ``hapsira_core.ivp.build.kernel(method, n, fun,
    event_functions, event_states, jac=jac, records=records)`` (its functions checked
    already, as `solver` checks them): None where one of them cannot be imported."""
    imports = {}
    parts = [cache.expression(x, imports) for x in (fun, tuple(event_functions), jac)]
    expression = None if None in parts else (
        f"_build.kernel({method!r}, {n}, {parts[0]}, {parts[1]}, {bool(event_states)!r}, "
        f"jac={parts[2]}, records={bool(records)!r})")
    found = _importable_source(imports, expression)
    return None if found is None else "from hapsira_core.ivp import build as _build\n" + found


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


def _job(chain, nice=0):
    """What a worker compiles (``chain``) and under which settings, pickled; ``nice``:
    added to the worker's niceness (a background worker yields the cores to calls)."""
    import numba

    from ..targets import active
    return pickle.dumps({
        "nice": nice,
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


#: A worker: reads its job (`_job`) on stdin; the caller's sys.path first, so that it
#: imports the same hapsira_core and the same user modules
_COMMAND = [sys.executable, "-c",
            "import pickle, sys; job = pickle.load(sys.stdin.buffer); sys.path[:] = "
            "job['path']; from hapsira_core.ivp.compile_worker import _worker; _worker(job)"]


def _last_line(stderr, returncode):
    """A failed worker's error: the last line of its ``stderr`` (bytes)."""
    lines = [line for line in stderr.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {returncode}"


#: How much nicer than its caller a background worker runs (`in_background`)
BACKGROUND_NICE = 10

_BACKGROUND_LOCK = threading.Lock()
#: The cache names of the kernels this process has compiled in the background, started
#: or done: each once per process, whatever the outcome
_BACKGROUND_STARTED = set()
#: The background worker running now, if any: ``(process, cache names)``; one at a time
_background = None


def in_background(needs, why="later calls run it"):
    """Start compiling the kernels of ``needs`` (`Need`) that are not in the disk cache
    in one worker process, one after another, and return at once: the number started (0:
    none; see below). The worker fills the disk cache; this process's calls find its
    kernels there once it has ended (`running_in_background` says when not yet).

    Only with a usable disk cache and for kernels that a new process can import
    (`Need.source`), each kernel once per process; never two workers at once (a call
    while one runs starts nothing: a later call may). The user is told once per worker
    (`..progress.compiling_in_background`, ``why``); a worker that fails is logged on
    the ``hapsira`` logger and changes nothing else. The worker runs
    `BACKGROUND_NICE` nicer than this process and is never waited for: it ends when its
    compile does, this process's exit included."""
    global _background
    from ..targets import active

    if not settings.CACHE or getattr(active, "SIMULATOR", False) or not cache.usable():
        return 0
    with _BACKGROUND_LOCK:
        if _background is not None and _background[0].poll() is None:
            return 0
        left = [need for need in missing(needs) if need.source is not None
                and need.runs().recipe is not None
                and need.runs().cache_name not in _BACKGROUND_STARTED]
        if not left:
            return 0
        names = tuple(need.runs().cache_name for need in left)
        _BACKGROUND_STARTED.update(names)
        stderr = tempfile.TemporaryFile()
        try:
            process = subprocess.Popen(
                _COMMAND, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr,
                env=dict(os.environ, HAPSIRA_TARGET=active.NAME), start_new_session=True)
            process.stdin.write(_job(left, nice=BACKGROUND_NICE))
            process.stdin.close()
        except OSError as error:  # (no process could be started: nothing to wait for)
            stderr.close()
            progress.LOG.warning("hapsira: a background compile could not start (%s)", error)
            return 0
        _background = (process, names)
    what = "; ".join(dict.fromkeys(need.runs().description for need in left))
    progress.compiling_in_background(what, why)
    threading.Thread(target=_watch, args=(process, stderr, what), daemon=True,
                     name="hapsira background compile").start()
    return len(left)


def _watch(process, stderr, what):
    """Wait for a background worker (a daemon thread: never keeps this process alive) and
    log its failure."""
    returncode = process.wait()
    if returncode != 0:
        stderr.seek(0)
        progress.LOG.warning("hapsira: compiling %s in a background worker process failed "
                             "(%s); calls run the per-object kernel", what,
                             _last_line(stderr.read(), returncode))
    stderr.close()


def running_in_background(kernel):
    """Whether a background worker of this process is compiling ``kernel`` now."""
    found = _background
    return (found is not None and kernel.cache_name in found[1]
            and found[0].poll() is None)


class Background:
    """A lane kernel's compile in the background (`hapsira_core.targets._host._Lanes`):
    ``source``, its `Need.source`. `start` runs `in_background` for it; `running` says
    whether that worker is still at it (the kernel then runs per object: its cache
    entries are not all written yet)."""

    def __init__(self, kernel, source):
        self.need = Need(kernel, source)

    def start(self, objects):
        """Compile the lane kernel in the background where ``HAPSIRA_LANES_BACKGROUND``
        is on (a call of ``objects`` objects ran per object for want of it)."""
        if not settings.LANES_BACKGROUND:
            return 0
        return in_background([self.need], f"this call of {objects:,} objects ran the "
                             "per-object kernel; later calls run the lane kernel once it "
                             "is ready (the same numbers, faster)")

    def running(self):
        return running_in_background(self.need.kernel)


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
    if job.get("nice"):
        os.nice(job["nice"])
    for source, objects in job["kernels"]:
        namespace = {}
        exec(compile(source, "<hapsira compile worker>", "exec"), namespace)
        Need(namespace["kernel"], objects=objects).runs().compile()
