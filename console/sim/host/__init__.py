"""The simulated host: process manager, unit state and journal files, and the Host it builds.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.sim.host.build import build_sim_host
from console.sim.host.units import TIME_SCALE_ENV, time_scale

__all__ = [
    "build_sim_host",
    "time_scale",
    "TIME_SCALE_ENV",
]
