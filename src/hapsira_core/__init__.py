"""hapsira-core: one source of numerical code for the cpu, parallel and cuda targets.

The active target is chosen by ``HAPSIRA_TARGET`` when this package is first
imported; see `hapsira_core.settings`.
"""

from . import settings  # noqa: F401  (validates the environment at import)

__version__ = "0.1.0"
