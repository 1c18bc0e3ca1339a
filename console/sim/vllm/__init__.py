"""The simulated vLLM server (`python -m console.sim.vllm serve MODEL`).

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.sim.vllm.server import main

__all__ = [
    "main",
]
