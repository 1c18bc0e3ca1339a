"""The `[hosts.NAME.services.SVC]` tables of hosts.toml: engine, URL, unit mapping and layouts."""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

from console.config.fields import Table, url_problem, value_repr
from console.config.model import (
    DROP_IN,
    ENV_FILE,
    MAPPINGS,
    TEMPLATE,
    UNIT_PER_LAYOUT,
    LayoutConfig,
    ServiceConfig,
)
from console.config.nodes import NODE_KEYS, parse_cluster
from console.domain.fit import ConfigTooLarge, read_model_config_bytes
from console.domain.layout import Layout, LayoutError, check_layout, parse_layout
from console.domain.layout_parse import MAX_PARALLEL_SIZE
from console.domain.urls import is_loopback_url
from console.domain.values import Engine

SERVICE_KEYS = (
    "engine",
    "url",
    "mapping",
    "unit",
    "template",
    "env_file",
    "env_var",
    "model_config",
    "mem_fraction",
    "health_via",
    "sudo",
    "first_token_check",
    "stall_after_s",
    "canary",
    "canary_every_s",
    "canary_timeout_s",
    "layouts",
    *NODE_KEYS,
)
SIZE_KEYS = ("tp", "ep", "pp", "dp")
PARALLEL_KEYS = (*SIZE_KEYS, "dp_attention")
LAYOUT_KEYS = ("name", *PARALLEL_KEYS, "args", "unit", "nodes")
HEALTH_VIA = ("direct", "ssh")

# systemd's unit-name grammar (systemd.unit(5)), restricted to services. A leading "-" is refused
# too, so that no unit name can ever read as an option on a systemctl command line.
_UNIT_CHARS = r"[A-Za-z0-9:_.\\-]"
UNIT_NAME = re.compile(rf"(?!-){_UNIT_CHARS}+(?:@{_UNIT_CHARS}+)?\.service")
TEMPLATE_NAME = re.compile(rf"(?!-){_UNIT_CHARS}+@\.service")
UNIT_NAME_MAX = 255
LAYOUT_NAME_MAX = 80
# Names end up on the operator's terminal: no C0/C1 controls (escape sequences), no bidi controls, no
# line or paragraph separators in them.
DISPLAY_TEXT = re.compile(r"[^\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]+")
# A layout name is written into env files and drop-ins and typed on command lines: a strict grammar,
# with no quote, backslash, `%` (a systemd specifier) or `$` (a variable) that could change its meaning.
LAYOUT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9 _.,:+()/-]*")
LAYOUT_NAME_GRAMMAR = "letters, digits, spaces and _ . , : + ( ) / -, starting with a letter or digit"
ENV_VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# An absolute POSIX path on the GPU host, one line, no NUL.
ABSOLUTE_PATH = re.compile(r"/[^\x00-\x1f\x7f]*")
#: Top-level directories an env file may never be in (kernel interfaces and devices).
FORBIDDEN_ROOTS = ("proc", "sys", "dev")

#: Which service-level keys each mapping needs (and, by omission, refuses).
_MAPPING_KEYS = {
    UNIT_PER_LAYOUT: (),
    TEMPLATE: ("template",),
    ENV_FILE: ("unit", "env_file"),
    DROP_IN: ("unit",),
}


def unit_name(table: Table, key: str, *, template: bool = False) -> str | None:
    """A validated systemd service unit name (or template name) from `table[key]`."""
    grammar = TEMPLATE_NAME if template else UNIT_NAME
    shape = "NAME@.service" if template else "NAME.service or NAME@INSTANCE.service"
    value = table.text(key, pattern=grammar, describe=f"a systemd unit name ({shape}, characters A-Za-z0-9:_.\\-)")
    if value is not None and len(value) > UNIT_NAME_MAX:
        raise table.error(key, f"unit name longer than {UNIT_NAME_MAX} characters")
    return value


def base_url(table: Table, key: str) -> str:
    """An http(s) base URL with a host and a valid port."""
    value = table.text(key, required=True)
    assert value is not None
    if problem := url_problem(value):
        raise table.error(key, f"{problem}: {value_repr(value)}")
    return value.rstrip("/")


def env_file_path(table: Table, key: str) -> str | None:
    """The env file's path on the host, checked at load so that a switch never stops a unit and then
    refuses its file: absolute, normalised (no `.`, `..`, `//` or trailing `/`), and not under /proc,
    /sys or /dev."""
    value = table.text(key, pattern=ABSOLUTE_PATH, describe="an absolute path on the host")
    if value is None:
        return None
    parts = value.split("/")[1:]
    if posixpath.normpath(value) != value or any(p in ("", ".", "..") for p in parts):
        raise table.error(key, f"{value_repr(value)} is not a normalised absolute file path (no ., .. or //)")
    if parts[0] in FORBIDDEN_ROOTS:
        raise table.error(key, f"{value_repr(value)}: the console does not write under /{parts[0]}")
    return value


def model_config_file(table: Table, key: str, base_dir: Path) -> Path | None:
    """A readable JSON object file (a model's config.json), relative to the config file's directory."""
    value = table.text(key)
    if value is None:
        return None
    if not value or "\x00" in value:
        raise table.error(key, f"not a file path: {value_repr(value)}")
    path = (base_dir / Path(value).expanduser()).resolve()
    try:
        data = json.loads(read_model_config_bytes(path))
    except ConfigTooLarge as exc:
        raise table.error(key, f"{value_repr(str(path))} is {exc}") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise table.error(key, f"cannot read {value_repr(str(path))}: {reason}") from None
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both
        raise table.error(key, f"{value_repr(str(path))} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise table.error(key, f"{value_repr(str(path))} is not a config.json (a JSON object)")
    return path


def parse_service(
    table: Table, name: str, base_dir: Path, *, sim_host: bool, ssh_host: bool = False, host: str = ""
) -> ServiceConfig:
    """One `[hosts.H.services.NAME]` table as a ServiceConfig.

    On an SSH host the health probe runs through the SSH connection unless told otherwise, and a
    loopback URL (the host's own 127.0.0.1) is never probed from the operator's machine.
    """
    table.check_keys(SERVICE_KEYS)
    engine = Engine(table.text("engine", required=True, choices=[e.value for e in Engine]))
    url = base_url(table, "url")
    mapping = table.text("mapping", choices=MAPPINGS) or _implied_mapping(table)
    for key in ("unit", "template", "env_file"):
        if table.has(key) and key not in _MAPPING_KEYS[mapping]:
            raise table.error(key, f"not used with mapping = {mapping!r}")
    for key in _MAPPING_KEYS[mapping]:
        table.require(key, f" for mapping = {mapping!r}")
    env_file = env_file_path(table, "env_file")
    model_config = model_config_file(table, "model_config", base_dir)
    if sim_host and model_config is None:
        table.require("model_config", " on a sim host (the simulated engine loads it)")
    service = ServiceConfig(
        name=name,
        engine=engine,
        url=url,
        mapping=mapping,
        layouts=parse_layouts(table, engine, mapping),
        unit=unit_name(table, "unit"),
        template=unit_name(table, "template", template=True),
        env_file=env_file,
        env_var=table.text("env_var", "SERVE_CONSOLE_LAYOUT_ARGS", pattern=ENV_VAR_NAME, describe="a variable name"),
        model_config=model_config,
        mem_fraction=table.number("mem_fraction", above=0.0, maximum=1.0),
        health_via=table.text("health_via", "ssh" if ssh_host else "direct", choices=HEALTH_VIA),
        sudo=table.flag("sudo"),
        first_token_check=table.flag("first_token_check", True),
        stall_after_s=table.number("stall_after_s", 20.0, above=0.0, maximum=3600.0),  # type: ignore[arg-type]
        canary=table.flag("canary", True),
        canary_every_s=table.number("canary_every_s", 60.0, above=0.0),  # type: ignore[arg-type]
        canary_timeout_s=table.number("canary_timeout_s", 20.0, above=0.0, maximum=600.0),  # type: ignore[arg-type]
        line=table.line,
        cluster=parse_cluster(table, name, host, env_file_path),
    )
    if ssh_host and service.health_via == "direct" and is_loopback_url(url):
        raise table.error("health_via", f"{url} is the SSH host's own loopback address; probing it from "
                          "this machine would reach this machine: use health_via = \"ssh\" (the default)")
    if sim_host and service.health_via != "direct":
        raise table.error("health_via", "a sim host runs its engines locally: use \"direct\"")
    return service


def _implied_mapping(table: Table) -> str:
    """The mapping when none is written: template if a template is named, env-file if a file is."""
    if table.has("template"):
        return TEMPLATE
    if table.has("env_file"):
        return ENV_FILE
    return UNIT_PER_LAYOUT


def parse_layouts(table: Table, engine: Engine, mapping: str) -> tuple[LayoutConfig, ...]:
    """`layouts` as a list of strings or as [[...layouts]] tables, checked for duplicates."""
    table.require("layouts")
    items = table.data["layouts"]
    if not isinstance(items, list) or not items:
        raise table.error("layouts", "expected a non-empty array of layout strings or [[layouts]] tables")
    layouts: list[LayoutConfig] = []
    by_slug: dict[str, LayoutConfig] = {}
    by_unit: dict[str, LayoutConfig] = {}
    for index, item in enumerate(items):
        if isinstance(item, str):
            config = _string_layout(table, index, item, engine, mapping)
        elif isinstance(item, dict):
            config = _table_layout(Table(table.file, table.locator, table.path + ("layouts", index), item),
                                   engine, mapping)
        else:
            raise table.error("layouts", f"layout {index + 1}: expected a string or a table, got {value_repr(item)}")
        if len(config.name) > LAYOUT_NAME_MAX or not LAYOUT_NAME.fullmatch(config.name):
            raise table.error("layouts", f"layout name {value_repr(config.name)} must be one line of at most "
                              f"{LAYOUT_NAME_MAX} characters: {LAYOUT_NAME_GRAMMAR}", line=config.line)
        if not config.slug:
            raise table.error("layouts", f"layout name {value_repr(config.name)} has no letters or digits",
                              line=config.line)
        if config.slug in by_slug:
            raise table.error("layouts", f"duplicate layout {config.name!r} (same as {by_slug[config.slug].name!r})",
                              line=config.line)
        if config.unit is not None and config.unit in by_unit:
            raise table.error("layouts", f"layout {config.name!r} reuses unit {config.unit!r} of "
                              f"layout {by_unit[config.unit].name!r}", line=config.line)
        by_slug[config.slug] = config
        if config.unit is not None:
            by_unit[config.unit] = config
        layouts.append(config)
    return tuple(layouts)


def _string_layout(table: Table, index: int, text: str, engine: Engine, mapping: str) -> LayoutConfig:
    line = table.locator.item_line(table.path + ("layouts",), text)
    if mapping == UNIT_PER_LAYOUT:
        raise table.error("layouts", f"layout {value_repr(text)}: mapping 'unit-per-layout' needs "
                          "[[layouts]] tables, each with a unit", line=line)
    layout = _checked(table, "layouts", text, engine, line)
    return LayoutConfig(name=" ".join(text.split()), layout=layout, line=line)


def _table_layout(table: Table, engine: Engine, mapping: str) -> LayoutConfig:
    table.check_keys(LAYOUT_KEYS)
    name = table.text("name")
    args = table.text("args")
    explicit = [key for key in PARALLEL_KEYS if table.has(key)]
    if args is not None and explicit:
        raise table.error(explicit[0], "give either args or tp/ep/pp/dp keys, not both")
    if explicit:
        sizes = {key: table.integer(key, 1, minimum=1, maximum=MAX_PARALLEL_SIZE) for key in SIZE_KEYS}
        parsed = Layout(**sizes, dp_attention=table.flag("dp_attention"))  # type: ignore[arg-type]
        reason = check_layout(parsed, engine)
        if reason:
            raise table.error(explicit[0], reason)
    elif args is not None:
        parsed = _checked(table, "args", args, engine, table.locator.line(table.path + ("args",)))
    elif name is not None:
        parsed = _checked(table, "name", name, engine, table.locator.line(table.path + ("name",)))
    else:
        raise table.error(None, "a layout needs a name, tp/ep/pp/dp keys or args")
    unit = unit_name(table, "unit")
    if mapping == UNIT_PER_LAYOUT and unit is None:
        table.require("unit", " for mapping = 'unit-per-layout'")
    if mapping != UNIT_PER_LAYOUT and unit is not None:
        raise table.error("unit", f"a layout's own unit is only for mapping = 'unit-per-layout', not {mapping!r}")
    shown_name = " ".join(name.split()) if name is not None else parsed.name
    nodes = table.integer("nodes", 1, minimum=1, maximum=64) or 1
    return LayoutConfig(name=shown_name, layout=parsed, unit=unit, line=table.line, nodes=nodes)


def _checked(table: Table, key: str, text: str, engine: Engine, line: int | None) -> Layout:
    """parse_layout plus the engine's structural rules, as a ConfigError on `key`."""
    try:
        layout = parse_layout(text)
    except LayoutError as exc:
        raise table.error(key, str(exc), line=line) from None
    reason = check_layout(layout, engine)
    if reason:
        raise table.error(key, f"{value_repr(text)}: {reason}", line=line)
    return layout
