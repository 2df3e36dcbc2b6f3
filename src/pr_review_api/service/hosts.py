"""Which addresses and `Host` names a server of ours answers without the service keys.

`serve` and a worker's `--metrics-port` refuse to listen on an address other than loopback
unless `PR_REVIEW_API_KEYS` is set (`is_loopback`). Listening on loopback is not enough: a page
on another site can resolve its own name to 127.0.0.1 (DNS rebinding) and then read and post to
a developer's service as a same-origin page. The browser still sends that page's name in
`Host`, so without keys `HostCheck` answers only the loopback names (`127.0.0.1`, `localhost`,
`[::1]`, with or without a port) and the names listed in `PR_REVIEW_ALLOWED_HOSTS` (a reverse
proxy's), and refuses anything else with 421 before routing (specification §5). Webhooks are
not exempt: a keyless service reached through a proxy or a tunnel lists that public name.

Imports stay light: the command line reads `is_loopback` before the web stack loads.
"""

from __future__ import annotations

import ipaddress
import re
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

# A name as a browser sends it in `Host` (letters, digits, dots, hyphens), or a bracketed IPv6
# literal, then an optional port.
_HOST = re.compile(r"(?P<name>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::[0-9]{0,5})?", re.ASCII)


def is_loopback(host: str) -> bool:
    """Whether `host` names only this machine (`localhost` or a loopback address)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]")).is_loopback
    except ValueError:
        return False


def host_name(value: bytes) -> str | None:
    """The name in a `Host` header's value, lower case, without its port or a trailing dot;
    None for a value that is not a host."""
    try:
        text = value.decode("ascii").strip()
    except UnicodeDecodeError:
        return None
    found = _HOST.fullmatch(text)
    return None if found is None else found.group("name").lower().removesuffix(".")


def answers_host(headers: list[tuple[bytes, bytes]], allowed: frozenset[str]) -> bool:
    """Whether a keyless server answers a request with these raw headers: exactly one `Host`,
    naming loopback or one of `allowed`."""
    values = [value for name, value in headers if name.lower() == b"host"]
    if len(values) != 1:
        return False
    name = host_name(values[0])
    # Any loopback address literal too: a rebinding page's name is never an address.
    return name is not None and (name in allowed or is_loopback(name))


class HostCheck:
    """ASGI middleware: a request whose `Host` a keyless server does not answer gets the
    contract's 421 `invalid_request` before any route sees it."""

    def __init__(self, app: ASGIApp, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = frozenset(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket") or answers_host(
            scope["headers"], self.allowed
        ):
            await self.app(scope, receive, send)
            return
        # Imported here: the command line imports this module before the web stack loads.
        from pr_review_api.service.errors import MisdirectedRequest, error_response  # noqa: PLC0415
        from pr_review_api.service.middleware import log_access  # noqa: PLC0415

        started = time.perf_counter()
        if scope["type"] == "http":
            await error_response(MisdirectedRequest(), scope)(scope, receive, send)
        else:  # no route of ours takes a websocket; refuse it the same way
            await send({"type": "websocket.close", "code": 1008})
        log_access(scope, MisdirectedRequest.status, time.perf_counter() - started)


def host_checked(app: ASGIApp, *, keys: bool, allowed: tuple[str, ...]) -> ASGIApp:
    """`app`, behind `HostCheck` unless service keys are set (specification §5)."""
    return app if keys else HostCheck(app, allowed)
