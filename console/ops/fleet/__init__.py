"""The fleet overview: one row per host, from Prometheus or over each host's own connection.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.ops.fleet.over_ssh import ssh_row
from console.ops.fleet.rows import PrometheusFleet, fleet_summary

__all__ = [
    "fleet_summary",
    "PrometheusFleet",
    "ssh_row",
]
