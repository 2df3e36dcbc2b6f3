"""The OpenAI-compatible chat-completions client: caps, deadline, error mapping.

One `ProviderClient` holds one pooled `httpx.AsyncClient`, shared by every review the process
runs. It is the OpenAI chat-completions `ModelClient` (`llm/client.py`): `complete()` sends one
turn and returns a provider-neutral `Turn` after the envelope checks (`llm/envelope.py`);
`request()` returns the provider's JSON object itself. Every way it can fail is one of the
contract's errors:

    401, 403                                   OpenCodeAuthenticationFailed
    429                                        OpenCodeRateLimited(retry_after=N | None)
    any other non-2xx (3xx too: no redirects)  OpenCodeUnavailable
    refused, reset, truncated, any httpx error OpenCodeUnavailable
    the caller's deadline passed               ReviewTimeout
    2xx that is not a JSON object              InvalidModelResponse
    decoded body above 2 MiB                   UpstreamResponseTooLarge

Retries (specification §12): a 429, a 5xx or a network failure is sent again up to
`OPENCODE_MAX_RETRIES` times, after an exponential backoff with full jitter (tenacity), or after
the provider's `Retry-After` when it gave one. A wait that would end past the review's deadline,
or a `Retry-After` above 10 s, is not waited for: the last error is raised at once.

Foreign exceptions are translated in exactly one place, `_map_exceptions()`, `from None`, so
no provider text rides along. Error bodies are never read. The body is decoded as it streams
and capped on its decoded size by the shared reader of `pr_review_api.http.body`, so neither a huge
body nor a gzip bomb is ever held in memory past the cap.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx
import tenacity

from pr_review_api.errors import (
    ConfigurationError,
    InvalidModelResponse,
    OpenCodeAuthenticationFailed,
    OpenCodeRateLimited,
    OpenCodeUnavailable,
    ProviderError,
    ReviewError,
    ReviewTimeout,
    UpstreamResponseTooLarge,
)
from pr_review_api.http.body import (
    ACCEPTED_ENCODINGS,
    BodyCorrupt,
    BodyTooLarge,
    UnsupportedEncoding,
    bounded_decimal,
    read_capped,
    tls_context,
)
from pr_review_api.jsonutil import StrictJSONError, dumps_compact, loads_strict
from pr_review_api.llm.envelope import turn_from_envelope
from pr_review_api.llm.turn import Turn
from pr_review_api.settings import MAX_PROVIDER_RESPONSE_BYTES, Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

logger = logging.getLogger(__name__)

MAX_RETRY_AFTER_SECONDS = 24 * 3600
# A hung connect should say "unavailable" long before a 300 s review deadline says "timeout".
CONNECT_TIMEOUT_SECONDS = 10.0
KEEPALIVE_EXPIRY_SECONDS = 30.0
# Retries: a Retry-After above this is returned to the caller rather than waited for.
MAX_WAITED_RETRY_AFTER_SECONDS = 10
RETRY_BACKOFF_SECONDS = 0.5  # the first retry waits up to this long (full jitter)
RETRY_MAX_BACKOFF_SECONDS = 8.0


@dataclass
class _Exchange:
    """What the request's log line may say: never headers, bodies or the key."""

    status: int | None = None
    size: int = 0
    outcome: str = "cancelled"  # unless it ends in an answer or a contract error


class ProviderClient:
    """Sends chat-completions turns to the configured OpenAI-compatible provider."""

    def __init__(
        self,
        settings: Settings,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        max_connections: int | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        # A review has at most one request in flight; the slack covers connections still closing.
        connections = max_connections or 2 * settings.pr_review_max_concurrent_reviews
        self._settings = settings
        self._metrics = metrics  # counts each exchange's outcome and each turn's tokens
        self._url = f"{settings.opencode_base_url}/chat/completions"
        self._client = httpx.AsyncClient(
            # One context for the process (pr_review_api.http.body): a client is made per review
            # (the CLI, a job), and httpx would load the CA bundle again for each.
            verify=tls_context(),
            transport=transport,
            limits=httpx.Limits(
                max_connections=connections,
                max_keepalive_connections=connections,
                keepalive_expiry=KEEPALIVE_EXPIRY_SECONDS,
            ),
            # The caller's deadline bounds everything else: a model may think for minutes.
            timeout=httpx.Timeout(None, connect=CONNECT_TIMEOUT_SECONDS),
            follow_redirects=False,
            trust_env=False,
        )

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
        await self._client.aclose()

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
    ) -> Turn:
        """The model's next turn (envelope checks 1 to 3 applied), finished by `deadline`."""
        turn = turn_from_envelope(await self.request(messages, tools, deadline=deadline))
        if self._metrics is not None:
            self._metrics.count_tokens(turn.usage)
        return turn

    async def request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], *, deadline: float
    ) -> dict[str, Any]:
        """The provider's JSON object for one turn, transient failures retried by `deadline`."""
        retrying = tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self._settings.opencode_max_retries + 1)
            | _WaitPastDeadline(deadline),
            wait=_retry_wait,
            retry=tenacity.retry_if_exception(lambda exc: _retryable(exc, deadline)),
            before_sleep=_log_retry,
            reraise=True,
        )
        try:
            return await retrying(self._attempt, messages, tools, deadline)
        except _Transient as exc:
            raise exc.error from None

    async def _attempt(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], deadline: float
    ) -> dict[str, Any]:
        """One HTTP exchange, finished (body included) by `deadline`, a loop.time() value."""
        request = self._build_request(messages, tools)
        loop = asyncio.get_running_loop()
        started = loop.time()
        exchange = _Exchange()
        try:
            with _map_exceptions():
                async with asyncio.timeout_at(deadline):
                    body = await self._send(request, exchange)
                # Up to 2 MiB through Python hooks (duplicate keys, floats): off the loop.
                document = await asyncio.to_thread(_parse_object, body)
            exchange.outcome = "ok"
            return document
        except ReviewError as exc:
            exchange.outcome = exc.code
            raise
        except _Transient as exc:
            exchange.outcome = exc.error.code
            raise
        finally:
            _log_exchange(exchange, loop.time() - started)
            if self._metrics is not None:
                self._metrics.provider_request(exchange.outcome)

    def _build_request(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> httpx.Request:
        payload = {
            "model": self._settings.opencode_model,
            "messages": messages,
            "tools": tools,
            "tool_choice": "auto",
        }
        return self._client.build_request(
            "POST",
            self._url,
            content=dumps_compact(payload).encode("utf-8"),
            headers={
                "Authorization": f"Bearer {_provider_key(self._settings)}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "Accept-Encoding": ACCEPTED_ENCODINGS,
            },
        )

    async def _send(self, request: httpx.Request, exchange: _Exchange) -> bytes:
        response = await self._client.send(request, stream=True)
        try:
            exchange.status = response.status_code
            _check_status(response)
            _check_headers(response.headers)
            return await _read_capped(response, exchange)
        finally:
            # Unread error bodies are discarded with the connection, never drained into memory.
            await response.aclose()


def _provider_key(settings: Settings) -> str:
    key = settings.require_provider_key().get_secret_value()
    # httpx would fail deep inside header encoding, with part of the key in its message.
    if not (key.isascii() and key.isprintable()):
        raise ConfigurationError("OPENCODE_API_KEY must be printable ASCII.")
    return key


@contextlib.contextmanager
def _map_exceptions() -> Iterator[None]:
    """The one place foreign exceptions become contract errors; `from None` drops their text."""
    try:
        yield
    except TimeoutError:
        raise ReviewTimeout() from None
    except httpx.HTTPError:
        raise _Transient(OpenCodeUnavailable()) from None  # a network failure
    except (zlib.error, StrictJSONError):
        raise InvalidModelResponse("The model provider's response was not valid JSON.") from None


def _check_status(response: httpx.Response) -> None:
    status = response.status_code
    if status in (401, 403):
        raise OpenCodeAuthenticationFailed()
    if status == 429:
        retry_after = retry_after_seconds(response.headers)
        raise _Transient(OpenCodeRateLimited(retry_after=retry_after), retry_after)
    if status >= 500:
        message = f"The model provider answered with HTTP status {status}."
        raise _Transient(OpenCodeUnavailable(message), retry_after_seconds(response.headers))
    if status == 404:
        raise OpenCodeUnavailable(
            "The model provider answered with HTTP status 404: check OPENCODE_BASE_URL; it "
            "should be the API base (often ending in /v1), without /chat/completions."
        )
    if not 200 <= status < 300:
        raise OpenCodeUnavailable(f"The model provider answered with HTTP status {status}.")


class _Transient(Exception):
    """Carries a contract error another attempt may cure (429, 5xx, network); never escapes."""

    def __init__(self, error: ProviderError, retry_after: int | None = None) -> None:
        super().__init__(error.code)
        self.error = error
        self.retry_after = retry_after


def _retryable(exc: BaseException, deadline: float) -> bool:
    """Transient failures, unless the provider asked for a wait we will not make."""
    if not isinstance(exc, _Transient):
        return False
    if exc.retry_after is None:
        return True
    left = deadline - asyncio.get_running_loop().time()
    return exc.retry_after <= MAX_WAITED_RETRY_AFTER_SECONDS and exc.retry_after < left


def _retry_after_of(exc: BaseException | None) -> int | None:
    return exc.retry_after if isinstance(exc, _Transient) else None


_backoff = tenacity.wait_random_exponential(
    multiplier=RETRY_BACKOFF_SECONDS, max=RETRY_MAX_BACKOFF_SECONDS
)


def _retry_wait(state: tenacity.RetryCallState) -> float:
    """The provider's Retry-After when it gave one, else exponential backoff with jitter."""
    exc = state.outcome.exception() if state.outcome is not None else None
    retry_after = _retry_after_of(exc)
    return float(retry_after) if retry_after is not None else _backoff(state)


class _WaitPastDeadline(tenacity.stop.stop_base):
    """Stop rather than sleep into the deadline: the caller gets the provider's error."""

    def __init__(self, deadline: float) -> None:
        self._deadline = deadline

    def __call__(self, state: tenacity.RetryCallState) -> bool:
        left = self._deadline - asyncio.get_running_loop().time()
        return state.upcoming_sleep >= left


def _log_retry(state: tenacity.RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome is not None else None
    code = exc.error.code if isinstance(exc, _Transient) else "unknown"
    logger.info(
        "provider request retried: attempt=%d after=%s wait_ms=%d",
        state.attempt_number,
        code,
        round(state.upcoming_sleep * 1000),
    )


def _check_headers(headers: httpx.Headers) -> None:
    media_type = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media_type != "application/json":
        raise InvalidModelResponse("The model provider's response was not JSON.")
    # Refuse at once rather than stream 2 MiB first. The length counts encoded bytes; a
    # compressed body over the cap could decode to less only by compression's few bytes of
    # framing, so no real answer is lost.
    declared = bounded_decimal(headers.get("content-length", ""), MAX_PROVIDER_RESPONSE_BYTES + 1)
    if declared is not None and declared > MAX_PROVIDER_RESPONSE_BYTES:
        raise UpstreamResponseTooLarge()


def retry_after_seconds(headers: httpx.Headers) -> int | None:
    """A numeric Retry-After, clamped to a day; None when absent, a date or junk."""
    value = headers.get("retry-after")
    return None if value is None else bounded_decimal(value, MAX_RETRY_AFTER_SECONDS)


async def _read_capped(response: httpx.Response, exchange: _Exchange) -> bytes:
    """The shared capped reader (`pr_review_api.http.body`), its refusals as contract errors."""

    def count(size: int) -> None:
        exchange.size = size

    try:
        return await read_capped(response, MAX_PROVIDER_RESPONSE_BYTES, progress=count)
    except BodyTooLarge:
        raise UpstreamResponseTooLarge() from None
    except UnsupportedEncoding:
        raise InvalidModelResponse(
            "The model provider's response used an unsupported content encoding."
        ) from None
    except BodyCorrupt:
        message = "The model provider's compressed response was corrupt."
        raise InvalidModelResponse(message) from None


def _parse_object(body: bytes) -> dict[str, Any]:
    document = loads_strict(body)
    if not isinstance(document, dict):
        raise InvalidModelResponse("The model provider's response was not a JSON object.")
    return document


def _log_exchange(exchange: _Exchange, seconds: float) -> None:
    logger.info(
        "provider request: status=%s bytes=%d duration_ms=%d outcome=%s",
        exchange.status,
        exchange.size,
        round(seconds * 1000),
        exchange.outcome,
    )
