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

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr, StringConstraints, ValidationError

from pr_review_api.errors import (
    ConfigurationError,
    GiteaUnavailable,
    PullRequestNotFound,
    ReviewError,
)
from pr_review_api.http.api_client import (
    MAX_WAIT_HEADER_SECONDS,
    ApiClient,
    same_origin,
    try_again_when,
)
from pr_review_api.http.body import bounded_decimal
from pr_review_api.jsonutil import dumps_compact, loads_strict
from pr_review_api.settings import Settings

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # decoded; a page of 50 comments with long bodies fits
REQUEST_TIMEOUT_SECONDS = 30.0  # one request, answer included; callers may bound it further
# Gitea's default `[api] MAX_RESPONSE_ITEMS`; a server configured lower answers shorter pages,
# which paging by `Link` handles.
PAGE_LIMIT = 50
MAX_USERNAME_CHARS = 255

NOT_FOUND_MESSAGE = "The pull request or repository does not exist or is not visible."
TOKEN_REFUSED_MESSAGE = "Gitea refused the token; check GITEA_TOKEN."  # noqa: S105  (a sentence)
TOKEN_NEEDED_MESSAGE = "Gitea asked for a token; set GITEA_TOKEN to review this repository."  # noqa: S105
NOT_CONFIGURED_MESSAGE = "No Gitea server is configured; set GITEA_SERVER_URL."
# `rel="next"` among a Link header's entries (RFC 8288); the URL itself is never read.
_NEXT_RELATION = re.compile(r';\s*rel="?next"?\s*(?:,|;|$)', re.IGNORECASE)


class _Unset:
    """The default of `GiteaClient(token=...)`: the token of the settings."""


_UNSET: Final = _Unset()


@dataclass(frozen=True)
class GiteaResponse:
    """One answer: status, headers and the capped decoded body (a 3xx's is empty)."""

    status: int
    headers: httpx.Headers
    body: bytes

    def json(self) -> Any:
        """The body as strict JSON; a body that is not JSON is `GiteaUnavailable`."""
        try:
            return loads_strict(self.body)
        except ValueError:
            raise GiteaUnavailable("Gitea returned data that is not valid JSON.") from None


def status_error(response: GiteaResponse, *, anonymous: bool) -> ReviewError:  # noqa: PLR0911  (one return per kind of answer)
    """The contract error of a non-2xx answer. Gitea answers 404 for a repository the token
    may not see; its 403 means the token lacks a scope or a permission."""
    status = response.status
    if status in (404, 410):
        return PullRequestNotFound(NOT_FOUND_MESSAGE)
    if status == 401:
        return GiteaUnavailable(TOKEN_NEEDED_MESSAGE if anonymous else TOKEN_REFUSED_MESSAGE)
    if status == 429:
        when = try_again_when(
            bounded_decimal(response.headers.get("retry-after", ""), MAX_WAIT_HEADER_SECONDS)
        )
        return GiteaUnavailable(f"Gitea's API rate limit was reached; try again {when}.")
    if 300 <= status < 400:
        return GiteaUnavailable("Gitea redirected the request; it was not followed.")
    if status == 403:
        return GiteaUnavailable("Gitea refused the request (status 403): the token lacks a scope.")
    if status >= 500:
        return GiteaUnavailable(f"Gitea answered with a server error (status {status}).")
    return GiteaUnavailable(f"Gitea answered with an unexpected status ({status}).")


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    login: Annotated[str, StringConstraints(min_length=1, max_length=MAX_USERNAME_CHARS)]


class GiteaClient(ApiClient):
    """The process's Gitea API client (see the module docstring). Close it with `aclose()`.

    `token` defaults to `GITEA_TOKEN`; `None` asks anonymously. `transport` is a test's.
    Making one without `GITEA_SERVER_URL` is a configuration error.
    """

    forge: ClassVar[str] = "Gitea"
    unavailable: ClassVar[type[GiteaUnavailable]] = GiteaUnavailable
    error_body_bytes: ClassVar[int] = 64 * 1024  # a refusal's body, read for the caller

    def __init__(
        self,
        settings: Settings,
        *,
        token: SecretStr | _Unset | None = _UNSET,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
    ) -> None:
        server, api_base = settings.gitea_server_url, settings.gitea_api_base
        if server is None or api_base is None:
            raise ConfigurationError(NOT_CONFIGURED_MESSAGE)
        super().__init__(settings, transport=transport, max_connections=max_connections)
        self._token = settings.gitea_token if isinstance(token, _Unset) else token
        self._api_base = api_base
        self._origins = (httpx.URL(api_base), httpx.URL(server))
        self._login: str | None = None

    @property
    def anonymous(self) -> bool:
        """Whether requests go without a token."""
        return self._token is None

    @property
    def token(self) -> SecretStr | None:
        """The client's token: git fetches the same pull request with the same identity."""
        return self._token

    def api_url(self, path: str) -> str:
        """`GITEA_API_URL` + `path` (which starts with `/`)."""
        return self._api_base + path

    def is_gitea_url(self, url: httpx.URL) -> bool:
        """Whether `url` is on one of the two origins the token may reach."""
        return any(same_origin(url, origin) for origin in self._origins)

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = self._plain_headers("application/json", has_body)
        if self._token is not None:
            headers["Authorization"] = f"token {self._token.get_secret_value()}"
        return headers

    async def request(
        self,
        method: str,
        url: str,
        *,
        json: object | None = None,
        params: Mapping[str, str] | None = None,
        limit: int = MAX_RESPONSE_BYTES,
    ) -> GiteaResponse:
        """One API request, never redirected; any status is returned (see `status_error`).

        Raises `GiteaUnavailable` for a URL off Gitea's origins, a network failure, a timeout,
        an oversized or corrupt 2xx body.
        """
        try:
            target = httpx.URL(url)
            if params:
                target = target.copy_merge_params(dict(params))
        except (httpx.InvalidURL, TypeError, ValueError):
            raise GiteaUnavailable("The Gitea request's URL is not valid.") from None
        if not self.is_gitea_url(target) or target.userinfo:
            raise GiteaUnavailable("The request was for a host other than Gitea; not sent.")
        content = None if json is None else dumps_compact(json).encode("utf-8")
        with self._failures():
            async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                client = await self._pool()
                headers = self._headers(content is not None)
                response, body = await self._send(client, method, target, headers, content, limit)
                return GiteaResponse(response.status_code, response.headers, body)

    async def get_json(self, url: str, *, params: Mapping[str, str] | None = None) -> Any:
        """The JSON of a GET answered 2xx; any other status is its `status_error`."""
        response = await self.request("GET", url, params=params)
        if not 200 <= response.status < 300:
            raise status_error(response, anonymous=self.anonymous)
        return response.json()

    async def paginated(self, url: str, *, max_pages: int) -> tuple[list[Any], bool]:
        """The items of a listing, `PAGE_LIMIT` a page, for at most `max_pages` pages.
        Returns (items, complete): complete is False when pages remained."""
        items: list[Any] = []
        for page in range(1, max_pages + 1):
            params = {"limit": str(PAGE_LIMIT), "page": str(page)}
            response = await self.request("GET", url, params=params)
            if not 200 <= response.status < 300:
                raise status_error(response, anonymous=self.anonymous)
            chunk = response.json()
            if not isinstance(chunk, list):
                raise GiteaUnavailable("Gitea returned a listing that is not a list.")
            items.extend(chunk)
            if not chunk or not has_next_page(response.headers):
                return items, True
        return items, False

    async def login(self) -> str:
        """Our identity on Gitea (`GET /user`'s `login`), asked once per client."""
        if self._login is None:
            document = await self.get_json(self.api_url("/user"))
            try:
                self._login = _UserWire.model_validate(document).login
            except ValidationError:
                raise GiteaUnavailable("Gitea returned user data that is not valid.") from None
        return self._login


def has_next_page(headers: httpx.Headers) -> bool:
    """Whether a listing's `Link` header names a next page (its URL is not read)."""
    return any(_NEXT_RELATION.search(value) for value in headers.get_list("link"))
