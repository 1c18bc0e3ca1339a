"""`python -m console.sim.sglang`: the simulated SGLang server (see server.py)."""

import sys

from console.sim.sglang.server import main

sys.exit(main())
