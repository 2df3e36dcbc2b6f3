"""The GitLab REST v4 client of a process (CONTRACT 17): one pooled connection, the token, caps.

`GitLabClient` holds one long-lived `httpx.AsyncClient` (no proxy, netrc or CA settings from the
environment, certifi's CA bundle, redirects never followed), shared by every review that uses it.
The token (`GITLAB_TOKEN`) goes as `PRIVATE-TOKEN` and only to the origins of `GITLAB_API_URL`
and `GITLAB_SERVER_URL`: a request for any other origin is refused before it is sent, and a
redirect is answered as a failure, never followed, so the token never leaves those two hosts.
Every body is read with the shared capped reader (`pr_review_api.http`).

Failures are contract errors with fixed sentences (`status_error`): a body, a token or a URL
never reaches a message or a log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Annotated, Any, Final, Self

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr, StringConstraints, ValidationError

from pr_review_api import __version__
from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound, ReviewError
from pr_review_api.http import (
    ACCEPTED_ENCODINGS,
    BodyCorrupt,
    BodyError,
    BodyTooLarge,
    UnsupportedEncoding,
    bounded_decimal,
    read_capped,
    tls_context,
)
from pr_review_api.jsonutil import dumps_compact, loads_strict
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # decoded; a page of 100 notes with long bodies fits
MAX_ERROR_BODY_BYTES = 64 * 1024  # a refusal's body (GitLab's `message`), read for the caller
REQUEST_TIMEOUT_SECONDS = 30.0  # one request, answer included; callers may bound it further
CONNECT_TIMEOUT_SECONDS = 10.0
KEEPALIVE_EXPIRY_SECONDS = 30.0
PER_PAGE = 100  # GitLab's largest page
MAX_PAGE_NUMBER = 10**6
MAX_WAIT_HEADER_SECONDS = 10**9
MAX_USERNAME_CHARS = 255

NOT_FOUND_MESSAGE = "The merge request or project does not exist or is not visible."
TOKEN_REFUSED_MESSAGE = "GitLab refused the token; check GITLAB_TOKEN."  # noqa: S105  (a sentence)
TOKEN_NEEDED_MESSAGE = "GitLab asked for a token; set GITLAB_TOKEN to review this project."  # noqa: S105


class _Unset:
    """The default of `GitLabClient(token=...)`: the token of the settings."""


_UNSET: Final = _Unset()


@dataclass(frozen=True)
class GitLabResponse:
    """One answer: status, headers and the capped decoded body (a 3xx's is empty)."""

    status: int
    headers: httpx.Headers
    body: bytes

    def json(self) -> Any:
        """The body as strict JSON; a body that is not JSON is `GitLabUnavailable`."""
        try:
            return loads_strict(self.body)
        except ValueError:
            raise GitLabUnavailable("GitLab returned data that is not valid JSON.") from None


def _same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


def status_error(  # noqa: PLR0911  (one return per kind of answer)
    response: GitLabResponse, *, anonymous: bool, read: bool = True
) -> ReviewError:
    """The contract error of a non-2xx answer. `read`: the request read a project or a merge
    request, where GitLab's 403 means what its 404 does (not visible to this token)."""
    status = response.status
    if status in (404, 410) or (status == 403 and read):
        return PullRequestNotFound(NOT_FOUND_MESSAGE)
    if status == 401:
        return GitLabUnavailable(TOKEN_NEEDED_MESSAGE if anonymous else TOKEN_REFUSED_MESSAGE)
    if status == 429:
        wait = bounded_decimal(response.headers.get("retry-after", ""), MAX_WAIT_HEADER_SECONDS)
        when = "later" if wait is None or wait > 86_400 else f"in {wait} seconds"
        return GitLabUnavailable(f"GitLab's API rate limit was reached; try again {when}.")
    if 300 <= status < 400:
        return GitLabUnavailable("GitLab redirected the request; it was not followed.")
    if status == 403:
        return GitLabUnavailable("GitLab refused the request (status 403).")
    if status >= 500:
        return GitLabUnavailable(f"GitLab answered with a server error (status {status}).")
    return GitLabUnavailable(f"GitLab answered with an unexpected status ({status}).")


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    username: Annotated[str, StringConstraints(min_length=1, max_length=MAX_USERNAME_CHARS)]


class GitLabClient:
    """The process's GitLab API client (see the module docstring). Close it with `aclose()`.

    `token` defaults to `GITLAB_TOKEN`; `None` asks anonymously. `transport` is a test's.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        token: SecretStr | _Unset | None = _UNSET,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
    ) -> None:
        self.settings = settings
        self._token = settings.gitlab_token if isinstance(token, _Unset) else token
        self._origins = (httpx.URL(settings.gitlab_api_base), httpx.URL(settings.gitlab_server_url))
        self._transport = transport
        self._connections = max_connections or 2 * settings.pr_review_max_concurrent_reviews
        self._http: httpx.AsyncClient | None = None
        self._username: str | None = None
        self._lock = asyncio.Lock()

    @property
    def anonymous(self) -> bool:
        """Whether requests go without a token."""
        return self._token is None

    @property
    def token(self) -> SecretStr | None:
        """The client's token: git fetches the same merge request with the same identity."""
        return self._token

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the pooled connections."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _pool(self) -> httpx.AsyncClient:
        async with self._lock:
            if self._http is None:
                tls = await asyncio.to_thread(tls_context)
                # trust_env=False: no proxy, netrc or CA settings from the environment.
                self._http = httpx.AsyncClient(
                    verify=tls,
                    transport=self._transport,
                    trust_env=False,
                    follow_redirects=False,
                    timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_SECONDS),
                    limits=httpx.Limits(
                        max_connections=self._connections,
                        max_keepalive_connections=self._connections,
                        keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS,
                    ),
                )
            return self._http

    def api_url(self, path: str) -> str:
        """`GITLAB_API_URL` + `path` (which starts with `/`)."""
        return self.settings.gitlab_api_base + path

    def is_gitlab_url(self, url: httpx.URL) -> bool:
        """Whether `url` is on one of the two origins the token may reach."""
        return any(_same_origin(url, origin) for origin in self._origins)

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {
            "Accept": "application/json",
            "Accept-Encoding": ACCEPTED_ENCODINGS,
            "User-Agent": f"pr-review/{__version__}",
        }
        if has_body:
            headers["Content-Type"] = "application/json"
        if self._token is not None:
            headers["PRIVATE-TOKEN"] = self._token.get_secret_value()
        return headers

    async def request(
        self,
        method: str,
        url: str,
        *,
        json: object | None = None,
        params: Mapping[str, str] | None = None,
        limit: int = MAX_RESPONSE_BYTES,
    ) -> GitLabResponse:
        """One API request, never redirected; any status is returned (see `status_error`).

        Raises `GitLabUnavailable` for a URL off GitLab's origins, a network failure, a
        timeout, an oversized or corrupt 2xx body.
        """
        try:
            target = httpx.URL(url)
            if params:
                target = target.copy_merge_params(dict(params))
        except (httpx.InvalidURL, TypeError, ValueError):
            raise GitLabUnavailable("The GitLab request's URL is not valid.") from None
        if not self.is_gitlab_url(target) or target.userinfo:
            raise GitLabUnavailable("The request was for a host other than GitLab; not sent.")
        content = None if json is None else dumps_compact(json).encode("utf-8")
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                return await self._send(method, target, content, limit)
        except BodyTooLarge:
            raise GitLabUnavailable("GitLab's answer was larger than allowed.") from None
        except (BodyCorrupt, UnsupportedEncoding):
            raise GitLabUnavailable("GitLab's answer could not be decoded.") from None
        except (TimeoutError, httpx.TimeoutException):
            raise GitLabUnavailable("GitLab did not answer in time.") from None
        except (httpx.HTTPError, httpx.InvalidURL):
            raise GitLabUnavailable("GitLab could not be reached.") from None

    async def _send(
        self, method: str, target: httpx.URL, content: bytes | None, limit: int
    ) -> GitLabResponse:
        client = await self._pool()
        request = client.build_request(
            method, target, headers=self._headers(content is not None), content=content
        )
        response = await client.send(request, stream=True)
        try:
            logger.debug("GitLab API answered %d to %s", response.status_code, method)
            status = response.status_code
            body = b""
            if 200 <= status < 300:
                body = await read_capped(response, limit)
            elif status >= 400:
                body = await _error_body(response)
            return GitLabResponse(status, response.headers, body)
        finally:
            await response.aclose()

    async def get_json(self, url: str, *, params: Mapping[str, str] | None = None) -> Any:
        """The JSON of a GET answered 2xx; any other status is its `status_error`."""
        response = await self.request("GET", url, params=params)
        if not 200 <= response.status < 300:
            raise status_error(response, anonymous=self.anonymous)
        return response.json()

    async def paginated(self, url: str, *, max_pages: int) -> tuple[list[Any], bool]:
        """The items of a listing, `PER_PAGE` a page, following `X-Next-Page` for at most
        `max_pages` pages. Returns (items, complete): complete is False when pages remained."""
        items: list[Any] = []
        page = 1
        for _ in range(max_pages):
            params = {"per_page": str(PER_PAGE), "page": str(page)}
            response = await self.request("GET", url, params=params)
            if not 200 <= response.status < 300:
                raise status_error(response, anonymous=self.anonymous)
            chunk = response.json()
            if not isinstance(chunk, list):
                raise GitLabUnavailable("GitLab returned a listing that is not a list.")
            items.extend(chunk)
            following = _next_page(response.headers, page)
            if following is None:
                return items, True
            page = following
        return items, False

    async def username(self) -> str:
        """Our identity on GitLab (`GET /user`'s `username`), asked once per client."""
        if self._username is None:
            document = await self.get_json(self.api_url("/user"))
            try:
                self._username = _UserWire.model_validate(document).username
            except ValidationError:
                raise GitLabUnavailable("GitLab returned user data that is not valid.") from None
        return self._username


def _next_page(headers: httpx.Headers, page: int) -> int | None:
    """`X-Next-Page`: None on the last page (absent or empty); a page that does not move
    forward is refused, so a hostile header cannot loop a listing."""
    text = headers.get("x-next-page", "").strip()
    if not text:
        return None
    following = bounded_decimal(text, MAX_PAGE_NUMBER)
    if following is None or following <= page or following >= MAX_PAGE_NUMBER:
        raise GitLabUnavailable("GitLab's pagination headers are not valid.")
    return following


async def _error_body(response: httpx.Response) -> bytes:
    """A refusal's body for the caller to inspect (never for a message); unreadable: empty."""
    try:
        return await read_capped(response, MAX_ERROR_BODY_BYTES)
    except BodyError:
        return b""
