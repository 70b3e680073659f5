"""``python -m skillsynth.cli``."""

import sys

from . import main

sys.exit(main())
