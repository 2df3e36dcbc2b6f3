"""The OpenAI-compatible chat-completions client: caps, deadline, error mapping.

One `ProviderClient` holds one pooled `httpx.AsyncClient`, shared by every review the process
runs. `complete()` sends one turn and returns the provider's JSON object. Every way it can fail
is one of the contract's errors:

    401, 403                                   OpenCodeAuthenticationFailed
    429                                        OpenCodeRateLimited(retry_after=N | None)
    any other non-2xx (3xx too: no redirects)  OpenCodeUnavailable
    refused, reset, truncated, any httpx error OpenCodeUnavailable
    the caller's deadline passed               ReviewTimeout
    2xx that is not a JSON object              InvalidModelResponse
    decoded body above 2 MiB                   UpstreamResponseTooLarge

Foreign exceptions are translated in exactly one place, `_map_exceptions()`, `from None`, so
no provider text rides along. Error bodies are never read. The body is decoded as it streams
and capped on its decoded size by the shared reader of `pr_review_api.http`, so neither a huge
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
from typing import Any, Self

import httpx

from pr_review_api.errors import (
    ConfigurationError,
    InvalidModelResponse,
    OpenCodeAuthenticationFailed,
    OpenCodeRateLimited,
    OpenCodeUnavailable,
    ReviewError,
    ReviewTimeout,
    UpstreamResponseTooLarge,
)
from pr_review_api.http import (
    ACCEPTED_ENCODINGS,
    BodyCorrupt,
    BodyTooLarge,
    UnsupportedEncoding,
    bounded_decimal,
    read_capped,
)
from pr_review_api.jsonutil import StrictJSONError, dumps_compact, loads_strict
from pr_review_api.settings import MAX_PROVIDER_RESPONSE_BYTES, Settings

logger = logging.getLogger(__name__)

MAX_RETRY_AFTER_SECONDS = 24 * 3600
# A hung connect should say "unavailable" long before a 300 s review deadline says "timeout".
CONNECT_TIMEOUT_SECONDS = 10.0
KEEPALIVE_EXPIRY_SECONDS = 30.0


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
    ) -> None:
        # A review has at most one request in flight; the slack covers connections still closing.
        connections = max_connections or 2 * settings.pr_review_max_concurrent_reviews
        self._settings = settings
        self._url = f"{settings.opencode_base_url}/chat/completions"
        self._client = httpx.AsyncClient(
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
    ) -> dict[str, Any]:
        """One provider turn, finished (body included) by `deadline`, a loop.time() value."""
        request = self._build_request(messages, tools)
        loop = asyncio.get_running_loop()
        started = loop.time()
        exchange = _Exchange()
        try:
            with _map_exceptions():
                async with asyncio.timeout_at(deadline):
                    body = await self._send(request, exchange)
                document = _parse_object(body)
            exchange.outcome = "ok"
            return document
        except ReviewError as exc:
            exchange.outcome = exc.code
            raise
        finally:
            _log_exchange(exchange, loop.time() - started)

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
        raise OpenCodeUnavailable() from None
    except (zlib.error, StrictJSONError):
        raise InvalidModelResponse("The model provider's response was not valid JSON.") from None


def _check_status(response: httpx.Response) -> None:
    status = response.status_code
    if status in (401, 403):
        raise OpenCodeAuthenticationFailed()
    if status == 429:
        raise OpenCodeRateLimited(retry_after=retry_after_seconds(response.headers))
    if not 200 <= status < 300:
        raise OpenCodeUnavailable(f"The model provider answered with HTTP status {status}.")


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
    """The shared capped reader (`pr_review_api.http`), its refusals as contract errors."""

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
