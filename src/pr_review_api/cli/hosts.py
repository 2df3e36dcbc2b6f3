"""Which addresses a server of ours may listen on without the service keys: `serve` and a
worker's `--metrics-port` refuse any other address unless `PR_REVIEW_API_KEYS` is set."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine (`localhost` or a loopback address)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False
