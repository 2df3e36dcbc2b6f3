"""The GitLab REST v4 client of a process (specification §17): one pooled connection, the token,
caps.

`GitLabClient` is the shared pooled client (`http/api_client.py`: one long-lived
`httpx.AsyncClient`, no proxy, netrc or CA settings from the environment, certifi's CA bundle,
redirects never followed), shared by every review that uses it.
The token (`GITLAB_TOKEN`) goes as `PRIVATE-TOKEN` and only to the origins of `GITLAB_API_URL`
and `GITLAB_SERVER_URL`: a request for any other origin is refused before it is sent, and a
redirect is answered as a failure, never followed, so the token never leaves those two hosts.
Every body is read with the shared capped reader (`http/body.py`).

Failures are contract errors with fixed sentences (`status_error`): a body, a token or a URL
never reaches a message or a log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final

import httpx
from pydantic import BaseModel, ConfigDict, SecretStr, StringConstraints, ValidationError

from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound, ReviewError
from pr_review_api.http.api_client import (
    MAX_WAIT_HEADER_SECONDS,
    ApiClient,
    same_origin,
    try_again_when,
)
from pr_review_api.http.body import bounded_decimal
from pr_review_api.jsonutil import dumps_compact, loads_strict
from pr_review_api.settings import Settings

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # decoded; a page of 100 notes with long bodies fits
REQUEST_TIMEOUT_SECONDS = 30.0  # one request, answer included; callers may bound it further
PER_PAGE = 100  # GitLab's largest page
MAX_PAGE_NUMBER = 10**6
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
        when = try_again_when(
            bounded_decimal(response.headers.get("retry-after", ""), MAX_WAIT_HEADER_SECONDS)
        )
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


class GitLabClient(ApiClient):
    """The process's GitLab API client (see the module docstring). Close it with `aclose()`.

    `token` defaults to `GITLAB_TOKEN`; `None` asks anonymously. `transport` is a test's.
    """

    forge: ClassVar[str] = "GitLab"
    unavailable: ClassVar[type[GitLabUnavailable]] = GitLabUnavailable
    error_body_bytes: ClassVar[int] = 64 * 1024  # a refusal's `message`, read for the caller

    def __init__(
        self,
        settings: Settings,
        *,
        token: SecretStr | _Unset | None = _UNSET,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
    ) -> None:
        super().__init__(settings, transport=transport, max_connections=max_connections)
        self._token = settings.gitlab_token if isinstance(token, _Unset) else token
        self._origins = (httpx.URL(settings.gitlab_api_base), httpx.URL(settings.gitlab_server_url))
        self._username: str | None = None

    @property
    def anonymous(self) -> bool:
        """Whether requests go without a token."""
        return self._token is None

    @property
    def token(self) -> SecretStr | None:
        """The client's token: git fetches the same merge request with the same identity."""
        return self._token

    def api_url(self, path: str) -> str:
        """`GITLAB_API_URL` + `path` (which starts with `/`)."""
        return self.settings.gitlab_api_base + path

    def is_gitlab_url(self, url: httpx.URL) -> bool:
        """Whether `url` is on one of the two origins the token may reach."""
        return any(same_origin(url, origin) for origin in self._origins)

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = self._plain_headers("application/json", has_body)
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
        with self._failures():
            async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
                client = await self._pool()
                headers = self._headers(content is not None)
                response, body = await self._send(client, method, target, headers, content, limit)
                return GitLabResponse(response.status_code, response.headers, body)

    async def get_json(self, url: str, *, params: Mapping[str, str] | None = None) -> Any:
        """The JSON of a GET answered 2xx; any other status is its `status_error`."""
        response = await self.request("GET", url, params=params)
        if not 200 <= response.status < 300:
            raise status_error(response, anonymous=self.anonymous)
        return response.json()

    async def paginated(
        self, url: str, *, max_pages: int, ends: bool = False
    ) -> tuple[list[Any], bool]:
        """The items of a listing, `PER_PAGE` a page, following `X-Next-Page` for at most
        `max_pages` pages. Returns (items, complete): complete is False when pages remained.

        `ends`: for a listing GitLab gives only oldest first (discussions, award emoji), a
        longer one is read at both ends: the first page, then the newest `max_pages - 1`
        pages (`X-Total-Pages`), so a flood in the middle hides neither what came first nor
        what came last. Without `X-Total-Pages` (GitLab leaves it out past 10,000 items) the
        pages are read in order."""
        items, response = await self._page(url, 1)
        following = _next_page(response.headers, 1)
        total = _total_pages(response.headers) if ends else None
        if following is not None and total is not None and total > max_pages:
            for page in range(total - max_pages + 2, total + 1):
                items += (await self._page(url, page))[0]
            return items, False
        for _ in range(max_pages - 1):
            if following is None:
                return items, True
            chunk, response = await self._page(url, following)
            items += chunk
            following = _next_page(response.headers, following)
        return items, following is None

    async def _page(self, url: str, page: int) -> tuple[list[Any], GitLabResponse]:
        """One page of a listing, and its response (for the pagination headers)."""
        params = {"per_page": str(PER_PAGE), "page": str(page)}
        response = await self.request("GET", url, params=params)
        if not 200 <= response.status < 300:
            raise status_error(response, anonymous=self.anonymous)
        chunk = response.json()
        if not isinstance(chunk, list):
            raise GitLabUnavailable("GitLab returned a listing that is not a list.")
        return chunk, response

    async def username(self) -> str:
        """Our identity on GitLab (`GET /user`'s `username`), asked once per client."""
        if self._username is None:
            document = await self.get_json(self.api_url("/user"))
            try:
                self._username = _UserWire.model_validate(document).username
            except ValidationError:
                raise GitLabUnavailable("GitLab returned user data that is not valid.") from None
        return self._username


def _total_pages(headers: httpx.Headers) -> int | None:
    """`X-Total-Pages`, or None when absent or not a page number."""
    total = bounded_decimal(headers.get("x-total-pages", "").strip(), MAX_PAGE_NUMBER)
    return total if total is not None and 0 < total < MAX_PAGE_NUMBER else None


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
