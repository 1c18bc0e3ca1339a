"""Reading an engine's Prometheus `/metrics`, the way its health probe reaches it.

The reader shares the service's HttpHealthProbe: its HTTP session and, for `health_via = "ssh"`, its
port forward over the host's one SSH connection, so a remote engine bound to localhost is read without
another connection. SGLang serves `/metrics` only when started with `--enable-metrics` (404 otherwise);
vLLM always does. A failure is one `MetricsUnavailable` line saying why, never a traceback.
"""

from __future__ import annotations

import time

import aiohttp

from console.domain.metrics import EngineScrape, MetricsTextError, parse_metrics
from console.domain.safe_text import printable
from console.domain.values import Engine
from console.errors import HostError
from console.hosts.endpoints.bodies import read_limited
from console.hosts.endpoints.health import MAX_PROBE_BODY_BYTES, HttpHealthProbe

#: A vLLM dump is a few hundred KiB; anything far beyond that is not an engine's /metrics.
MAX_METRICS_BYTES = 8 * 2**20


class MetricsUnavailable(Exception):
    """The engine's metrics could not be read; the message says why, in one line."""


def missing_hint(engine: Engine, status: int) -> str:
    """What a non-200 answer to /metrics means for this engine."""
    if status == 404 and engine is Engine.SGLANG:
        return "/metrics answered 404: start SGLang with --enable-metrics"
    return f"/metrics answered HTTP {status}"


class EngineMetricsReader:
    """Scrapes one service's `/metrics` through its health probe's session and forward."""

    def __init__(self, probe: HttpHealthProbe, engine: Engine) -> None:
        self.probe = probe
        self.engine = Engine(engine)

    async def _text(self) -> str:
        # The probe owns the session and the forward; reading through them keeps one of each per service.
        base = await self.probe._base()
        async with self.probe._client().get(base + "/metrics", allow_redirects=False) as resp:
            if resp.status != 200:
                await read_limited(resp, MAX_PROBE_BODY_BYTES)
                raise MetricsUnavailable(missing_hint(self.engine, resp.status))
            body = await read_limited(resp, MAX_METRICS_BYTES)  # content.read(n) stops at what is buffered
            if len(body) > MAX_METRICS_BYTES:
                raise MetricsUnavailable(f"/metrics is larger than {MAX_METRICS_BYTES // 2**20} MiB")
            return body.decode("utf-8", errors="replace")

    async def scrape(self) -> EngineScrape:
        """One reading.

        Raises:
            MetricsUnavailable: unreachable, not served, or not Prometheus text (the reason in one line).
        """
        taken_at = time.time()
        text = await self.text()
        engine = self.engine.value if self.engine is not Engine.OPENAI else None
        try:
            return parse_metrics(text, taken_at, engine)
        except MetricsTextError as exc:
            raise MetricsUnavailable(printable(str(exc))) from None

    async def text(self) -> str:
        """The `/metrics` text as the engine served it (at most MAX_METRICS_BYTES).

        Raises:
            MetricsUnavailable: unreachable or not served (the reason in one line).
        """
        try:
            return await self._text()
        except HostError as exc:
            raise MetricsUnavailable(printable(str(exc))) from None
        except TimeoutError:
            raise MetricsUnavailable(f"/metrics timed out after {self.probe.timeout_s:g} s") from None
        except aiohttp.ClientConnectorError:
            raise MetricsUnavailable("engine not reachable (connection refused)") from None
        except aiohttp.ClientError as exc:
            raise MetricsUnavailable(
                printable(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
            ) from None


def metrics_reader(probe: object, engine: Engine) -> EngineMetricsReader | None:
    """The reader for a service's probe: over HTTP for an HttpHealthProbe; a probe of another kind
    (a recorded or fixed host) may bring its own as `metrics_reader`; else None."""
    if isinstance(probe, HttpHealthProbe):
        return EngineMetricsReader(probe, engine)
    return getattr(probe, "metrics_reader", None)
