"""The part of a forge's API client that does not depend on the forge (GitHub, GitLab).

`ApiClient` holds one long-lived `httpx.AsyncClient` (no proxy, netrc or CA settings from the
environment, certifi's CA bundle, redirects never followed by httpx), made on first use and
shared by every review the process runs; it sends one request at a time with a streamed answer
whose body is read with the shared capped reader (`http/body.py`), and turns the reader's and
httpx's failures into the forge's own contract error with fixed sentences: a body, a token or a
URL never reaches a message or a log. What differs (its name and error, its headers and
credentials, which origins the token may reach, redirects, which bodies are read, paging) is
the subclass's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from types import TracebackType
from typing import ClassVar, Self, TypeVar

import httpx

from pr_review_api import __version__
from pr_review_api.errors import ReviewError
from pr_review_api.http.body import (
    ACCEPTED_ENCODINGS,
    BodyCorrupt,
    BodyError,
    BodyTooLarge,
    UnsupportedEncoding,
    read_capped,
    tls_context,
)
from pr_review_api.settings import Settings

CONNECT_TIMEOUT_SECONDS = 10.0
KEEPALIVE_EXPIRY_SECONDS = 30.0
MAX_WAIT_HEADER_SECONDS = 10**9
DEFAULT_RATE_LIMIT_WAIT_SECONDS = 60  # a rate limit that does not say how long
USER_AGENT = f"pr-review/{__version__}"

A = TypeVar("A", bound="ApiClient")


def same_origin(a: httpx.URL, b: httpx.URL) -> bool:
    """Whether two URLs share scheme, host and port: where a token may go is an origin."""
    return (a.scheme, a.host, a.port) == (b.scheme, b.host, b.port)


class ApiClient:
    """A forge's pooled API client (see the module docstring). Close it with `aclose()`.

    `http` lends an existing `httpx.AsyncClient` (a test's mock transport); it is not closed.
    Otherwise the pool is made on first use (loading the CA bundle off the event loop), with
    `transport` (a test's) and `max_connections` (default: two per concurrent review).
    """

    forge: ClassVar[str]  # the forge's name in sentences: "GitHub"
    unavailable: ClassVar[type[ReviewError]]  # the forge's contract error
    # Bytes of a refusal's body (4xx, 5xx) kept for the caller to inspect, never for a message
    # (GitLab's and Gitea's `message`); 0 reads none and keeps only a 2xx's.
    error_body_bytes: ClassVar[int] = 0

    def __init__(
        self,
        settings: Settings,
        *,
        http: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
    ) -> None:
        self.settings = settings
        self._http = http
        self._owned = http is None
        self._transport = transport
        self._connections = max_connections or 2 * settings.pr_review_max_concurrent_reviews
        self._lock = asyncio.Lock()
        self._logger = logging.getLogger(type(self).__module__)

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
        """Close the pooled connections (a lent client stays open)."""
        if self._owned and self._http is not None:
            await self._http.aclose()
            self._http = None

    async def _pool(self) -> httpx.AsyncClient:
        async with self._lock:
            if self._http is None:
                tls = await asyncio.to_thread(tls_context)
                # trust_env=False: no proxy, netrc or CA settings picked up from the
                # environment, as for git, whose environment is built from scratch too.
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

    @staticmethod
    def _plain_headers(
        accept: str, has_body: bool, forge_headers: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The headers of every request but its credentials, `forge_headers` after the
        encodings we accept."""
        headers = {"Accept": accept, "Accept-Encoding": ACCEPTED_ENCODINGS}
        headers.update(forge_headers or {})
        headers["User-Agent"] = USER_AGENT
        if has_body:
            headers["Content-Type"] = "application/json"
        return headers

    async def _send(
        self,
        client: httpx.AsyncClient,
        method: str,
        target: httpx.URL,
        headers: Mapping[str, str],
        content: bytes | None,
        limit: int,
    ) -> tuple[httpx.Response, bytes]:
        """One request with a streamed answer: the (closed) response and the body kept of it
        (`_body`). The caller maps failures (`_failures`)."""
        request = client.build_request(method, target, headers=headers, content=content)
        response = await client.send(request, stream=True)
        try:
            self._logger.debug("%s API answered %d to %s", self.forge, response.status_code, method)
            return response, await self._body(response, limit)
        finally:
            await response.aclose()

    async def _body(self, response: httpx.Response, limit: int) -> bytes:
        """The body kept of an answer: a 2xx's, capped at `limit`. With `error_body_bytes`,
        any answer under 400 is read so, and a refusal's capped at that, empty when unreadable;
        without, nothing but a 2xx's is read."""
        if not self.error_body_bytes:
            return await read_capped(response, limit) if 200 <= response.status_code < 300 else b""
        if response.status_code < 400:
            return await read_capped(response, limit)
        try:
            return await read_capped(response, self.error_body_bytes)
        except BodyError:
            return b""

    @contextlib.contextmanager
    def _failures(self) -> Iterator[None]:
        """The reader's and httpx's failures as the forge's error, in fixed sentences."""
        forge, error = self.forge, self.unavailable
        try:
            yield
        except BodyTooLarge:
            raise error(f"{forge}'s answer was larger than allowed.") from None
        except (BodyCorrupt, UnsupportedEncoding):
            raise error(f"{forge}'s answer could not be decoded.") from None
        except (TimeoutError, httpx.TimeoutException):
            raise error(f"{forge} did not answer in time.") from None
        except (httpx.HTTPError, httpx.InvalidURL):
            raise error(f"{forge} could not be reached.") from None


def try_again_when(wait: int | None) -> str:
    """When a rate-limited caller may try again, as a sentence's end: "later" past a day."""
    return "later" if wait is None or wait > 86_400 else f"in {wait} seconds"


def rate_limit_pause(wait: int | None, until: float) -> int | None:
    """The seconds to sleep out a rate limit that asked for `wait` (None: it did not say, so a
    minute), at least one; None when sleeping would pass `until` (a loop.time() value)."""
    seconds = DEFAULT_RATE_LIMIT_WAIT_SECONDS if wait is None else max(wait, 1)
    return None if asyncio.get_running_loop().time() + seconds > until else seconds


@contextlib.asynccontextmanager
async def lent_or_own(client: A | None, make: Callable[[], A]) -> AsyncIterator[A]:
    """`client` (lent: left open), or a short-lived one from `make`, closed at exit."""
    if client is not None:
        yield client
        return
    async with make() as own:
        yield own
