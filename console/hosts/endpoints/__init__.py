"""The HTTP endpoints the console reads (engine health and `/metrics`, the Prometheus API) and posts to
(Alertmanager, a webhook).

This is the package's public face: other rooms import these names from here, never from its modules.
"""

from console.hosts.endpoints.alert_sinks import (
    ALERTMANAGER_AUTHORIZATION_ENV,
    WEBHOOK_AUTHORIZATION_ENV,
    WEBHOOK_URL_ENV,
    DeliveryError,
    JsonPoster,
    alertmanager_poster,
    webhook_from_env,
)
from console.hosts.endpoints.bodies import json_document, read_limited
from console.hosts.endpoints.canary import USER_AGENT as CANARY_USER_AGENT
from console.hosts.endpoints.canary import CanaryResult, send_canary
from console.hosts.endpoints.first_token import FirstToken, FirstTokenProbe, first_token_probe
from console.hosts.endpoints.health import MAX_PROBE_BODY_BYTES, HttpHealthProbe, LocalForward
from console.hosts.endpoints.metrics import EngineMetricsReader, MetricsUnavailable, metrics_reader
from console.hosts.endpoints.prometheus import PrometheusClient, VectorSample

__all__ = [
    "CANARY_USER_AGENT",
    "CanaryResult",
    "send_canary",
    "ALERTMANAGER_AUTHORIZATION_ENV",
    "alertmanager_poster",
    "DeliveryError",
    "JsonPoster",
    "MAX_PROBE_BODY_BYTES",
    "EngineMetricsReader",
    "first_token_probe",
    "FirstToken",
    "FirstTokenProbe",
    "HttpHealthProbe",
    "json_document",
    "LocalForward",
    "metrics_reader",
    "MetricsUnavailable",
    "PrometheusClient",
    "read_limited",
    "VectorSample",
    "WEBHOOK_AUTHORIZATION_ENV",
    "WEBHOOK_URL_ENV",
    "webhook_from_env",
]
