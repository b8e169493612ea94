"""Progress bars for long runs: ``solve_ivp(..., progress=True)``, ``cowell(...,
progress=True)`` and the ``hapsira-cowell`` command line share `bar`; a word when
a compile takes long (`compiling`).

tqdm is imported only when a bar is asked for (``pip install 'hapsira-cowell[progress]'``;
the ``cli`` extra has it too).
"""

import contextlib
import logging
import sys
import threading

__all__ = ["bar", "check", "compiling", "compiling_in_background", "LOG", "NOTICE_AFTER"]

#: The logger of the compile notices (`compiling`): shown on stderr by default, as
#: Python shows any warning-level record where no logging is configured; silenced with
#: ``logging.getLogger("hapsira").setLevel(logging.ERROR)``.
LOG = logging.getLogger("hapsira")
#: Seconds a compile runs before the user is told of it.
NOTICE_AFTER = 1.0


@contextlib.contextmanager
def compiling(what):
    """Tell the user once, on the ``hapsira`` logger, when the compile of ``what`` inside
    this block runs past `NOTICE_AFTER` seconds (a first call; never a silent minute);
    nothing where it ends sooner (a kernel loaded from the disk cache)."""
    from . import settings

    where = (f"cached in {settings.CACHE_DIR} for later processes" if settings.CACHE
             else "HAPSIRA_CACHE=0: compiled again in every process")
    timer = threading.Timer(NOTICE_AFTER, LOG.warning,
                            ("hapsira: compiling %s (a first call; %s)...", what, where))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def compiling_in_background(what, why):
    """Tell the user, on the ``hapsira`` logger, that ``what`` compiles in a background
    worker process (``why``: what runs meanwhile and after); once per compile started."""
    from . import settings

    LOG.warning("hapsira: compiling %s in the background (a worker process; cached in %s "
                "for later processes): %s", what, settings.CACHE_DIR, why)


def check(progress):
    """``progress`` if it is a bool, else `ValueError` naming it (as every bad argument)."""
    if type(progress).__name__ not in ("bool", "bool_"):  # numpy's bool too, not 1
        raise ValueError(f"progress: expected True or False, got {progress!r}")
    return bool(progress)


def bar(total, desc, unit="obj", required=True, disable=False):
    """A tqdm bar of ``total`` ``unit`` on stderr.

    ``required``: without tqdm, raise an `ImportError` that says how to install it
    (the library's ``progress=True``); otherwise return None (the command line runs
    on without a bar). ``disable``: tqdm's (None: off when stderr is not a terminal).
    """
    try:
        from tqdm import tqdm
    except ImportError:
        if not required:
            return None
        raise ImportError("progress=True needs tqdm, which is not installed "
                          "(pip install 'hapsira-cowell[progress]', or pip install tqdm)") \
            from None
    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, dynamic_ncols=True,
                disable=disable)
