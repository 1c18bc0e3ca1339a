"""Simulated hosts for the switch, process-manager and CLI tests: configs, ports, clean-up checks."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import signal
import sys
import textwrap
from pathlib import Path

from ports import free_port as free_port  # the one definition, also imported from here
from waiting import WaitTimeout, await_for
from waiting import wait_until as wait_until  # the older name, still imported from here

from console.config import TEMPLATE, HostConfig, LayoutConfig, ServiceConfig, SimConfig
from console.domain.layout import Layout, parse_layout
from console.domain.values import Engine

REPO = Path(__file__).resolve().parent.parent
KIMI = REPO / "console" / "sim" / "models" / "moonshotai--Kimi-K2.6.json"
QWEN = REPO / "console" / "sim" / "models" / "Qwen--Qwen3-235B-A22B-FP8.json"
H100_MIB = 81559
#: Fast enough that a layout loads in about a second, slow enough that the phases are distinct.
TEST_TIME_SCALE = 0.03
#: How long an engine may take from its fatal line to its exit (a moment, far longer under load).
EXIT_PATH_S = 15.0


def demo_config_copy(folder: Path) -> Path:
    """The packaged demo cluster written to folder/hosts.toml: every engine URL, rendezvous and RAS port moved
    to a free one (so a test never meets another demo), every model path absolute."""
    from console.config import demo_config_path

    source = demo_config_path()
    text = re.sub(r"http://127\.0\.0\.1:\d+", lambda _m: f"http://127.0.0.1:{free_port()}", source.read_text())
    text = re.sub(r"^(dist_port|ras_port)( *)= *\d+", lambda m: f"{m[1]}{m[2]}= {free_port()}", text, flags=re.M)
    text = text.replace('model_config = "models/', f'model_config = "{source.parent / "models"}/')
    path = folder / "hosts.toml"
    path.write_text(text)
    return path


def layouts(*specs: tuple[str, Layout]) -> tuple[LayoutConfig, ...]:
    return tuple(
        LayoutConfig(name, layout, unit=f"sim-{''.join(c for c in name.lower() if c.isalnum())}.service")
        for name, layout in specs
    )


EP8 = ("EP8", Layout(tp=8, ep=8))
TP8 = ("TP8", Layout(tp=8))
TP4EP2 = ("TP4 EP2", Layout(tp=4, ep=2))


def failing(name: str, kind: str) -> tuple[str, Layout]:
    """EP8 with the simulated engine's `--fail KIND` injected."""
    return (name, Layout(tp=8, ep=8, extra_args=("--fail", kind)))


def sim_host_config(
    name: str = "sim1",
    *,
    mapping: str = TEMPLATE,
    layout_specs: tuple[tuple[str, Layout], ...] = (EP8, TP8, TP4EP2),
    port: int | None = None,
    time_scale: float = TEST_TIME_SCALE,
    model_config: Path | None = KIMI,
) -> HostConfig:
    """A one-service simulated host (8x 96 GB, Kimi K2.6) with the given layout mapping."""
    extra: dict = {}
    if mapping == TEMPLATE:
        extra["template"] = "sim-k26@.service"
    elif mapping in ("env-file", "drop-in"):
        extra["unit"] = "sim-k26.service"
        if mapping == "env-file":
            extra["env_file"] = "/etc/serve-console/sim-k26.env"
    service = ServiceConfig(
        name="k26",
        engine=Engine.SGLANG,
        url=f"http://127.0.0.1:{port or free_port()}",
        mapping=mapping,
        layouts=layouts(*layout_specs),
        model_config=model_config,
        **extra,
    )
    return HostConfig(
        name=name, transport="sim", gpus="sim", sim=SimConfig(time_scale=time_scale), services=(service,)
    )


def qwen_host(port: int, name: str = "h100") -> HostConfig:
    """A four-H100 simulated vLLM host serving Qwen3-235B-A22B-FP8: TP4, TP4 with EP, TP2."""
    layouts = tuple(
        LayoutConfig(layout_name, parse_layout(args)) for layout_name, args in
        (("TP4", "TP4"), ("TP4 EP", "--tensor-parallel-size 4 --enable-expert-parallel"), ("TP2", "TP2"))
    )  # fmt: skip
    service = ServiceConfig(
        name="qwen3",
        engine=Engine.VLLM,
        url=f"http://127.0.0.1:{port}",
        mapping=TEMPLATE,
        template="vllm-qwen3@.service",
        layouts=layouts,
        model_config=QWEN,
    )
    sim = SimConfig(gpu_count=4, gpu_total_mib=H100_MIB, gpu_name="NVIDIA H100 80GB HBM3", time_scale=0.03)
    return HostConfig(name=name, transport="sim", gpus="sim", sim=sim, services=(service,))


def stalling_host(port: int, kind: str) -> HostConfig:
    """`qwen_host` with one layout, TP4, whose simulated vLLM fails as `kind` (spin, diverged, stall)."""
    cfg = qwen_host(port)
    service = cfg.services[0]
    layout = LayoutConfig(f"TP4 {kind}", dataclasses.replace(parse_layout("TP4"), extra_args=("--fail", kind)))
    return dataclasses.replace(cfg, services=(dataclasses.replace(service, layouts=(layout,)),))


async def until_ready(host, service, timeout_s: float = 90.0) -> None:
    """Until the service's fresh health reads ready (its engine loaded)."""
    from console.ops.status import service_status

    async def ready() -> bool:
        st = await service_status(host, service, fresh_health=True)
        return st.health is not None and st.health.status == "ready"

    await await_for(ready, "the engine to answer ready", timeout_s=timeout_s, interval_s=0.3)


def fake_engine(monkeypatch, body: str) -> None:
    """Replace the simulated engine with a small Python program; its argv[1:] are the layout's flags."""
    from console.sim.host import units as sim_units

    code = textwrap.dedent(body)

    def command(cfg, spec, layout_args, ledger_dir, unit_env=None):
        return [sys.executable, "-c", code, *layout_args]

    monkeypatch.setattr(sim_units, "engine_command", command)


def live(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def engine_pids(state_root: Path) -> list[int]:
    """Live simulated engines whose ledger lies under `state_root` (none may survive a test)."""
    out = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                cmd = fh.read().split(b"\0")
        except OSError:
            continue
        mine = any(str(state_root).encode() in part for part in cmd)
        engine = b"console.sim.sglang" in cmd or b"console.sim.vllm" in cmd
        if engine and mine and live(int(entry.name)):
            out.append(int(entry.name))
    return out


class SimHosts:
    """Builds simulated hosts under one state dir and stops everything they started at the end."""

    def __init__(self, state_root: Path) -> None:
        self.state_root = state_root
        self.hosts: list = []

    def __call__(self, cfg: HostConfig | None = None, **kwargs):
        from console.sim.host.build import build_sim_host

        host = build_sim_host(cfg or sim_host_config(**kwargs), self.state_root)
        self.hosts.append(host)
        return host

    def audit(self):
        from console.ops.audit import AuditLog

        return AuditLog(self.state_root / "audit.sqlite3")

    async def close(self) -> None:
        for host in self.hosts:
            await host.services.stop_all()
            await host.close()
        # An engine that failed on its own may still be in its exit path (the sim, like SGLang, takes
        # a moment between its fatal line and its exit); one that lives on past that has leaked.
        try:
            await await_for(lambda: not engine_pids(self.state_root), "the engines to exit after their units stopped",
                            timeout_s=EXIT_PATH_S)
        except WaitTimeout:
            raise AssertionError(f"engines survived their units: {engine_pids(self.state_root)}") from None


async def logged(host, unit: str, needle: str) -> int:
    """How many of the unit's journal entries so far contain `needle`."""
    return sum([needle in entry.message async for entry in host.services.journal(unit, follow=False)])


async def until_logged(host, unit: str, needle: str, *, more_than: int = 0, timeout_s: float = 60.0) -> int:
    """Wait until more than `more_than` of the unit's journal entries contain `needle` (a request in
    flight shows as the engine's `Decode batch.` line); how many do then."""
    async def count():
        n = await logged(host, unit, needle)
        return n if n > more_than else 0

    return await await_for(count, f"{unit} to log {needle!r} (more than {more_than}x)", timeout_s=timeout_s)


async def kill_engine(host, layout: str) -> None:
    """SIGKILL the layout's engine, as an engine that dies on its own."""
    service = host.config.services[0]
    state = await host.services.state(service.unit_for(service.layout(layout)))
    assert state.main_pid
    with contextlib.suppress(ProcessLookupError):
        os.kill(state.main_pid, signal.SIGKILL)
