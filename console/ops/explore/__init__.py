"""Probe and explore: the serving benchmark, the sweep over layouts, and the stored results.

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.ops.explore.probe import ProbeResult, probe_service
from console.ops.explore.probe_client import CHAT, COMPLETIONS
from console.ops.explore.probe_load import ProbeOptions, build_prompts, parse_levels
from console.ops.explore.report import ExploreOptions, LayoutDone
from console.ops.explore.results_report import service_results
from console.ops.explore.results_store import ResultsStore
from console.ops.explore.results_table import (
    LevelFigures,
    Pick,
    best_layout,
    levels_of,
    pareto_frontier,
    parse_pick,
)
from console.ops.explore.sweep import Explore

__all__ = [
    "best_layout",
    "build_prompts",
    "CHAT",
    "COMPLETIONS",
    "Explore",
    "ExploreOptions",
    "LayoutDone",
    "LevelFigures",
    "levels_of",
    "pareto_frontier",
    "parse_levels",
    "parse_pick",
    "Pick",
    "probe_service",
    "ProbeOptions",
    "ProbeResult",
    "ResultsStore",
    "service_results",
]
