"""Is the engine still serving? Its progress judged from the signals that move per step.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.domain.progress.journal import BatchLine, parse_batch_line
from console.domain.progress.model import (
    CANARY_EVERY_S,
    CANARY_TIMEOUT_S,
    IDLE,
    SERVING,
    STALL_AFTER_S,
    STALLED,
    UNKNOWN,
    Pending,
    ProgressMemory,
    ServingVerdict,
    judge,
)
from console.domain.progress.ranks import GpuReading, rank_words
from console.domain.progress.reading import ProgressReading, reading_from_scrape

__all__ = [
    "CANARY_EVERY_S",
    "CANARY_TIMEOUT_S",
    "IDLE",
    "SERVING",
    "STALLED",
    "STALL_AFTER_S",
    "UNKNOWN",
    "BatchLine",
    "GpuReading",
    "Pending",
    "ProgressMemory",
    "ProgressReading",
    "ServingVerdict",
    "judge",
    "parse_batch_line",
    "rank_words",
    "reading_from_scrape",
]
