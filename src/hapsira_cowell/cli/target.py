"""The command line's process: the compilation target is set before ``hapsira_core``
is imported, or the command runs again in a child process on the requested target.

The target is fixed at import (compiled code depends on it), so nothing here
imports ``hapsira_core``.
"""

import argparse
import os
import sys

_RERUN = "HAPSIRA_CLI_RERUN"
_CHILD = """\
import sys
try:
    import hapsira_core
except (ValueError, RuntimeError) as error:
    print(f"{prog}: error: {{error}}", file=sys.stderr)
    sys.exit(2)
from hapsira_cowell.cli import main
sys.exit(main(sys.argv[1:]))
"""


def requested_target(argv):
    """The ``--target`` of the command line, or None (hapsira_core checks the name)."""
    class Quiet(argparse.ArgumentParser):
        def error(self, message):
            raise ValueError(message)
    pre = Quiet(add_help=False)
    pre.add_argument("--target")
    try:
        target = pre.parse_known_args(argv)[0].target
    except ValueError:
        return None
    return target


def select_target(target, argv, prog):
    """Set HAPSIRA_TARGET before hapsira_core is imported; return an exit status if this
    run went to a fresh process (the target was already fixed here), else None."""
    if target is None:
        return None
    settings = sys.modules.get("hapsira_core.settings")
    if settings is None:
        os.environ["HAPSIRA_TARGET"] = target
        return None
    if settings.TARGET == target:  # already on it
        return None
    if os.environ.get(_RERUN) == target:
        from .inputs import UsageError
        raise UsageError(f"--target {target}: this process is already set up "
                         f"for {settings.TARGET} and running again did not help")
    # A child process rather than exec: main() may be called from a user's own
    # Python process, which must survive it.
    import subprocess
    env = dict(os.environ, HAPSIRA_TARGET=target, **{_RERUN: target})
    command = [sys.executable, "-c", _CHILD.format(prog=prog), *argv]
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        return subprocess.call(command, env=env)
    except KeyboardInterrupt:
        return 130
