"""Load hosts.toml into the frozen values of `console.config`, validated once.

Every problem becomes one `ConfigError` line, `FILE:LINE: dotted.key: what is wrong`, which the CLI
prints with exit code 2. Paths inside the file are relative to the file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

try:
    import tomli as toml
except ModuleNotFoundError:  # Python 3.11+ ships the same parser as tomllib
    import tomllib as toml  # type: ignore[no-redef]

from console.config.fields import KeyLocator, Table, url_problem, value_repr
from console.config.fleet import parse_fleet
from console.config.model import ConsoleConfig, HostConfig, SimConfig, UiConfig
from console.config.nodes import check_clusters, with_nodes
from console.config.services import DISPLAY_TEXT, parse_service
from console.config.watch import parse_watch
from console.errors import ConfigError

CONFIG_NAME = "hosts.toml"
#: A hosts.toml is kilobytes; a larger file is refused before it is parsed.
CONFIG_MAX_BYTES = 4 << 20
TOP_KEYS = ("console", "hosts", "fleet", "watch")
CONSOLE_KEYS = ("theme", "line_cap", "history_s", "refresh_s", "readonly", "keys")
SSH_KEYS = ("address", "user", "port", "identity", "known_hosts", "ssh_config", "trust_on_first_use",
            "connect_timeout_s")
HOST_KEYS = ("transport", *SSH_KEYS, "gpus", "dcgm_url", "gpu_count", "gpu_mem_gib", "time_scale", "sim", "services",
             "bundle_before_s", "bundle_after_s", "record_cap_mib")
SIM_KEYS = ("gpu_count", "gpu_total_mib", "gpu_name", "time_scale")
TRANSPORTS = ("ssh", "local", "sim")
GPU_SOURCES = {"ssh": ("nvidia-smi", "dcgm", "none"), "local": ("nvidia-smi", "nvml", "dcgm", "none"),
               "sim": ("sim", "none")}

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# ssh reads a leading "-" as an option and "@" or whitespace as syntax: refuse them outright.
ADDRESS = re.compile(r"(?!-)[^\s\x00-\x1f\x7f@/,]{1,253}")
USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}")
THEME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
ACTION_ID = re.compile(r"[A-Za-z0-9_.:-]+")
KEY_SPEC = re.compile(r"[^\s\x00-\x1f\x7f]+")
HTTP_URL = re.compile(r"https?://[^\s\x00-\x1f\x7f/@]+(/[^\s\x00-\x1f\x7f]*)?")


def demo_config_path() -> Path:
    """The packaged demo cluster (one simulated host with eight GPUs)."""
    return Path(__file__).resolve().parent.parent / "sim" / "demo.toml"


def user_config_path() -> Path:
    """`hosts.toml` in the user's config dir (~/.config/serve-console on Linux)."""
    import platformdirs  # only needed when searching

    return platformdirs.user_config_path("serve-console", appauthor=False) / CONFIG_NAME


def find_config(path: str | Path | None = None) -> Path:
    """The config file to load: `path`, else ./hosts.toml, else the user config dir's."""
    if path is not None:
        return Path(path).expanduser()
    candidates = [Path(CONFIG_NAME), user_config_path()]
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    looked = " and ".join(str(c) for c in candidates)
    raise ConfigError(CONFIG_NAME, None, f"no config found (looked for {looked}); pass --config PATH or use --demo")


def load_config(path: str | Path | None = None) -> ConsoleConfig:
    """Read, parse and validate a hosts.toml (see `find_config` for the search order).

    Raises:
        ConfigError: one line naming the file, the line when known, and the key.
    """
    file = find_config(path)
    label = str(file)
    try:
        with open(file, "rb") as fh:  # bounded: --config /dev/zero must not fill memory
            data = fh.read(CONFIG_MAX_BYTES + 1)
    except OSError as exc:
        raise ConfigError(label, None, f"cannot read: {exc.strerror or type(exc).__name__}") from None
    if len(data) > CONFIG_MAX_BYTES:
        raise ConfigError(label, None, f"larger than {CONFIG_MAX_BYTES >> 20} MiB: not a hosts.toml")
    return parse_config(data, label, base_dir=file.resolve().parent, resolved=file.resolve())


def parse_config(data: bytes, label: str, *, base_dir: Path, resolved: Path | None = None) -> ConsoleConfig:
    """Validate the bytes of a config file; `label` names it in errors, `base_dir` anchors paths."""
    text = _decode(data, label)
    try:
        document = toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise _syntax_error(exc, label) from None
    except RecursionError:
        raise ConfigError(label, None, "TOML syntax: arrays or tables nested too deeply") from None
    root = Table(label, KeyLocator(text), (), document)
    root.check_keys(TOP_KEYS)
    hosts = tuple(_parse_host(table, name, base_dir) for name, table in root.tables("hosts"))
    if not hosts:
        raise ConfigError(label, None, "no hosts defined: add a [hosts.NAME] table")
    check_clusters(hosts, label)
    _check_every_host_serves(root, hosts)
    hosts = with_nodes(hosts)
    console = root.table("console")
    ui = _parse_console(console) if console is not None else UiConfig()
    fleet = root.table("fleet")
    return ConsoleConfig(path=resolved or base_dir / label, hosts=hosts, ui=ui,
                         fleet=parse_fleet(fleet) if fleet is not None else None,
                         watch=parse_watch(root.table("watch")))


def _check_every_host_serves(root: Table, hosts: tuple[HostConfig, ...]) -> None:
    """A host needs a service of its own, or to be a node of another host's service."""
    nodes = {n for h in hosts for s in h.services if s.cluster is not None for n in s.cluster.nodes}
    for host in hosts:
        if not host.services and host.name not in nodes:
            table = next(t for name, t in root.tables("hosts") if name == host.name)
            raise table.error("services", "a host needs at least one [hosts.NAME.services.SERVICE] table, "
                              "or to be listed in another host's service as one of its nodes")


def _decode(data: bytes, label: str) -> str:
    if data.startswith(b"\xef\xbb\xbf"):  # a BOM from some editors; TOML itself has none
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start]
        raise ConfigError(label, line, f"not valid UTF-8 (byte 0x{byte:02x} at column {column})") from None


def _syntax_error(exc: Exception, label: str) -> ConfigError:
    """tomli's message, with its `(at line N, column M)` turned into file:line."""
    message = " ".join(str(getattr(exc, "msg", None) or exc).split())
    full = str(exc)
    line = getattr(exc, "lineno", None)
    column = getattr(exc, "colno", None)
    if line is None and (m := re.search(r"at line (\d+), column (\d+)", full)):
        line, column = int(m.group(1)), int(m.group(2))
    message = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)$", "", message)
    if "end of document" in full:
        where = " (at end of file)"
    else:
        where = f" (column {column})" if column else ""
    return ConfigError(label, line, f"TOML syntax: {message}{where}")


def _check_name(table: Table, name: str, what: str) -> None:
    """Host and service names: the NAME grammar, said in words."""
    if not NAME.fullmatch(name):
        raise table.error(None, f"{what} names use letters, digits, '.', '_' and '-' (at most 64)")


def _parse_host(table: Table, name: str, base_dir: Path) -> HostConfig:
    _check_name(table, name, "host")
    table.check_keys(HOST_KEYS)
    transport = table.text("transport", "ssh", choices=TRANSPORTS)
    assert transport is not None
    if transport != "ssh":
        for key in SSH_KEYS:
            if table.has(key):
                raise table.error(key, f"only for transport = \"ssh\", not {transport!r}")
    sim = _parse_sim(table) if transport == "sim" else None
    if transport != "sim":
        for key in ("sim", "time_scale"):
            if table.has(key):
                raise table.error(key, "only for transport = \"sim\"")
    gpus = table.text("gpus", "sim" if transport == "sim" else "nvidia-smi", choices=GPU_SOURCES[transport])
    services = []
    urls: dict[str, str] = {}
    for service_name, service_table in table.tables("services"):
        _check_name(service_table, service_name, "service")
        service = parse_service(service_table, service_name, base_dir, sim_host=transport == "sim",
                                ssh_host=transport == "ssh", host=name)
        if service.url in urls:
            raise service_table.error("url", f"same URL as service {urls[service.url]!r}")
        urls[service.url] = service_name
        services.append(service)
    return HostConfig(
        name=name,
        transport=transport,
        address=table.text("address", name if transport == "ssh" else None, pattern=ADDRESS,
                           describe="a host name, address or ssh alias"),
        user=table.text("user", pattern=USER, describe="a user name"),
        port=table.integer("port", minimum=1, maximum=65535),
        identity=_local_path(table, "identity", base_dir),
        gpus=gpus,  # type: ignore[arg-type]
        dcgm_url=_dcgm_url(table, gpus),
        gpu_mem_gib=table.number("gpu_mem_gib", above=0.0, maximum=10_000.0),
        gpu_count=sim.gpu_count if sim else table.integer("gpu_count", minimum=1, maximum=1024),
        known_hosts=_local_path(table, "known_hosts", base_dir),
        ssh_config=_local_path(table, "ssh_config", base_dir),
        trust_on_first_use=table.flag("trust_on_first_use"),
        connect_timeout_s=table.number("connect_timeout_s", 10.0, above=0.0, maximum=3600.0),  # type: ignore[arg-type]
        bundle_before_s=table.number("bundle_before_s", 600.0, above=0.0, maximum=86_400.0),  # type: ignore[arg-type]
        bundle_after_s=table.number("bundle_after_s", 120.0, above=0.0, maximum=86_400.0),  # type: ignore[arg-type]
        record_cap_mib=_record_cap(table),
        sim=sim,
        services=tuple(services),
        line=table.line,
    )


def _record_cap(table: Table) -> float:
    """The rolling record's cap (MiB): 0 (no record) or at least 1, so a typo of a unit does not record 64 KiB."""
    cap = table.number("record_cap_mib", 64.0, above=-1.0, maximum=1_048_576.0)
    assert cap is not None
    if cap != 0 and cap < 1:
        raise table.error("record_cap_mib", f"must be 0 (no record) or at least 1 (MiB), not {cap:g}")
    return cap


def _dcgm_url(table: Table, gpus: str | None) -> str:
    default = HostConfig(name="-").dcgm_url
    url = table.text("dcgm_url", default, pattern=HTTP_URL, describe="an http(s) URL")
    if table.has("dcgm_url") and gpus != "dcgm":
        raise table.error("dcgm_url", 'only with gpus = "dcgm"')
    if url and (problem := url_problem(url, base=False)):  # a port out of range passes the pattern
        raise table.error("dcgm_url", f"{problem}: {value_repr(url)}")
    return url or default


def _parse_sim(host: Table) -> SimConfig:
    """`[hosts.NAME.sim]`; `gpu_count` and `time_scale` may also sit on the host itself."""
    table = host.table("sim") or Table(host.file, host.locator, host.path + ("sim",), {})
    table.check_keys(SIM_KEYS)
    defaults = SimConfig()
    for key in ("gpu_count", "time_scale"):
        if host.has(key) and table.has(key):
            raise table.error(key, f"also set as hosts.{host.path[-1]}.{key}; set it once")
    source = {k: (table if table.has(k) else host) for k in ("gpu_count", "time_scale")}
    return SimConfig(
        gpu_count=source["gpu_count"].integer("gpu_count", defaults.gpu_count, minimum=1, maximum=1024),  # type: ignore[arg-type]
        gpu_total_mib=table.integer("gpu_total_mib", defaults.gpu_total_mib, minimum=1024, maximum=16_777_216),  # type: ignore[arg-type]
        gpu_name=table.text("gpu_name", defaults.gpu_name, pattern=DISPLAY_TEXT, describe="a one-line name"),  # type: ignore[arg-type]
        time_scale=source["time_scale"].number("time_scale", defaults.time_scale, above=0.0, maximum=1000.0),  # type: ignore[arg-type]
    )


def _local_path(table: Table, key: str, base_dir: Path) -> str | None:
    """A path on the console's machine: `~` expanded, relative to the config file."""
    value = table.text(key)
    if value is None:
        return None
    if not value or any(ord(ch) < 32 for ch in value):
        raise table.error(key, f"not a file path: {value_repr(value)}")
    return str(base_dir / Path(value).expanduser())


def _parse_console(table: Table) -> UiConfig:
    table.check_keys(CONSOLE_KEYS)
    defaults = UiConfig()
    keys: list[tuple[str, str]] = []
    key_table = table.table("keys")
    if key_table is not None:
        for action in key_table.data:
            if not ACTION_ID.fullmatch(action):
                raise key_table.error(action, "action ids use letters, digits and . _ : -")
            spec: Any = key_table.text(action, pattern=KEY_SPEC, describe="a key (e.g. \"ctrl+l\" or \"f5\")")
            keys.append((action, spec))
    return UiConfig(
        theme=table.text("theme", defaults.theme, pattern=THEME, describe="a theme name"),  # type: ignore[arg-type]
        line_cap=table.integer("line_cap", defaults.line_cap, minimum=100, maximum=10_000_000),  # type: ignore[arg-type]
        history_s=table.integer("history_s", defaults.history_s, minimum=1, maximum=86_400),  # type: ignore[arg-type]
        refresh_s=table.number("refresh_s", defaults.refresh_s, above=0.0, maximum=60.0),  # type: ignore[arg-type]
        readonly=table.flag("readonly", defaults.readonly),
        keys=tuple(keys),
    )
