"""The destinations `[watch]` and the environment name: each Alertmanager, and the webhook if one is set."""

from __future__ import annotations

from collections.abc import Mapping

from console.config import WatchConfig
from console.errors import UsageError
from console.hosts.endpoints import alertmanager_poster, webhook_from_env
from console.ops.watch.delivery import ALERTMANAGER, WEBHOOK, Sink


def build_sinks(watch: WatchConfig, environ: Mapping[str, str] | None = None) -> list[Sink]:
    """Every destination, Alertmanagers first.

    Raises:
        UsageError: the webhook's variable holds no usable URL (one line naming the variable).
    """
    sinks = [Sink(alertmanager_poster(url, environ), ALERTMANAGER) for url in watch.alertmanagers]
    try:
        webhook = webhook_from_env(environ)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if webhook is not None:
        sinks.append(Sink(webhook, WEBHOOK))
    return sinks
