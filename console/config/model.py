"""hosts.toml as frozen, typed values, validated once at start.

The loader (`load_config`) lives in `console/config/loader.py`; every error it raises is a
`ConfigError` naming file:line and the key.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from console.config.watch import WatchConfig
from console.domain.layout import Layout
from console.domain.values import Engine

#: How a service's layouts map onto systemd units.
UNIT_PER_LAYOUT = "unit-per-layout"  # each layout has its own unit (sglang-k26-tp4ep2.service)
TEMPLATE = "template"  # one template unit, the layout slug as instance (sglang@tp4ep2.service)
ENV_FILE = "env-file"  # one unit; the console rewrites an EnvironmentFile= it reads
DROP_IN = "drop-in"  # one unit; the console rewrites a drop-in under UNIT.d/
MAPPINGS = (UNIT_PER_LAYOUT, TEMPLATE, ENV_FILE, DROP_IN)


@dataclass(frozen=True, slots=True)
class LayoutConfig:
    """One layout a service may run."""

    name: str
    """The operator's name for it, as shown and as typed on the command line (`TP4 EP2`)."""
    layout: Layout
    """The parsed parallelism."""
    unit: str | None = None
    """The unit that runs it, for the unit-per-layout mapping."""
    line: int | None = None
    """Line in hosts.toml, for messages."""
    nodes: int = 1
    """Over how many of the service's nodes it runs (the first `nodes` of them, head first)."""

    @property
    def slug(self) -> str:
        """The layout name as a systemd instance string: `TP4 EP2` -> `tp4ep2`."""
        return "".join(ch for ch in self.name.lower() if ch.isalnum())


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """How a service spans several hosts (config/nodes.py)."""

    nodes: tuple[str, ...]
    """The hosts it runs on, head (node-rank 0, the one serving HTTP) first."""
    dist_port: int = 5000
    """The rendezvous port on the head: SGLang's `--dist-init-addr HEAD:PORT`, vLLM's `--master-port`."""
    head_address: str | None = None
    """The address the other nodes reach the head at (default: the head host's address)."""
    nic: str | None = None
    """The interface NCCL and Gloo must use (`NCCL_SOCKET_IFNAME`, `GLOO_SOCKET_IFNAME`), on every node."""
    node_env_file: str = "/etc/serve-console/node.env"
    """Where a unit-per-layout or template unit reads its node's arguments (`SERVE_CONSOLE_NODE_ARGS`)."""
    ras_port: int = 28028
    """Where NCCL RAS answers on each node's localhost (`NCCL_RAS_ADDR`; NCCL's default), asked through the
    head's own connection; 0: do not ask."""
    line: int | None = None


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """A served model on a host, with the layouts it can run."""

    name: str
    engine: Engine
    url: str
    """HTTP base URL for readiness and metrics, e.g. http://127.0.0.1:30000."""
    mapping: str = UNIT_PER_LAYOUT
    layouts: tuple[LayoutConfig, ...] = ()
    unit: str | None = None
    """The single unit, for the env-file and drop-in mappings."""
    template: str | None = None
    """The template unit (`sglang@.service`), for the template mapping."""
    env_file: str | None = None
    """Absolute path of the environment file the console writes (env-file mapping)."""
    env_var: str = "SERVE_CONSOLE_LAYOUT_ARGS"
    """The variable, in the env file or drop-in, that carries the layout's engine flags."""
    model_config: Path | None = None
    """Local path of the model's HF config.json, for the fit predictor."""
    mem_fraction: float | None = None
    """SGLang --mem-fraction-static or vLLM --gpu-memory-utilization; None means engine default."""
    health_via: str = "direct"
    """"direct": probe the URL from the console; "ssh": through a port forward on the host's connection."""
    sudo: bool = False
    """Run systemctl actions through `sudo -n`."""
    first_token_check: bool = True
    """A start is READY only once a streamed one-token completion has returned its first token (after the
    engine's ready line or `/health` 200); false: READY at HTTP ready, as engines themselves say."""
    stall_after_s: float = 20.0
    """Work pending and no progress this long is a stall (docs/stalls.md)."""
    canary: bool = True
    """Send a one-token canary to a ready service with nothing pending (the open console, the watch daemon)."""
    canary_every_s: float = 60.0
    """Seconds of nothing pending before a canary is sent."""
    canary_timeout_s: float = 20.0
    """No first token from the canary within this long: stalled."""
    line: int | None = None
    cluster: ClusterConfig | None = None
    """The hosts it spans, when it runs over several (None: this host alone)."""

    def layout(self, name: str) -> LayoutConfig | None:
        """The layout with this name, matching case and spacing loosely (`tp4ep2` finds `TP4 EP2`)."""
        key = "".join(ch for ch in name.lower() if ch.isalnum())
        for lc in self.layouts:
            if lc.slug == key or lc.name == name:
                return lc
        return None

    def unit_for(self, layout: LayoutConfig) -> str:
        """The systemd unit that runs `layout` under this service's mapping."""
        if self.mapping == UNIT_PER_LAYOUT:
            assert layout.unit is not None, "validated by the loader"
            return layout.unit
        if self.mapping == TEMPLATE:
            assert self.template is not None, "validated by the loader"
            stem, _, suffix = self.template.partition("@")
            return f"{stem}@{layout.slug}{suffix}"
        assert self.unit is not None, "validated by the loader"
        return self.unit

    def all_units(self) -> tuple[str, ...]:
        """Every unit this service may run, without repeats, in layout order."""
        seen: dict[str, None] = {}
        for lc in self.layouts:
            seen[self.unit_for(lc)] = None
        return tuple(seen)


@dataclass(frozen=True, slots=True)
class SimConfig:
    """The simulated GPUs of a `transport = "sim"` host."""

    gpu_count: int = 8
    gpu_total_mib: int = 97887
    gpu_name: str = "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    time_scale: float = 1.0
    """1.0 is the story's real pace; SERVE_CONSOLE_SIM_TIME_SCALE overrides it."""


@dataclass(frozen=True, slots=True)
class HostConfig:
    """A GPU host and how to reach it."""

    name: str
    transport: str = "ssh"
    """"ssh", "local" or "sim"."""
    address: str | None = None
    """Hostname, address or ~/.ssh/config alias; defaults to the name."""
    user: str | None = None
    port: int | None = None
    identity: str | None = None
    gpus: str = "nvidia-smi"
    """GPU source: "nvidia-smi", "nvml", "dcgm", "sim" or "none"."""
    dcgm_url: str = "http://127.0.0.1:9400/metrics"
    """dcgm-exporter's metrics as the host itself reaches them (through the SSH connection for ssh hosts)."""
    gpu_mem_gib: float | None = None
    """Per-GPU capacity as PyTorch reports it, for fit checks when no sample is at hand."""
    gpu_count: int | None = None
    known_hosts: str | None = None
    """known_hosts file; default ~/.ssh/known_hosts (and the ssh_config's UserKnownHostsFile)."""
    ssh_config: str | None = None
    """OpenSSH client config to honour; default ~/.ssh/config."""
    trust_on_first_use: bool = False
    """Accept and record an unknown host key. Off by default: unknown keys are refused."""
    connect_timeout_s: float = 10.0
    bundle_before_s: float = 600.0
    """An incident bundle (docs/bundle.md) holds the journal from this long before the incident ..."""
    bundle_after_s: float = 120.0
    """... to this long after it (or to the bundle's writing, whichever comes first)."""
    record_cap_mib: float = 64.0
    """The rolling record's size cap for this host (docs/recorder.md); 0 records nothing."""
    sim: SimConfig | None = None
    services: tuple[ServiceConfig, ...] = ()
    node_of: tuple[ServiceConfig, ...] = ()
    """Other hosts' services this host is a node of (filled by the loader from their `nodes`)."""
    peer_hosts: tuple[HostConfig, ...] = ()
    """The other hosts of the services it heads or is a node of (the loader fills it; their own
    `peer_hosts` are left empty), to open beside it."""
    line: int | None = None

    def service(self, name: str | None) -> ServiceConfig | None:
        """The named service, or the only one when `name` is None."""
        if name is None:
            return self.services[0] if len(self.services) == 1 else None
        return next((s for s in self.services if s.name == name), None)


@dataclass(frozen=True, slots=True)
class UiConfig:
    """The TUI's settings (the `[console]` table)."""

    theme: str = "dark"
    line_cap: int = 50_000
    """Journal lines kept per unit; older ones are dropped."""
    history_s: int = 600
    """Seconds of GPU memory history kept for sparklines."""
    refresh_s: float = 1.0
    readonly: bool = False
    keys: tuple[tuple[str, str], ...] = ()
    """Remapped keys as (action id, key) pairs."""


@dataclass(frozen=True, slots=True)
class FleetConfig:
    """The `[fleet]` table: read the fleet overview from Prometheus instead of polling every host.

    Credentials never live here: see `console.hosts.endpoints.prometheus` (environment or netrc).
    """

    prometheus: str
    """Base URL of the Prometheus HTTP API, e.g. http://prometheus:9090."""
    host_label: str = "instance"
    """The label that names the host on every series (dcgm-exporter's and the engines')."""
    host_regex: str | None = None
    """A regex whose group `host` (or first group) picks the host out of the label; None keeps it whole."""
    strip_port: bool = True
    """Drop a trailing `:PORT` from the label (`gpu-07:9400` -> `gpu-07`) before matching."""
    match: str | None = None
    """PromQL label matchers added to every series selector (`cluster="gpu-a"`), for a shared Prometheus."""
    timeout_s: float = 5.0
    stale_after_s: float = 60.0
    """A host whose newest sample is older than this shows as stale, with its age."""
    rate_window_s: int = 60
    """The rate() window for token counters; at least 4 scrape intervals."""
    seen_window_s: int = 3600
    """How far back the age of a host that stopped reporting is looked up."""
    line: int | None = None


@dataclass(frozen=True, slots=True)
class ConsoleConfig:
    """The whole file."""

    path: Path
    hosts: tuple[HostConfig, ...] = ()
    ui: UiConfig = field(default_factory=UiConfig)
    fleet: FleetConfig | None = None
    """None: the fleet overview polls each host over its own connection."""
    watch: WatchConfig = field(default_factory=WatchConfig)
    """The `[watch]` table: `serve-console watch`'s destinations and thresholds."""

    def host(self, name: str | None) -> HostConfig | None:
        """The named host, or the only one when `name` is None."""
        if name is None:
            return self.hosts[0] if len(self.hosts) == 1 else None
        return next((h for h in self.hosts if h.name == name), None)
