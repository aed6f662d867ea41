"""`python -m tui.sim.serve [flags]`: the same as `python -m tui.sim serve [flags]`."""

import sys

from .main import main

sys.exit(main())
