"""What a simulated host's units run: hosts.toml's services and layouts turned into engine command lines.

Real hosts carry unit files; a simulated host derives the same thing from the config. The env-file and
drop-in mappings read the layout's flags from the file the console wrote, as systemd's
`EnvironmentFile=` and `Environment=` would, so the switch's file writing is exercised for real.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from console.config import DROP_IN, ENV_FILE, HostConfig, LayoutConfig, ServiceConfig, SimConfig
from console.domain.values import Engine
from console.errors import HostError, UsageError
from console.sim.engine_args import checked_time_scale

TIME_SCALE_ENV = "SERVE_CONSOLE_SIM_TIME_SCALE"
#: The variable a node's own flags come in (ops/switch/layout_files.py writes it).
NODE_ARGS_VAR = "SERVE_CONSOLE_NODE_ARGS"


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
    for service in (*cfg.services, *cfg.node_of):
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
    """KEY=VALUE lines as systemd's EnvironmentFile= reads them: comments, continuation lines, and
    shell-like quoting (inside double quotes a backslash escapes `"`, `\\`, `$` and a backtick)."""
    env: dict[str, str] = {}
    logical: list[str] = []
    for raw in text.split("\n"):
        if raw.endswith("\\"):
            logical.append(raw[:-1])
            continue
        line = ("".join(logical) + raw).strip()
        logical = []
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, _, value = line.partition("=")
        env[key.strip().removeprefix("export ").strip()] = _env_value(value.strip())
    return env


def _env_value(value: str) -> str:
    out: list[str] = []
    quote: str | None = None
    i = 0
    while i < len(value):
        ch = value[i]
        if quote == "'":
            if ch == "'":
                quote = None
            else:
                out.append(ch)
        elif ch == "\\" and i + 1 < len(value):
            nxt = value[i + 1]
            if quote == '"' and nxt not in '"\\$`':
                out.append(ch)
            out.append(nxt)
            i += 1
        elif ch in "\"'" and quote is None:
            quote = ch
        elif ch == '"' and quote == '"':
            quote = None
        else:
            out.append(ch)
        i += 1
    return "".join(out)


def parse_drop_in(text: str) -> dict[str, str]:
    """The `Environment=` assignments of a drop-in's [Service] section, unquoted as systemd does (C
    escapes inside the words), then with the `%%` specifier read as `%`."""
    env: dict[str, str] = {}
    for raw in text.split("\n"):
        line = raw.strip()
        if not line.startswith("Environment="):
            continue
        for token in _unit_words(line.removeprefix("Environment=")):
            key, sep, value = token.replace("%%", "%").partition("=")
            if sep:
                env[key] = value
    return env


def _unit_words(text: str) -> list[str]:
    """Words of a unit-file value: split on whitespace outside quotes; a backslash escapes the next
    character (the console writes only `\\\\` and `\\"`)."""
    words: list[str] = []
    word: list[str] = []
    quote: str | None = None
    in_word = False
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            word.append(text[i + 1])
            in_word = True
            i += 2
            continue
        if quote is not None:
            if ch == quote:
                quote = None
            else:
                word.append(ch)
        elif ch in "\"'":
            quote, in_word = ch, True
        elif ch.isspace():
            if in_word:
                words.append("".join(word))
            word, in_word = [], False
        else:
            word.append(ch)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(word))
    return words


def node_rank(unit_env: dict[str, str]) -> int:
    """The node rank in the unit's SERVE_CONSOLE_NODE_ARGS (0: the head, or a service on one host)."""
    words = unit_env.get(NODE_ARGS_VAR, "").split()
    if "--node-rank" in words[:-1]:
        value = words[words.index("--node-rank") + 1]
        return int(value) if value.isdigit() else 0
    return 0


def node_loopback(cfg: HostConfig) -> str:
    """The loopback address a simulated host's engines use: 127.0.0.1, or 127.0.0.R+1 on a host that is
    node-rank R of another host's service, so the nodes are distinct hosts to the engines' rendezvous and
    to NCCL RAS, as real nodes are."""
    for service in cfg.node_of:
        if service.cluster is not None and cfg.name in service.cluster.nodes:
            return f"127.0.0.{service.cluster.nodes.index(cfg.name) + 1}"
    return "127.0.0.1"


def node_env(cfg: HostConfig, service: ServiceConfig) -> dict[str, str]:
    """The environment a node's engine gets on a simulated host: its own address for the rendezvous and
    NCCL RAS (NCCL_RAS_ADDR on the cluster's ras_port, as a real node's localhost:28028)."""
    if service.cluster is None:
        return {}
    address = node_loopback(cfg) if cfg.name != service.cluster.nodes[0] else "127.0.0.1"
    return {"NCCL_RAS_ADDR": f"{address}:{service.cluster.ras_port}", "SGLANG_HOST_IP": address,
            "VLLM_HOST_IP": address}  # fmt: skip


def unit_port(service: ServiceConfig, unit_env: dict[str, str]) -> int:
    """The port a unit's engine listens on: the service's, plus the node rank on a worker node, since
    every simulated host shares this machine's loopback (a real worker binds the same port on its own
    host)."""
    return service_port(service) + node_rank(unit_env)


def service_port(service: ServiceConfig) -> int:
    """The port in the service's URL, else its engine's default (SGLang 30000, vLLM 8000)."""
    parts = urlsplit(service.url)
    if parts.port:
        return parts.port
    if parts.scheme == "https":
        return 443
    return 8000 if service.engine is Engine.VLLM else 30000


def sim_settings(cfg: HostConfig) -> SimConfig:
    return cfg.sim or SimConfig()


def time_scale(cfg: HostConfig) -> float:
    """hosts.toml's time_scale, unless SERVE_CONSOLE_SIM_TIME_SCALE overrides it.

    Raises:
        UsageError: the variable is not a number above 0 and at most 1000 (one line naming it).
    """
    override = os.environ.get(TIME_SCALE_ENV)
    if override:
        try:
            return checked_time_scale(override, f"{TIME_SCALE_ENV}={override}")
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    return sim_settings(cfg).time_scale


def engine_command(
    cfg: HostConfig, spec: UnitSpec, layout_args: list[str], ledger_dir: Path, unit_env: dict[str, str] | None = None
) -> list[str]:
    """The simulated engine's argv for one unit: `console.sim.vllm serve MODEL ...` for a vLLM service,
    `console.sim.sglang --model-path MODEL ...` (with `--enable-metrics`, as a unit that wants /metrics
    has) for SGLang; a node of a service over several hosts adds its SERVE_CONSOLE_NODE_ARGS."""
    unit_env = unit_env or {}
    service = spec.service
    if service.model_config is None:
        raise HostError(
            cfg.name, f"{spec.unit}: service {service.name} has no model_config for the simulated engine"
        )
    sim = sim_settings(cfg)
    if service.engine is Engine.VLLM:
        argv = [sys.executable, "-m", "console.sim.vllm", "serve", str(service.model_config), *layout_args]
        memory_flag = "--gpu-memory-utilization"
    else:
        argv = [sys.executable, "-m", "console.sim.sglang", "--model-path", str(service.model_config),
                *layout_args, "--enable-metrics"]
        memory_flag = "--mem-fraction-static"
    if service.mem_fraction is not None and memory_flag not in layout_args:
        argv += [memory_flag, str(service.mem_fraction)]
    argv += unit_env.get(NODE_ARGS_VAR, "").split()
    argv += [
        "--host", node_env(cfg, service).get("SGLANG_HOST_IP", "127.0.0.1"),
        "--port", str(unit_port(service, unit_env)),
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
