"""The files the console writes for single-unit services: an environment file or a drop-in.

The unit passes `$SERVE_CONSOLE_LAYOUT_ARGS` (or the service's `env_var`) to the engine unquoted, so
systemd splits it on whitespace into separate flags. `SERVE_CONSOLE_LAYOUT` names the layout for people
reading the host.
"""

from __future__ import annotations

from console.config import DROP_IN, ENV_FILE, LayoutConfig, ServiceConfig
from console.domain.layout import engine_args

#: The drop-in's file name under `/etc/systemd/system/UNIT.d/`.
DROP_IN_NAME = "50-serve-console-layout.conf"


def drop_in_path(unit: str) -> str:
    return f"/etc/systemd/system/{unit}.d/{DROP_IN_NAME}"


def layout_file(service: ServiceConfig, layout: LayoutConfig) -> tuple[str, str] | None:
    """(path, content) to write before starting `layout`, or None for multi-unit mappings."""
    flags = " ".join(engine_args(layout.layout, service.engine))
    if service.mapping == ENV_FILE:
        assert service.env_file is not None, "validated by the loader"
        content = (
            f"# Written by serve-console: layout {layout.name}\n"
            f'SERVE_CONSOLE_LAYOUT="{layout.name}"\n'
            f"{service.env_var}={flags}\n"
        )
        return service.env_file, content
    if service.mapping == DROP_IN:
        assert service.unit is not None, "validated by the loader"
        content = (
            f"# Written by serve-console: layout {layout.name}\n"
            "[Service]\n"
            f'Environment="SERVE_CONSOLE_LAYOUT={layout.name}" "{service.env_var}={flags}"\n'
        )
        return drop_in_path(service.unit), content
    return None
