"""The simulated SGLang server (`python -m console.sim.sglang`).

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.sim.sglang.server import main

__all__ = [
    "main",
]
