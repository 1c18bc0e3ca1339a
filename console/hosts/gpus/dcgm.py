"""GPU samples from NVIDIA dcgm-exporter's `/metrics` (port 9400 on the host), with its default counters.

dcgm-exporter publishes one series per GPU (label `gpu`): frame buffer used and free in MiB, GPU
utilisation, power, temperature and the last Xid error. For an SSH host the exporter usually listens on
the host's loopback, so it is read through a port forward over the host's one connection, as the
health probe does with `health_via = "ssh"`. The text is parsed with `prometheus_client`'s parser.
"""

from __future__ import annotations

import math
import time
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from console.domain.safe_text import printable
from console.domain.values import GpuSample, GpuSnapshot
from console.errors import HostError
from console.hosts.base import SampledGpuSource
from console.hosts.endpoints import LocalForward, read_limited

DEFAULT_URL = "http://127.0.0.1:9400/metrics"
#: dcgm field -> GpuSample attribute; FB_FREE only serves to compute the total.
FIELDS = {
    "DCGM_FI_DEV_FB_USED": "used_mib",
    "DCGM_FI_DEV_FB_FREE": "free_mib",
    "DCGM_FI_DEV_GPU_UTIL": "util_pct",
    "DCGM_FI_DEV_POWER_USAGE": "power_w",
    "DCGM_FI_DEV_GPU_TEMP": "temp_c",
    "DCGM_FI_DEV_XID_ERRORS": "xid",
}
_BODY_LIMIT_BYTES = 16 * 1024 * 1024
_TEXT_LIMIT = 120  # a label value shown as a GPU name or UUID


def _label(labels: dict[str, str], *names: str) -> str | None:
    for name in names:
        value = labels.get(name)
        if value:
            return printable(value[:_TEXT_LIMIT])  # a label is host text: escapes made visible
    return None


def parse_dcgm(text: str) -> tuple[list[GpuSample], str | None]:
    """The GPUs in a dcgm-exporter exposition, in `gpu` order, and a note on what could not be read.

    A GPU that exports no FB_USED keeps `used_mib` None (not exported is not zero); the total is
    used + free only when both are there. Xid 0 means none.

    Returns:
        (GPU samples, a one-line note or None).
    """
    values: dict[int, dict[str, float]] = {}
    labels_of: dict[int, dict[str, str]] = {}
    try:
        families = list(text_string_to_metric_families(text))
    except (ValueError, TypeError, IndexError) as exc:
        return [], f"dcgm-exporter: unreadable metrics ({printable(str(exc)[:120]) or type(exc).__name__})"
    for family in families:
        for sample in family.samples:
            field = FIELDS.get(sample.name)
            if field is None:
                continue
            index_text = sample.labels.get("gpu", "")
            if not index_text.isdigit() or not math.isfinite(sample.value):
                continue
            index = int(index_text)
            values.setdefault(index, {})[field] = sample.value
            labels_of.setdefault(index, dict(sample.labels))
    if not values:
        return [], "dcgm-exporter: no DCGM_FI_DEV_* GPU series in the answer"
    return [_sample(i, values[i], labels_of[i]) for i in sorted(values)], None


def _sample(index: int, fields: dict[str, float], labels: dict[str, str]) -> GpuSample:
    def whole(name: str) -> int | None:
        value = fields.get(name)
        return None if value is None else int(value)

    used, free = whole("used_mib"), whole("free_mib")
    xid = whole("xid")
    return GpuSample(
        index=index,
        uuid=_label(labels, "UUID", "uuid"),
        name=_label(labels, "modelName"),
        total_mib=used + free if used is not None and free is not None else None,
        used_mib=used,
        util_pct=whole("util_pct"),
        temp_c=whole("temp_c"),
        pci_bus_id=_label(labels, "pci_bus_id"),
        power_w=fields.get("power_w"),
        xid=xid if xid else None,
    )


class DcgmSource(SampledGpuSource):
    """GpuSource reading dcgm-exporter over HTTP, directly or through an SSH port forward."""

    def __init__(self, url: str = DEFAULT_URL, *, host: str, forward: LocalForward | None = None,
                 timeout_s: float = 3.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"dcgm URL {url!r} is not an http(s) URL")
        self.url = url
        self.host = host
        self.forward = forward
        self.timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def _target(self) -> str:
        if self.forward is None:
            return self.url
        parts = urlsplit(self.url)
        port = await self.forward.local_port()
        return urlunsplit((parts.scheme, f"127.0.0.1:{port}", parts.path or "/metrics", parts.query, ""))

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                connector=aiohttp.TCPConnector(force_close=True),  # a pooled socket may outlive its forward
            )
        return self._session

    async def fetch(self) -> str:
        """The exporter's text.

        Raises:
            HostError: unreachable, not 200, or too large.
        """
        where = f"dcgm-exporter at {self.url} on {self.host}"
        try:
            async with self._client().get(await self._target(), allow_redirects=False) as resp:
                body = await read_limited(resp, _BODY_LIMIT_BYTES)
                if resp.status != 200:
                    raise HostError(self.host, f"{where} answered HTTP {resp.status}")
        except TimeoutError:
            raise HostError(self.host, f"{where}: timed out after {self.timeout_s:g} s") from None
        except aiohttp.ClientConnectorError:
            raise HostError(self.host, f"{where}: connection refused (is dcgm-exporter running?)") from None
        except aiohttp.ClientError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise HostError(self.host, f"{where}: {printable(first)}") from None
        if len(body) > _BODY_LIMIT_BYTES:
            raise HostError(self.host, f"{where}: answer larger than {_BODY_LIMIT_BYTES >> 20} MiB")
        return body.decode("utf-8", "replace")

    async def sample(self) -> GpuSnapshot:
        """One snapshot; failures become its `error`. dcgm-exporter lists no processes."""
        try:
            text = await self.fetch()
        except HostError as exc:
            return GpuSnapshot(taken_at=time.time(), error=str(exc))
        gpus, note = parse_dcgm(text)
        return GpuSnapshot(taken_at=time.time(), gpus=tuple(gpus), error=note)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self.forward is not None and hasattr(self.forward, "close"):
            await self.forward.close()

