"""Progress bars for long runs: ``solve_ivp(..., progress=True)``, ``cowell(...,
progress=True)`` and the ``hapsira-cowell`` command line share `bar`.

tqdm is imported only when a bar is asked for (``pip install 'hapsira-cowell[progress]'``;
the ``cli`` extra has it too).
"""

import sys

__all__ = ["bar", "check"]


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
