"""Shared bits of the remote-host integration tests: host configs for the test hosts, async waiting."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from waiting import await_for

from console.config import ENV_FILE, TEMPLATE, UNIT_PER_LAYOUT, HostConfig, LayoutConfig, ServiceConfig
from console.domain.layout import parse_layout
from console.domain.values import Engine


def bed_host_config(bed, name: str = "tb1", **overrides: object) -> HostConfig:
    """A HostConfig that reaches test host `name` through the testbed's ssh_config alias."""
    values: dict[str, object] = {"name": name, "ssh_config": str(bed.ssh_config), "connect_timeout_s": 5.0}
    values.update(overrides)
    return HostConfig(**values)  # type: ignore[arg-type]


async def wait_until(
    predicate: Callable[[], object | Awaitable[object]], timeout_s: float, what: str, interval_s: float = 0.05
) -> object:
    """Poll a sync or async predicate until truthy; fail naming `what` after `timeout_s` (scaled)."""
    return await await_for(predicate, what, timeout_s=timeout_s, interval_s=interval_s)


TIME_SCALE = "0.02"  # the story's minutes become seconds


def k26_service(mapping: str) -> ServiceConfig:
    per_unit = mapping == UNIT_PER_LAYOUT
    layouts = tuple(
        LayoutConfig(name=name, layout=parse_layout(name), unit=unit if per_unit else None)
        for name, unit in LAYOUTS.items()
    )
    extra: dict[str, object] = {}
    if mapping == TEMPLATE:
        extra["template"] = "sglang-k26@.service"
    elif mapping == ENV_FILE:
        extra.update(unit="sglang-k26.service", env_file="/etc/serve-console/sglang-k26.env")
    return ServiceConfig(
        name="k26", engine=Engine.SGLANG, url="http://127.0.0.1:30000", mapping=mapping, layouts=layouts,
        model_config=MODEL, health_via="ssh", **extra,
    )  # fmt: skip


LAYOUTS = {"EP8": "sglang-k26-ep8.service", "TP4 EP2": "sglang-k26-tp4ep2.service", "TP8": "sglang-k26-tp8.service"}


REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "console" / "sim" / "models" / "moonshotai--Kimi-K2.6.json"
