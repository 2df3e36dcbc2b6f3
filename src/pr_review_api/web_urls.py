"""The checks every forge's change URL passes first: one absolute URL, on the configured server.

A pull request's (github/urls.py) and a merge request's (gitlab/urls.py) URL are parsed by hand
instead of trusting `urllib.parse`, which silently drops tabs and newlines and accepts
back-slashes, user-info and odd ports that a browser would read differently. Each check raises
`InvalidPullRequestUrl` (specification §3) before any network access.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pr_review_api.errors import InvalidPullRequestUrl

MAX_URL_CHARS = 2048

_URL = re.compile(
    r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)(?P<path>[^?#]*)(?:\?[^#]*)?(?:#.*)?",
    re.ASCII | re.DOTALL,
)
_AUTHORITY = re.compile(
    r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(?P<port>[0-9]*))?", re.ASCII
)
_PORT = re.compile(r"[1-9][0-9]{0,4}", re.ASCII)
_DEFAULT_PORTS = {"http": 80, "https": 443}


def url_path_on(url: object, server_url: str, what: str) -> str:
    """The path of `url` (query and fragment dropped) after checking that it is a printable,
    absolute URL on `server_url`'s origin; `what` names the URL in messages."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise InvalidPullRequestUrl(f"The {what} URL is empty or too long.")
    # Printable ASCII only: no whitespace, control or look-alike characters, no back-slashes.
    if not url.isascii() or not url.isprintable() or " " in url or "\\" in url:
        raise InvalidPullRequestUrl(f"The {what} URL contains a character that is not allowed.")
    match = _URL.fullmatch(url)
    if match is None:
        raise InvalidPullRequestUrl(f"The {what} URL is not an absolute http(s) URL.")
    _check_origin(match["scheme"], match["authority"], server_url, what)
    return match["path"]


def path_under(path: str, server_url: str, what: str) -> str | None:
    """`path` without the server's own path prefix, or None when it is not under it."""
    if "%" in path:
        raise InvalidPullRequestUrl(f"The {what} URL must not use percent-encoding in its path.")
    prefix = urlsplit(server_url).path.rstrip("/")
    return path[len(prefix) :] if path.startswith(prefix + "/") else None


def _effective_port(scheme: str, port: int | None) -> int | None:
    return port if port is not None else _DEFAULT_PORTS.get(scheme)


def _check_origin(scheme: str, authority: str, server_url: str, what: str) -> None:
    server = urlsplit(server_url)
    where = f"The {what} URL must be on {server_url}."
    if scheme.lower() != server.scheme.lower() or "@" in authority:
        raise InvalidPullRequestUrl(where)
    match = _AUTHORITY.fullmatch(authority)
    if match is None:
        raise InvalidPullRequestUrl(where)
    host = match["host"].lower().removeprefix("[").removesuffix("]")
    port_text = match["port"]
    if port_text is not None and _PORT.fullmatch(port_text) is None:
        raise InvalidPullRequestUrl(where)
    port = int(port_text) if port_text is not None else None
    server_port = _effective_port(server.scheme.lower(), server.port)
    if (
        host != (server.hostname or "").lower()
        or _effective_port(scheme.lower(), port) != server_port
    ):
        raise InvalidPullRequestUrl(where)
