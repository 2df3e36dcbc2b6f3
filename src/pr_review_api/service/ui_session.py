"""Signing in to `/ui` from a browser (specification §18), and what guards every `/ui` request.

With `PR_REVIEW_API_KEYS` set, a browser cannot send `Authorization: Bearer <key>`; it signs in
on a form that takes a key, and gets a session cookie that is never the key itself:

    <expiry>.<nonce>.<HMAC-SHA256 of both>

signed with a secret derived from the configured keys (`session_secret`). Nothing is stored on
the server, so any number of `serve` processes with the same keys accept each other's
sessions, and changing the keys (adding, removing or rotating one) ends every session. A
session lasts `UI_SESSION_SECONDS`; signing out deletes the browser's cookie (a copy taken from
the browser stays valid until it expires: rotate a key to end them all). The cookie is
`HttpOnly`, `SameSite=Strict`, scoped to `/ui`, and `Secure` when the browser reached us over
TLS: the request's own scheme, or the sign-in form's `Origin` when a TLS-terminating proxy is
in front (`serve` itself speaks plain HTTP).

Every request to `/ui` that changes something (POST, PUT, PATCH, DELETE: the sign-in, the
sign-out, and any form a later page adds) must come from one of our own pages: its `Origin`
must name this service (the request's `Host`, or a name of `PR_REVIEW_ALLOWED_HOSTS`), or,
when there is none or it is `null`, `Sec-Fetch-Site` must say `same-origin`.
`SameSite=Strict` already keeps the cookie off another site's requests; the check also stops
a sign-in to the attacker's key, and protects the forms of a keyless service, which has no
cookie at all. A request with a valid bearer key (a script, not a browser) needs neither. A
key travels only in a form body: never in a URL, never in a log line (the access log has the
path only).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Annotated
from urllib.parse import urlencode, urlsplit

from fastapi import Depends, FastAPI, Request
from fastapi.responses import RedirectResponse, Response

from pr_review_api.errors import InvalidRequest, Unauthorized
from pr_review_api.service.auth import authorized, service_keys
from pr_review_api.service.dependencies import get_settings
from pr_review_api.service.errors import error_response
from pr_review_api.settings import Settings

SESSION_COOKIE = "pr_review_session"
UI_SESSION_SECONDS = 8 * 3600  # a working day; then the key is typed again
MAX_SESSION_CHARS = 200  # a cookie longer than any we set is refused unread
_SECRET_LABEL = b"pr-review /ui session v1"
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


class SignInRequired(Unauthorized):
    """A `/ui` request without a key or a valid session: a browser asking for a page is sent
    to the sign-in form, anything else gets the contract's 401."""


class CrossSiteForm(InvalidRequest):
    """A `/ui` form sent from a page that is not ours (cross-site request forgery)."""

    status = 403
    default_message = "This form must be sent from this service's own pages."


# --- the signed session --------------------------------------------------------------------


def session_secret(keys: tuple[bytes, ...]) -> bytes:
    """The sessions' signing secret: one for a set of keys, another once any key changes."""
    digest = hmac.new(_SECRET_LABEL, digestmod=hashlib.sha256)
    for key in sorted(keys):
        digest.update(len(key).to_bytes(4, "big") + key)  # length-prefixed: no ambiguity
    return digest.digest()


def new_session(secret: bytes, now: float) -> str:
    """A session cookie's value, valid for `UI_SESSION_SECONDS` from `now`."""
    signed = f"{int(now) + UI_SESSION_SECONDS}.{secrets.token_urlsafe(16)}"
    return f"{signed}.{_signature(secret, signed)}"


def valid_session(value: str, secret: bytes, now: float) -> bool:
    """Whether `value` is a session signed with `secret` that has not expired at `now`."""
    if len(value) > MAX_SESSION_CHARS:
        return False
    signed, _, signature = value.rpartition(".")
    expiry, _, nonce = signed.partition(".")
    if not (expiry.isascii() and expiry.isdigit() and nonce):
        return False
    expected = _signature(secret, signed)
    return hmac.compare_digest(signature.encode(), expected.encode()) and now < int(expiry)


def _signature(secret: bytes, signed: str) -> str:
    return hmac.new(secret, signed.encode(), hashlib.sha256).hexdigest()


def set_session_cookie(response: Response, request: Request, keys: tuple[bytes, ...]) -> None:
    """Sign `response`'s browser in: a fresh session cookie."""
    response.set_cookie(
        SESSION_COOKIE,
        new_session(session_secret(keys), time.time()),
        max_age=UI_SESSION_SECONDS,
        path=ui_path(request),
        secure=over_tls(request),
        httponly=True,
        samesite="strict",
    )


def clear_session_cookie(response: Response, request: Request) -> None:
    """Sign `response`'s browser out: its cookie deleted, with the attributes it was set with."""
    response.delete_cookie(
        SESSION_COOKIE,
        path=ui_path(request),
        secure=over_tls(request),
        httponly=True,
        samesite="strict",
    )


def over_tls(request: Request) -> bool:
    """Whether the browser reached us over TLS: the request's scheme, or, behind a proxy that
    ends TLS, the `Origin` the browser gave a form."""
    origin = request.headers.get("origin", "")
    return request.url.scheme == "https" or origin.lower().startswith("https://")


def ui_path(request: Request) -> str:
    """Where the pages are, under the application's root path."""
    return str(request.scope.get("root_path", "")) + "/ui"


# --- the guards ----------------------------------------------------------------------------


async def require_ui_access(
    request: Request, settings: Annotated[Settings, Depends(get_settings)]
) -> None:
    """With keys set, a page needs a bearer key or a valid session cookie."""
    keys = service_keys(settings)
    if not keys or authorized(request.scope["headers"], keys):
        return
    cookie = request.cookies.get(SESSION_COOKIE, "")
    if not (cookie and valid_session(cookie, session_secret(keys), time.time())):
        raise SignInRequired()


async def require_same_origin(
    request: Request, settings: Annotated[Settings, Depends(get_settings)]
) -> None:
    """A `/ui` request that changes something must come from one of our own pages."""
    if request.method in _SAFE_METHODS:
        return
    keys = service_keys(settings)
    if keys and authorized(request.scope["headers"], keys):
        return  # a script with a key: no browser, no ambient credential to forge with
    if not same_origin(request, settings.pr_review_allowed_hosts):
        raise CrossSiteForm()


def same_origin(request: Request, allowed: tuple[str, ...]) -> bool:
    """Whether the browser says the request comes from a page of this service."""
    origin = request.headers.get("origin", "null")
    if origin == "null":
        # No origin to compare (an older browser, a privacy setting, a sandboxed frame): the
        # browser's own Fetch Metadata, which no page can set, must say "same-origin".
        return request.headers.get("sec-fetch-site") == "same-origin"
    try:
        parts = urlsplit(origin)
        hostname = parts.hostname or ""
    except ValueError:
        return False
    host = request.headers.get("host", "").lower()
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return False
    return parts.netloc.lower() == host or hostname in allowed


async def _on_sign_in_required(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    wants_page = request.method in ("GET", "HEAD") and "text/html" in request.headers.get(
        "accept", ""
    )
    if not wants_page:
        return error_response(exc, request.scope)
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(sign_in_location(request, target), status_code=303)


def sign_in_location(request: Request, then: str) -> str:
    """The sign-in page, told which of our pages to open next."""
    return f"{ui_path(request)}/sign-in?" + urlencode({"next": then})


def next_page(request: Request, then: str | None) -> str:
    """`then` when it is one of our pages (never another site: no open redirect), else the
    job listing."""
    ui = ui_path(request)
    if not then or "\\" in then or any(ord(c) < 0x21 for c in then):
        return ui
    parts = urlsplit(then)
    if parts.scheme or parts.netloc or not (parts.path == ui or parts.path.startswith(ui + "/")):
        return ui
    return then


def install_sign_in_handler(app: FastAPI) -> None:
    """Send browsers without a session to the sign-in form (service/app.py calls this)."""
    app.add_exception_handler(SignInRequired, _on_sign_in_required)
