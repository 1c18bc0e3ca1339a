"""Which journal lines are the console's own probes: an engine's access-log lines for its requests.

SGLang and vLLM serve through uvicorn, which logs every request, the console's health probes included:
`INFO:     127.0.0.1:51234 - "GET /health HTTP/1.1" 200 OK`. Left in, they bury what an operator came
for (an idle journal was all probes). A line is the console's when it carries the console's
User-Agent (`serve-console/<version> (probe)`, where the access log shows agents), or when it is a
GET of a probe path from an address the console probes from (loopback by default: through an SSH
forward too, the engine sees sshd connecting from 127.0.0.1). Uvicorn's default format shows no
agent, so on real engines the path and the address decide.
"""

from __future__ import annotations

import re
from collections.abc import Collection

#: The paths the console's probes ask (health, /metrics for the engine pane, and /v1/models of a plain
#: OpenAI server). Not /get_model_info: SGLang's own warm-up asks it, from loopback too, and that line is
#: worth reading.
PROBE_PATHS = frozenset({"/health", "/health_generate", "/metrics", "/v1/models"})
#: Where the console's requests come from unless told otherwise.
LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
#: What the console's User-Agent starts with and ends with (health.PROBE_USER_AGENT).
AGENT_PREFIX = "serve-console/"
AGENT_MARK = "(probe)"

_ACCESS = re.compile(
    r'(?P<addr>\[[0-9A-Fa-f:.]+\]|[0-9A-Za-z.:-]+?):\d+ - "(?P<method>[A-Z]+) (?P<path>[^ "?]*)[^"]*" \d{3}'
)

_AGENT = re.compile(r'"([^"]*)"\s*$')


def is_probe_line(message: str, *, addresses: Collection[str] = LOOPBACK) -> bool:
    """True when `message` is an access-log line of one of the console's own probe requests.

    A line that ends in a quoted User-Agent is the console's exactly when the agent is; one without
    is when it GETs a probe path from one of `addresses`.

    Args:
        message: one journal message.
        addresses: client addresses the console's requests come from.
    """
    if '- "' not in message:  # cheap: nearly every line is not an access line
        return False
    match = _ACCESS.search(message)
    if match is None:
        return False
    agent = _AGENT.search(message, match.end())
    if agent is not None:  # the log shows agents: the agent decides
        return agent[1].startswith(AGENT_PREFIX) and agent[1].endswith(AGENT_MARK)
    address = match["addr"].strip("[]")
    return match["method"] == "GET" and match["path"] in PROBE_PATHS and address in addresses
