"""The `[fleet]` table of hosts.toml: where the fleet overview reads Prometheus, and how its host
labels map onto hosts."""

from __future__ import annotations

import re

from console.config.fields import Table, url_problem, value_repr
from console.config.model import FleetConfig

FLEET_KEYS = ("prometheus", "host_label", "host_regex", "strip_port", "match", "timeout_s", "stale_after_s",
              "rate_window_s", "seen_window_s")
LABEL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_VALUE = r'"(?:[^"\\\n]|\\.)*"'
#: Label matchers as in a selector's braces: `cluster="gpu-a", job=~"dcgm|vllm"` (no braces, no names).
MATCHERS = re.compile(rf"\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*{_VALUE}\s*(,\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*{_VALUE}\s*)*,?\s*")


def parse_fleet(table: Table) -> FleetConfig:
    """Validate `[fleet]`; a URL carrying credentials is refused (they belong in the environment)."""
    table.check_keys(FLEET_KEYS)
    url = table.text("prometheus", required=True)
    assert url is not None
    if "@" in url.partition("://")[2].partition("/")[0]:  # user:password@ before the host
        raise table.error("prometheus", "credentials do not belong in hosts.toml: set "
                          "SERVE_CONSOLE_PROMETHEUS_TOKEN or SERVE_CONSOLE_PROMETHEUS_AUTHORIZATION, or use ~/.netrc")
    if problem := url_problem(url):  # "http://[::1" or a bad port: one line here, not a traceback later
        raise table.error("prometheus", f"expected an http(s) URL such as \"http://prometheus:9090\" "
                          f"({problem}), got {value_repr(url)}")
    regex = table.text("host_regex")
    if regex is not None:
        try:
            compiled = re.compile(regex)
        except re.error as exc:
            raise table.error("host_regex", f"not a regular expression: {exc}") from None
        if compiled.groups < 1:
            raise table.error("host_regex", "needs a group that captures the host name, e.g. \"^([^.]+)\"")
    defaults = FleetConfig(prometheus=url)
    return FleetConfig(
        prometheus=url.rstrip("/"),
        host_label=table.text("host_label", defaults.host_label, pattern=LABEL_NAME,  # type: ignore[arg-type]
                              describe="a Prometheus label name"),
        host_regex=regex,
        strip_port=table.flag("strip_port", defaults.strip_port),
        match=table.text("match", pattern=MATCHERS,
                         describe='PromQL label matchers such as \'cluster="gpu-a", job=~"dcgm|vllm"\''),
        timeout_s=table.number("timeout_s", defaults.timeout_s, above=0.0, maximum=300.0),  # type: ignore[arg-type]
        stale_after_s=table.number("stale_after_s", defaults.stale_after_s, above=0.0, maximum=86_400.0),  # type: ignore[arg-type]
        rate_window_s=table.integer("rate_window_s", defaults.rate_window_s, minimum=2, maximum=86_400),  # type: ignore[arg-type]
        seen_window_s=table.integer("seen_window_s", defaults.seen_window_s, minimum=60, maximum=7 * 86_400),  # type: ignore[arg-type]
        line=table.line,
    )
