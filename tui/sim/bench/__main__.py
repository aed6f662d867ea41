"""`python -m tui.sim.bench [flags]`: the same as `python -m tui.sim bench serve [flags]`."""

import sys

from .main import main

sys.exit(main())
