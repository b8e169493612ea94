"""``python -m benchmarks <name|headline> [--quick] [--out DIR]``, ``python -m benchmarks --list``."""

import sys

from .front import main

sys.exit(main())
