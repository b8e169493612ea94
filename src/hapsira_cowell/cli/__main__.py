"""``python -m hapsira_cowell.cli``: the same program as ``hapsira-cowell``."""

import sys

from .app import main

sys.exit(main())
