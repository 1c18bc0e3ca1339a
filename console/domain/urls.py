"""Facts about service URLs (pure): which ones name the machine they are probed from."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def is_loopback_url(url: str) -> bool:
    """True when the URL's host is a loopback name or address (localhost, 127.0.0.0/8, ::1).

    Such a URL in an SSH host's config means that host's own loopback: probing it from the operator's
    machine would reach whatever listens there instead.
    """
    host = (urlsplit(url).hostname or "").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
