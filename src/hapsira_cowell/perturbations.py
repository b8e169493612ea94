"""The documented path of the perturbations (docs/api.md): `hapsira_cowell.models.perturbations`."""

from .models.perturbations import *  # noqa: F401,F403
from .models.perturbations import __all__  # noqa: F401
