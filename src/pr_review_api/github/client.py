"""The one GitHub API client of a process: a pooled connection, pluggable credentials, caps.

`GitHubClient` is the shared pooled client (`http/api_client.py`: one long-lived
`httpx.AsyncClient`, no proxy, netrc or CA settings from the environment, certifi's CA bundle,
redirects never followed by httpx) shared by every review the process runs (or by one job),
bound to the `Credentials` (`github/credentials.py:
credentials_for`), which supply the token of each request and the publishing identity: a
client is one identity on GitHub, so its callers never say on whose behalf they ask. Every
request goes to `GITHUB_API_URL`'s origin and nowhere else: a URL on another origin (a `Link`
header, a redirect) is refused, so the token reaches only GitHub. Every body is read with the
shared capped reader (`http/body.py`), so a gzip bomb costs no more memory here than from the
provider.

`fetch_metadata` asks `GET {GITHUB_API_URL}/repos/{owner}/{repo}/pulls/{number}` for the two
commits a review is pinned to. The answer is untrusted: its size is capped here, and its JSON
is validated strictly in `github/metadata.py` before anything reaches git. Response bodies
never reach an error message or a log.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import httpx
from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from pr_review_api.errors import GitHubUnavailable, PullRequestNotFound
from pr_review_api.fetch.metadata import MAX_METADATA_RESPONSE_BYTES, PullRequestMetadata
from pr_review_api.github.credentials import Credentials, credentials_for
from pr_review_api.github.metadata import parse_metadata
from pr_review_api.github.urls import (
    PullRequestRef,
)
from pr_review_api.http.api_client import (
    MAX_WAIT_HEADER_SECONDS,
    ApiClient,
    same_origin,
    try_again_when,
)
from pr_review_api.http.body import bounded_decimal
from pr_review_api.jsonutil import dumps_compact
from pr_review_api.settings import Settings

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # any other API answer (a page of reviews or comments)
METADATA_TIMEOUT_SECONDS = 30.0
MAX_REDIRECTS = 3
GITHUB_API_VERSION = "2022-11-28"

_REDIRECTS = frozenset({301, 302, 303, 307, 308})


@dataclass(frozen=True)
class GitHubResponse:
    """One answer: status, headers and, for a 2xx, the capped decoded body (else empty)."""

    status: int
    headers: httpx.Headers
    body: bytes
    url: httpx.URL


def _seconds_header(headers: httpx.Headers, name: str) -> int | None:
    return bounded_decimal(headers.get(name, ""), MAX_WAIT_HEADER_SECONDS)


def rate_limit_wait(headers: httpx.Headers, now: float | None = None) -> int | None:
    """Seconds GitHub asks to wait: `Retry-After`, else until `x-ratelimit-reset`; None: unsaid."""
    retry_after = _seconds_header(headers, "retry-after")
    if retry_after is not None:
        return retry_after
    reset = _seconds_header(headers, "x-ratelimit-reset")
    clock = time.time() if now is None else now
    return None if reset is None else max(0, reset - int(clock))


def is_rate_limited(status: int, headers: httpx.Headers) -> bool:
    """A primary or secondary rate limit: 429, or 403 with the limit's headers."""
    return status == 429 or (
        status == 403
        and (
            headers.get("x-ratelimit-remaining") == "0"
            or "retry-after" in headers
            or "x-ratelimit-reset" in headers
        )
    )


def _status_error(response: GitHubResponse, *, anonymous: bool) -> Exception:
    status = response.status
    if status in (404, 410):
        return PullRequestNotFound()
    if is_rate_limited(status, response.headers):
        when = try_again_when(rate_limit_wait(response.headers))
        hint = " (setting GITHUB_TOKEN raises the limit)" if anonymous else ""
        return GitHubUnavailable(f"GitHub's API rate limit was reached; try again {when}{hint}.")
    if status == 401:
        return GitHubUnavailable("GitHub rejected the credentials; check GITHUB_TOKEN.")
    if status == 403:
        return GitHubUnavailable("GitHub refused access to the pull request.")
    if status >= 500:
        return GitHubUnavailable(f"GitHub answered with a server error (status {status}).")
    return GitHubUnavailable(f"GitHub answered with an unexpected status ({status}).")


class GitHubClient(ApiClient):
    """The process's GitHub API client (see the module docstring). Close it with `aclose()`.

    `http` lends an existing `httpx.AsyncClient` (a test's mock transport); it is not closed.
    Otherwise the pool is made on first use (loading the CA bundle off the event loop).
    """

    forge: ClassVar[str] = "GitHub"
    unavailable: ClassVar[type[GitHubUnavailable]] = GitHubUnavailable

    def __init__(
        self,
        settings: Settings,
        *,
        credentials: Credentials | None = None,
        http: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
    ) -> None:
        super().__init__(settings, http=http, transport=transport, max_connections=max_connections)
        self.credentials = credentials or credentials_for(settings)
        self._origin = httpx.URL(settings.github_api_url)
        self._login: str | None = None

    def api_url(self, path: str) -> httpx.URL:
        """`GITHUB_API_URL` + `path` (which starts with `/`)."""
        return httpx.URL(self.settings.github_api_url + path)

    def is_api_url(self, url: httpx.URL) -> bool:
        """Whether `url` is on `GITHUB_API_URL`'s origin, the only one the token may reach."""
        return same_origin(url, self._origin)

    async def _headers(self, has_body: bool) -> dict[str, str]:
        headers = self._plain_headers(
            "application/vnd.github+json",
            has_body,
            {"X-GitHub-Api-Version": GITHUB_API_VERSION},
        )
        token = await self.credentials.token()
        if token is not None:
            headers["Authorization"] = f"Bearer {token.get_secret_value()}"
        return headers

    async def request(
        self,
        method: str,
        url: httpx.URL | str,
        *,
        json_body: Mapping[str, Any] | None = None,
        limit: int = MAX_RESPONSE_BYTES,
    ) -> GitHubResponse:
        """One API request; same-origin redirects of a GET are followed (a renamed repository).

        Raises `GitHubUnavailable` for a refused URL, a network failure, an oversized or
        corrupt body; the caller bounds the time (`asyncio.timeout`). Non-2xx bodies are never
        read.
        """
        target = httpx.URL(url)
        content = None if json_body is None else dumps_compact(json_body).encode("utf-8")
        with self._failures():
            client = await self._pool()
            headers = await self._headers(content is not None)
            for _ in range(MAX_REDIRECTS + 1):
                if not self.is_api_url(target):
                    raise GitHubUnavailable(
                        "GitHub redirected the request to another host; it was not followed."
                    )
                response, body = await self._send(client, method, target, headers, content, limit)
                location = response.headers.get("location")
                if method == "GET" and response.status_code in _REDIRECTS and location is not None:
                    target = target.join(location)
                    continue
                return GitHubResponse(response.status_code, response.headers, body, response.url)
        raise GitHubUnavailable("GitHub redirected the request too many times.")

    async def pull_metadata(self, ref: PullRequestRef) -> PullRequestMetadata:
        """The pull request's base and head commits, base branch, title and body."""
        response = await self.request(
            "GET", ref.api_url(self.settings), limit=MAX_METADATA_RESPONSE_BYTES
        )
        if response.status != 200:
            anonymous = await self.credentials.token() is None
            raise _status_error(response, anonymous=anonymous)
        return parse_metadata(response.body, ref)

    async def login(self) -> str:
        """The publishing identity (specification §10): `<slug>[bot]`, the token's login, or
        `github-actions[bot]` for a workflow token, which may not read `/user`."""
        if self._login is None:
            login = await self.credentials.app_login()
            if login is None:
                response = await self.request("GET", self.api_url("/user"), limit=256 * 1024)
                login = _login_of(response) or "github-actions[bot]"
            self._login = login
        return self._login


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    login: Annotated[str, StringConstraints(min_length=1, max_length=64)]


def _login_of(response: GitHubResponse) -> str | None:
    if response.status != 200:
        return None
    try:
        return _UserWire.model_validate_json(response.body).login
    except ValidationError:
        return None


async def fetch_metadata(
    ref: PullRequestRef,
    settings: Settings,
    client: GitHubClient | httpx.AsyncClient | None = None,
) -> PullRequestMetadata:
    """The pull request's metadata through `client` (a short-lived one when None)."""
    try:
        async with asyncio.timeout(METADATA_TIMEOUT_SECONDS):
            if isinstance(client, GitHubClient):
                return await client.pull_metadata(ref)
            async with GitHubClient(settings, http=client) as github:
                return await github.pull_metadata(ref)
    except TimeoutError:
        raise GitHubUnavailable("GitHub did not answer in time.") from None
