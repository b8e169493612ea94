"""The documented path of the events (docs/api.md): `hapsira_cowell.models.events`."""

from .models.events import *  # noqa: F401,F403
from .models.events import __all__  # noqa: F401
