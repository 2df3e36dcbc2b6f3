"""The Gitea (and Forgejo) REST v1 client of a process (specification §19): one pool, the token,
caps.

`GiteaClient` is the shared pooled client of `http/api_client.py` (no proxy, netrc or CA
settings from the environment, redirects never followed). The token (`GITEA_TOKEN`) goes as
`Authorization: token <token>` (Gitea's documented header for an access token) and only to the
origins of `GITEA_API_URL` and `GITEA_SERVER_URL`: a request for any other origin is refused
before it is sent, and a redirect is answered as a failure, never followed.

Listings are paged with Gitea's `page` (1-based) and `limit` query parameters; an answer with
more pages carries a `Link` header with `rel="next"` (and `X-Total-Count`, the number of items
in all pages). We read only whether a next page exists and ask for `page + 1` ourselves: the
header's URL is never followed, so a hostile header cannot send the token elsewhere or loop.

Failures are contract errors with fixed sentences: a body, a token or a URL never reaches a
message or a log.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

import httpx
from pydantic import BaseModel, ConfigDict, StringConstraints

from pr_review_api.errors import (
    ConfigurationError,
    GiteaUnavailable,
    ReviewError,
)
from pr_review_api.http.origin_client import ApiResponse, Endpoints, OriginClient, RefusalWords
from pr_review_api.settings import Settings

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # decoded; a page of 50 comments with long bodies fits
REQUEST_TIMEOUT_SECONDS = 30.0  # one request, answer included; callers may bound it further
# Gitea's default `[api] MAX_RESPONSE_ITEMS`; a server configured lower answers shorter pages,
# which paging by `Link` handles.
PAGE_LIMIT = 50
MAX_USERNAME_CHARS = 255

NOT_FOUND_MESSAGE = "The pull request or repository does not exist or is not visible."
TOKEN_REFUSED_MESSAGE = "Gitea refused the token; check GITEA_TOKEN."  # noqa: S105  (a sentence)
FORBIDDEN_MESSAGE = "Gitea refused the request (status 403): the token lacks a scope."
TOKEN_NEEDED_MESSAGE = "Gitea asked for a token; set GITEA_TOKEN to review this repository."  # noqa: S105
NOT_CONFIGURED_MESSAGE = "No Gitea server is configured; set GITEA_SERVER_URL."
# `rel="next"` among a Link header's entries (RFC 8288); the URL itself is never read.
_NEXT_RELATION = re.compile(r';\s*rel="?next"?\s*(?:,|;|$)', re.IGNORECASE)


class GiteaResponse(ApiResponse):
    """One answer: status, headers and the capped decoded body (a 3xx's is empty)."""

    forge: ClassVar[str] = "Gitea"
    unavailable: ClassVar[type[GiteaUnavailable]] = GiteaUnavailable
    words: ClassVar[RefusalWords] = RefusalWords(
        NOT_FOUND_MESSAGE, TOKEN_NEEDED_MESSAGE, TOKEN_REFUSED_MESSAGE, FORBIDDEN_MESSAGE
    )


def status_error(response: GiteaResponse, *, anonymous: bool) -> ReviewError:
    """The contract error of a non-2xx answer. Gitea answers 404 for a repository the token
    may not see; its 403 means the token lacks a scope or a permission."""
    return response.refusal(anonymous=anonymous)


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    login: Annotated[str, StringConstraints(min_length=1, max_length=MAX_USERNAME_CHARS)]


class GiteaClient(OriginClient[GiteaResponse]):
    """The process's Gitea API client (see the module docstring). Close it with `aclose()`.

    `token` defaults to `GITEA_TOKEN`; `None` asks anonymously. `transport` is a test's.
    Making one without `GITEA_SERVER_URL` is a configuration error.
    """

    response_type: ClassVar[type[GiteaResponse]] = GiteaResponse
    forbidden_hides: ClassVar[bool] = False
    max_response_bytes: ClassVar[int] = MAX_RESPONSE_BYTES
    request_timeout_seconds: ClassVar[float] = REQUEST_TIMEOUT_SECONDS

    _login: str | None = None  # asked once

    def _endpoints(self, settings: Settings) -> Endpoints:
        server, api_base = settings.gitea_server_url, settings.gitea_api_base
        if server is None or api_base is None:
            raise ConfigurationError(NOT_CONFIGURED_MESSAGE)
        return Endpoints(settings.gitea_token, api_base, server)

    def is_gitea_url(self, url: httpx.URL) -> bool:
        """Whether `url` is on one of the two origins the token may reach."""
        return self._on_origins(url)

    def _token_header(self, token: str) -> tuple[str, str]:
        return "Authorization", f"token {token}"

    async def paginated(self, url: str, *, max_pages: int) -> tuple[list[Any], bool]:
        """The items of a listing, `PAGE_LIMIT` a page, for at most `max_pages` pages.
        Returns (items, complete): complete is False when pages remained."""
        items: list[Any] = []
        for page in range(1, max_pages + 1):
            params = {"limit": str(PAGE_LIMIT), "page": str(page)}
            chunk, response = await self._listing_page(url, params)
            items.extend(chunk)
            if not chunk or not has_next_page(response.headers):
                return items, True
        return items, False

    async def login(self) -> str:
        """Our identity on Gitea (`GET /user`'s `login`), asked once per client."""
        if self._login is None:
            self._login = (await self._user(_UserWire)).login
        return self._login


def has_next_page(headers: httpx.Headers) -> bool:
    """Whether a listing's `Link` header names a next page (its URL is not read)."""
    return any(_NEXT_RELATION.search(value) for value in headers.get_list("link"))
