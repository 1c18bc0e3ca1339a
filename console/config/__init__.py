"""hosts.toml as frozen, typed values: the model, its loader and the per-service parser.

Everything above this package imports from here; the modules inside import each other directly.
"""

from console.config.loader import CONFIG_NAME, demo_config_path, find_config, load_config, parse_config
from console.config.model import (
    DROP_IN,
    ENV_FILE,
    MAPPINGS,
    TEMPLATE,
    UNIT_PER_LAYOUT,
    ClusterConfig,
    ConsoleConfig,
    FleetConfig,
    HostConfig,
    LayoutConfig,
    ServiceConfig,
    SimConfig,
    UiConfig,
)
from console.config.nodes import with_nodes
from console.config.watch import WatchConfig

__all__ = [
    "with_nodes",
    "CONFIG_NAME",
    "DROP_IN",
    "ENV_FILE",
    "MAPPINGS",
    "TEMPLATE",
    "UNIT_PER_LAYOUT",
    "ClusterConfig",
    "ConsoleConfig",
    "FleetConfig",
    "HostConfig",
    "LayoutConfig",
    "ServiceConfig",
    "SimConfig",
    "UiConfig",
    "WatchConfig",
    "demo_config_path",
    "find_config",
    "load_config",
    "parse_config",
]
