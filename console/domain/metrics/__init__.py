"""An engine's Prometheus `/metrics`: the exposition text parsed, and the figures read from it.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.domain.metrics.engine_metrics import EngineFigures, EngineScrape, MetricsHistory
from console.domain.metrics.exposition import MetricsTextError, parse_metrics

__all__ = [
    "EngineFigures",
    "EngineScrape",
    "MetricsHistory",
    "MetricsTextError",
    "parse_metrics",
]
