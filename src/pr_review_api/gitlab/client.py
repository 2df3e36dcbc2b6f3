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

from typing import Annotated, Any, ClassVar

import httpx
from pydantic import BaseModel, ConfigDict, StringConstraints

from pr_review_api.errors import GitLabUnavailable, ReviewError
from pr_review_api.http.body import bounded_decimal
from pr_review_api.http.origin_client import ApiResponse, Endpoints, OriginClient, RefusalWords
from pr_review_api.settings import Settings

MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # decoded; a page of 100 notes with long bodies fits
REQUEST_TIMEOUT_SECONDS = 30.0  # one request, answer included; callers may bound it further
PER_PAGE = 100  # GitLab's largest page
MAX_PAGE_NUMBER = 10**6
MAX_USERNAME_CHARS = 255

NOT_FOUND_MESSAGE = "The merge request or project does not exist or is not visible."
TOKEN_REFUSED_MESSAGE = "GitLab refused the token; check GITLAB_TOKEN."  # noqa: S105  (a sentence)
FORBIDDEN_MESSAGE = "GitLab refused the request (status 403)."
TOKEN_NEEDED_MESSAGE = "GitLab asked for a token; set GITLAB_TOKEN to review this project."  # noqa: S105


class GitLabResponse(ApiResponse):
    """One answer: status, headers and the capped decoded body (a 3xx's is empty)."""

    forge: ClassVar[str] = "GitLab"
    unavailable: ClassVar[type[GitLabUnavailable]] = GitLabUnavailable
    words: ClassVar[RefusalWords] = RefusalWords(
        NOT_FOUND_MESSAGE, TOKEN_NEEDED_MESSAGE, TOKEN_REFUSED_MESSAGE, FORBIDDEN_MESSAGE
    )


def status_error(response: GitLabResponse, *, anonymous: bool, read: bool = True) -> ReviewError:
    """The contract error of a non-2xx answer. `read`: the request read a project or a merge
    request, where GitLab's 403 means what its 404 does (not visible to this token)."""
    return response.refusal(anonymous=anonymous, hidden=read)


class _UserWire(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    username: Annotated[str, StringConstraints(min_length=1, max_length=MAX_USERNAME_CHARS)]


class GitLabClient(OriginClient[GitLabResponse]):
    """The process's GitLab API client (see the module docstring). Close it with `aclose()`.

    `token` defaults to `GITLAB_TOKEN`; `None` asks anonymously. `transport` is a test's.
    """

    response_type: ClassVar[type[GitLabResponse]] = GitLabResponse
    forbidden_hides: ClassVar[bool] = True  # a read's 403: not visible to this token
    max_response_bytes: ClassVar[int] = MAX_RESPONSE_BYTES
    request_timeout_seconds: ClassVar[float] = REQUEST_TIMEOUT_SECONDS

    _username: str | None = None  # asked once

    def _endpoints(self, settings: Settings) -> Endpoints:
        return Endpoints(
            settings.gitlab_token, settings.gitlab_api_base, settings.gitlab_server_url
        )

    def is_gitlab_url(self, url: httpx.URL) -> bool:
        """Whether `url` is on one of the two origins the token may reach."""
        return self._on_origins(url)

    def _token_header(self, token: str) -> tuple[str, str]:
        return "PRIVATE-TOKEN", token

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
        return await self._listing_page(url, {"per_page": str(PER_PAGE), "page": str(page)})

    async def username(self) -> str:
        """Our identity on GitLab (`GET /user`'s `username`), asked once per client."""
        if self._username is None:
            self._username = (await self._user(_UserWire)).username
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
