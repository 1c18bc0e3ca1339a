"""The files the console writes for single-unit services: an environment file or a drop-in.

The unit passes `$SERVE_CONSOLE_LAYOUT_ARGS` (or the service's `env_var`) to the engine unquoted, so
systemd splits it on whitespace into separate flags. `SERVE_CONSOLE_LAYOUT` names the layout for people
reading the host.

Every value goes through `systemd_quoted`, one function for both files (systemd.syntax(7),
systemd.exec(5)): a double-quoted string in which `\\` and `"` are escaped; in a drop-in, `%` is a
specifier and is written `%%`; in an env file, `$` and a backtick are escaped as the shell would. A
value with a control character is refused: no quoting makes a line break safe.

An env file is edited, not replaced: only the console's own keys change, in place; other lines (an
`HF_TOKEN`, comments) stay, and the writer keeps the file's mode and owner.

A service over several hosts also tells each node its place: `SERVE_CONSOLE_NODE_ARGS` (`--nnodes 2
--node-rank 1 --dist-init-addr HEAD:PORT`, or vLLM's) and the interface NCCL and Gloo must use, in the
same env file or drop-in, or, for units of their own, in the service's node file (`node_env_file`).
"""

from __future__ import annotations

import re

from console.config import DROP_IN, ENV_FILE, LayoutConfig, ServiceConfig
from console.domain.layout import engine_args
from console.domain.nodes import NodePlace, node_args

#: The drop-in's file name under `/etc/systemd/system/UNIT.d/`.
DROP_IN_NAME = "50-serve-console-layout.conf"
#: The variable that names the layout, beside the service's `env_var`.
LAYOUT_VAR = "SERVE_CONSOLE_LAYOUT"
#: The variable that carries a node's own flags (its rank, the head's address and port).
NODE_ARGS_VAR = "SERVE_CONSOLE_NODE_ARGS"
DROP_IN_FILE = "drop-in"
ENV_FILE_KIND = "env-file"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ESCAPES = {
    DROP_IN_FILE: {"\\": "\\\\", '"': '\\"', "%": "%%"},
    ENV_FILE_KIND: {"\\": "\\\\", '"': '\\"', "$": "\\$", "`": "\\`"},
}
# `KEY=` or `export KEY=` at the start of an env-file line.
_ASSIGNMENT = re.compile(r"\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=")


def systemd_quoted(value: str, kind: str) -> str:
    """`value` as one double-quoted systemd string for a drop-in or an env file.

    Args:
        value: the text to carry exactly.
        kind: DROP_IN_FILE (Environment= in a unit file: `%` specifiers) or ENV_FILE_KIND
            (an EnvironmentFile=: shell-like double quotes).

    Raises:
        ValueError: the value holds a control character (a line break would end the assignment).
    """
    if _CONTROL.search(value):
        raise ValueError(f"refusing to write a control character into a {kind}: {value!r}")
    table = _ESCAPES[kind]
    return '"' + "".join(table.get(ch, ch) for ch in value) + '"'


def drop_in_path(unit: str) -> str:
    return f"/etc/systemd/system/{unit}.d/{DROP_IN_NAME}"


def layout_values(service: ServiceConfig, layout: LayoutConfig) -> dict[str, str]:
    """The console's own variables for `layout`: its name and its engine flags."""
    return {LAYOUT_VAR: layout.name, service.env_var: " ".join(engine_args(layout.layout, service.engine))}


def node_values(service: ServiceConfig, node: NodePlace) -> dict[str, str]:
    """A node's own variables: its flags (none for a layout on one node) and the cluster's interface."""
    values = {NODE_ARGS_VAR: " ".join(node_args(service.engine, node))}
    nic = service.cluster.nic if service.cluster is not None else None
    if nic and node.nnodes > 1:
        values |= {"NCCL_SOCKET_IFNAME": nic, "GLOO_SOCKET_IFNAME": nic}
    return values


def drop_in_content(service: ServiceConfig, layout: LayoutConfig, node: NodePlace | None = None) -> str:
    """The whole drop-in (the console owns the file)."""
    values = layout_values(service, layout) | (node_values(service, node) if node is not None else {})
    assignments = " ".join(systemd_quoted(f"{key}={value}", DROP_IN_FILE) for key, value in values.items())
    return f"# Written by serve-console: layout {layout.name}\n[Service]\nEnvironment={assignments}\n"


def edit_env_file(existing: str | None, values: dict[str, str]) -> str:
    """The env file with the console's keys set to `values`, in place; every other line kept.

    A key already present is replaced where it stands (later repeats of it are dropped, since systemd
    would let them win); a missing key is appended. Continuation lines (a trailing backslash) belong
    to the assignment they continue.
    """
    out: list[str] = []
    done: set[str] = set()
    lines = (existing or "").split("\n")  # systemd ends lines at \n only
    if lines[-1] == "":
        lines.pop()
    i = 0
    while i < len(lines):
        start = i
        while lines[i].endswith("\\") and i + 1 < len(lines):  # one logical line
            i += 1
        i += 1
        match = _ASSIGNMENT.match(lines[start])
        key = match.group(1) if match and not lines[start].lstrip().startswith(("#", ";")) else None
        if key in values:
            if key not in done:
                out.append(f"{key}={systemd_quoted(values[key], ENV_FILE_KIND)}")
                done.add(key)
            continue
        out.extend(lines[start:i])
    out.extend(f"{key}={systemd_quoted(value, ENV_FILE_KIND)}" for key, value in values.items() if key not in done)
    return "\n".join(out) + "\n"


def layout_file(
    service: ServiceConfig, layout: LayoutConfig, existing: str | None = None, node: NodePlace | None = None
) -> tuple[str, str] | None:
    """(path, content) to write before starting `layout` (on `node`, for a service over several hosts),
    or None where the unit needs no file.

    Args:
        service: the service.
        layout: the layout to start.
        existing: the file's current text (None when it does not exist); ignored for drop-ins.
        node: this node's place, for a service with nodes: its env file or drop-in carries it too, and a
            unit-per-layout or template unit gets the service's node file.
    """
    extra = node_values(service, node) if node is not None else {}
    if service.mapping == ENV_FILE:
        assert service.env_file is not None, "validated by the loader"
        return service.env_file, edit_env_file(existing, layout_values(service, layout) | extra)
    if service.mapping == DROP_IN:
        assert service.unit is not None, "validated by the loader"
        return drop_in_path(service.unit), drop_in_content(service, layout, node)
    if node is not None and service.cluster is not None:
        return service.cluster.node_env_file, edit_env_file(existing, extra)
    return None


def file_to_read(service: ServiceConfig) -> str | None:
    """The file a start edits in place (its other lines kept), which is read first: the env file, or a
    service's node file."""
    if service.mapping == ENV_FILE:
        return service.env_file
    if service.mapping != DROP_IN and service.cluster is not None:
        return service.cluster.node_env_file
    return None
