"""`python -m console.sim.vllm`: the simulated vLLM server (see server.py)."""

import sys

from console.sim.vllm.server import main

sys.exit(main())
