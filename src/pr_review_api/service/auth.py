"""Service keys: `Authorization: Bearer <key>` on every /v1 request when keys are set.

`require_service_key` is a router-level dependency; declared with `HTTPBearer`, it also puts
the `serviceKey` security scheme into the OpenAPI document. The check is ours, not
HTTPBearer's: exactly one Authorization header, scheme `Bearer` in any case, and the token
compared with every configured key in constant time, without stopping at a match.
"""

from __future__ import annotations

import hmac
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from pr_review_api.errors import Unauthorized
from pr_review_api.service.dependencies import get_settings
from pr_review_api.settings import Settings

bearer_scheme = HTTPBearer(
    scheme_name="serviceKey",
    description="One of the keys in PR_REVIEW_API_KEYS.",
    auto_error=False,
)


def authorized(headers: list[tuple[bytes, bytes]], keys: tuple[bytes, ...]) -> bool:
    """Whether the raw request headers carry exactly one bearer token that is one of `keys`."""
    values = [value for name, value in headers if name.lower() == b"authorization"]
    if len(values) != 1:
        return False
    scheme, _, token = values[0].strip().partition(b" ")
    token = token.strip()
    if scheme.lower() != b"bearer" or not token:
        return False
    return is_service_key(token, keys)


def is_service_key(token: bytes, keys: tuple[bytes, ...]) -> bool:
    """Whether `token` is one of `keys` (a bearer token, or a key typed into /ui's sign-in)."""
    # Compare against every key, without stopping early, so timing reveals nothing.
    matched = False
    for key in keys:
        matched |= hmac.compare_digest(token, key)
    return matched


def service_keys(settings: Settings) -> tuple[bytes, ...]:
    """The configured keys, as bytes (empty: the service is open, on loopback)."""
    return tuple(key.get_secret_value().encode("utf-8") for key in settings.pr_review_api_keys)


async def require_service_key(
    request: Request,
    settings: Annotated[Settings, Depends(get_settings)],
    _declared: Annotated[object, Depends(bearer_scheme)] = None,
) -> None:
    """Raise `Unauthorized` unless the request carries one of the configured keys."""
    keys = service_keys(settings)
    if keys and not authorized(request.scope["headers"], keys):
        raise Unauthorized()
