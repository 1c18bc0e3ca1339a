"""What a simulated host's units run: hosts.toml's services and layouts turned into engine command lines.

Real hosts carry unit files; a simulated host derives the same thing from the config. The env-file and
drop-in mappings read the layout's flags from the file the console wrote, as systemd's
`EnvironmentFile=` and `Environment=` would, so the switch's file writing is exercised for real.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from console.config import DROP_IN, ENV_FILE, HostConfig, LayoutConfig, ServiceConfig, SimConfig
from console.domain.models import Engine
from console.errors import HostError

TIME_SCALE_ENV = "SERVE_CONSOLE_SIM_TIME_SCALE"


@dataclass(frozen=True, slots=True)
class UnitSpec:
    """One simulated unit: the command it runs and what it belongs to."""

    unit: str
    service: ServiceConfig
    layout: LayoutConfig | None
    """None for the env-file and drop-in mappings, whose layout comes from a file at start."""
    description: str


def find_unit(cfg: HostConfig, unit: str) -> UnitSpec | None:
    """The service and layout behind a unit name, or None if the host has no such unit."""
    for service in cfg.services:
        if service.mapping in (ENV_FILE, DROP_IN):
            if service.unit == unit:
                return UnitSpec(unit, service, None, f"{service.name} (simulated {service.engine.value})")
            continue
        for lc in service.layouts:
            if service.unit_for(lc) == unit:
                desc = f"{service.name} {lc.name} (simulated {service.engine.value})"
                return UnitSpec(unit, service, lc, desc)
    return None


def parse_env_file(text: str) -> dict[str, str]:
    """KEY=VALUE lines as systemd's EnvironmentFile= reads them (comments, optional quotes)."""
    env: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def parse_drop_in(text: str) -> dict[str, str]:
    """The `Environment=` assignments of a drop-in's [Service] section."""
    env: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("Environment="):
            continue
        for token in shlex.split(line.removeprefix("Environment=")):
            key, sep, value = token.partition("=")
            if sep:
                env[key] = value
    return env


def service_port(service: ServiceConfig) -> int:
    parts = urlsplit(service.url)
    return parts.port or (443 if parts.scheme == "https" else 30000)


def sim_settings(cfg: HostConfig) -> SimConfig:
    return cfg.sim or SimConfig()


def time_scale(cfg: HostConfig) -> float:
    """hosts.toml's time_scale, unless SERVE_CONSOLE_SIM_TIME_SCALE overrides it."""
    override = os.environ.get(TIME_SCALE_ENV)
    if override:
        try:
            return float(override)
        except ValueError:
            pass
    return sim_settings(cfg).time_scale


def engine_command(cfg: HostConfig, spec: UnitSpec, layout_args: list[str], ledger_dir: Path) -> list[str]:
    """The simulated engine's argv for one unit."""
    service = spec.service
    if service.model_config is None:
        raise HostError(
            cfg.name, f"{spec.unit}: service {service.name} has no model_config for the simulated engine"
        )
    sim = sim_settings(cfg)
    argv = [
        sys.executable,
        "-m",
        "console.sim.engine",
        "--model-path",
        str(service.model_config),
        *layout_args,
    ]
    if service.mem_fraction is not None and "--mem-fraction-static" not in layout_args:
        argv += ["--mem-fraction-static", str(service.mem_fraction)]
    argv += [
        "--host", "127.0.0.1",
        "--port", str(service_port(service)),
        "--gpu-count", str(sim.gpu_count),
        "--gpu-total-mib", str(sim.gpu_total_mib),
        "--gpu-name", sim.gpu_name,
        "--time-scale", str(time_scale(cfg)),
        "--ledger-dir", str(ledger_dir),
    ]  # fmt: skip
    return argv


def layout_args_for(spec: UnitSpec) -> list[str]:
    """The engine flags of a unit-per-layout or template unit's layout."""
    from console.domain.layout import engine_args

    assert spec.layout is not None
    engine = spec.service.engine if spec.service.engine != Engine.OPENAI else Engine.SGLANG
    return list(engine_args(spec.layout.layout, engine))


def layout_args_from_env(cfg: HostConfig, spec: UnitSpec, env: dict[str, str], source: str) -> list[str]:
    """The flags in the service's variable, split on whitespace as systemd's `$VAR` does."""
    value = env.get(spec.service.env_var)
    if value is None:
        raise HostError(cfg.name, f"{spec.unit}: {source} does not set {spec.service.env_var}")
    return value.split()


def load_drop_ins(files_dir: Path, unit: str) -> dict[str, str]:
    """The environment of every drop-in of `unit` as they are on disk now (read at daemon-reload)."""
    env: dict[str, str] = {}
    folder = files_dir / f"etc/systemd/system/{unit}.d"
    if folder.is_dir():
        for conf in sorted(folder.glob("*.conf")):
            env.update(parse_drop_in(conf.read_text(errors="replace")))
    return env


def save_loaded_drop_ins(path: Path, loaded: dict[str, dict[str, str]]) -> None:
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(loaded, sort_keys=True))
    os.replace(tmp, path)


def read_loaded_drop_ins(path: Path) -> dict[str, dict[str, str]]:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return {}
