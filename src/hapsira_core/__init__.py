"""hapsira-core: one source of numerical code for the cpu, parallel and cuda targets.

The active target is chosen by ``HAPSIRA_TARGET`` when this package is first
imported; see `hapsira_core.settings` and `hapsira_core.targets`.
"""

__version__ = "0.1.0"

from . import settings  # noqa: F401  (validates the environment at import)
from . import targets  # noqa: F401  (loads the active target: cuda checks its GPU)
