"""Whether a bind address is reachable only from this machine."""

from __future__ import annotations

import ipaddress


def is_loopback(bind: str) -> bool:
    """True when ``bind`` (host:port, [v6]:port or unix:path) is reachable only locally."""
    if bind.startswith("unix:"):
        return True
    host = bind.rsplit(":", 1)[0] if ":" in bind else bind
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
