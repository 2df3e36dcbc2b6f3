"""The HTTP service: a thin FastAPI shell over `run_review()` (CONTRACT section 5).

A request passes, outermost first:

    _AccessLog    one structured log line per request; an unexpected exception becomes the
                  fixed 500 `internal_error` body here, logged without its message
    _ServiceKeys  `Authorization: Bearer <key>` on every /v1 request when keys are configured
    _BodyLimit    bodies above MAX_REQUEST_BODY_BYTES are refused while they stream
    FastAPI       body validation (422 `invalid_request`), the review slots, run_review()

`error_response()` is the one place a `ReviewError` becomes a status, headers and the
contract's error document; the exception handlers and the middlewares all go through it.
Keys and tokens never reach a log line or a response.
"""

from __future__ import annotations

import hmac
import logging
import math
import time
import traceback
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from pathlib import PurePath
from typing import Annotated, Any, Protocol

import uvicorn
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pr_review_api import __version__
from pr_review_api.errors import (
    InvalidRequest,
    OpenCodeRateLimited,
    ReviewError,
    ServerBusy,
    Unauthorized,
)
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop.run import PullRequestTarget, run_review
from pr_review_api.model import ReviewResult
from pr_review_api.output.formats import render_json
from pr_review_api.settings import Settings, load_settings

logger = logging.getLogger(__name__)
access_logger = logging.getLogger("pr_review_api.access")

MAX_REQUEST_BODY_BYTES = 64 * 1024
MAX_DRAINED_BYTES = 1024 * 1024
# Past the review deadline, a review in flight has already failed with review_timeout; the
# slack lets that answer reach the client before a shutdown gives up on the connection.
SHUTDOWN_SLACK_SECONDS = 10
MAX_LOGGED_PATH_CHARS = 200
_ERROR_CODE_KEY = "pr_review_error_code"


class Reviewer(Protocol):
    """What the service calls to review a pull request: `run_review`, or a test's stand-in."""

    def __call__(
        self,
        target: PullRequestTarget,
        settings: Settings,
        *,
        include_trace: bool,
        provider: ProviderClient | None,
    ) -> Awaitable[ReviewResult]: ...


# --- documents ------------------------------------------------------------------------------


class ReviewRequest(BaseModel):
    """The body of `POST /v1/reviews`: no other fields, no type coercion."""

    model_config = ConfigDict(extra="forbid", strict=True)

    pull_request_url: str = Field(
        description="A pull request on the configured GitHub host.",
        examples=["https://github.com/acme/widget/pull/7"],
    )
    include_trace: bool = Field(
        default=False, description="Return the per-round trace with the review."
    )


class ErrorDetail(BaseModel):
    """What went wrong, as a stable code and a fixed sentence."""

    code: str = Field(description="A stable error code (CONTRACT section 5).")
    message: str = Field(description="A short fixed sentence; never provider text or secrets.")
    retry_after: int | None = Field(
        default=None, description="Seconds the provider asked to wait (opencode_rate_limited)."
    )


class ErrorDocument(BaseModel):
    """Every failure, whatever its status."""

    error: ErrorDetail
    termination_reason: str | None = Field(
        description="The loop's termination reason when it ran and ended without a review."
    )
    trace: None = Field(description="Always null: a failed review returns no trace.")


class Health(BaseModel):
    """The liveness answer."""

    status: str = Field(examples=["ok"])


def _documented(description: str, **extra: Any) -> dict[str, Any]:
    return {"model": ErrorDocument, "description": description, **extra}


_RETRY_AFTER_HEADER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying (always set for server_busy).",
        "schema": {"type": "integer"},
    }
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: _documented("`unauthorized`: a service key is required and was missing or wrong."),
    404: _documented("`pull_request_not_found`, or `invalid_request` for an unknown path."),
    413: _documented("`invalid_request`: the body exceeds 64 KiB."),
    422: _documented("`invalid_request` (body not the schema) or `invalid_pull_request_url`."),
    500: _documented("`internal_error` or `configuration_error`."),
    502: _documented(
        "`github_unavailable`, `opencode_authentication_failed`, `opencode_unavailable`, or a "
        "termination reason: `max_rounds`, `max_tool_calls`, `invalid_tool_call`, "
        "`invalid_model_response`, `upstream_response_too_large`, `unsupported_finish_reason`."
    ),
    503: _documented(
        "`opencode_rate_limited` or `server_busy`, with Retry-After when known.",
        headers=_RETRY_AFTER_HEADER,
    ),
    504: _documented("`review_timeout`: the review outlasted REVIEW_TIMEOUT_SECONDS."),
}


# --- the one error mapping ------------------------------------------------------------------


class ContractJSONResponse(JSONResponse):
    """JSON serialized exactly as `pr-review review --format json` prints it."""

    def render(self, content: Any) -> bytes:
        return render_json(content).encode("utf-8")


def error_response(
    exc: ReviewError,
    scope: Scope,
    *,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """The contract's answer to `exc`; remembers its code for the access log."""
    scope.setdefault("state", {})[_ERROR_CODE_KEY] = exc.code
    extra = dict(headers or {})
    if isinstance(exc, OpenCodeRateLimited | ServerBusy) and exc.retry_after is not None:
        extra["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, Unauthorized):
        extra["WWW-Authenticate"] = "Bearer"
    return ContractJSONResponse(exc.to_body(), status_code=status or exc.status, headers=extra)


class _InternalError(ReviewError):
    """Anything the error tree does not name: a fixed body, no details."""

    default_message = "The server failed unexpectedly."


_REQUEST_FIELDS = frozenset(ReviewRequest.model_fields)


def _invalid_request(exc: RequestValidationError) -> InvalidRequest:
    """A fixed sentence for the first problem; a client's own field names are never echoed."""
    errors = exc.errors()
    first: Mapping[str, Any] = errors[0] if errors else {}
    location = tuple(first.get("loc", ()))
    field = location[1] if len(location) > 1 and location[1] in _REQUEST_FIELDS else None
    kind = first.get("type")
    if kind == "extra_forbidden":
        return InvalidRequest("The request body may hold only pull_request_url and include_trace.")
    if kind == "missing" and field is not None:
        return InvalidRequest(f"The request body is missing {field}.")
    if field == "pull_request_url":
        return InvalidRequest("pull_request_url must be a string.")
    if field == "include_trace":
        return InvalidRequest("include_trace must be a boolean.")
    return InvalidRequest("The request body must be a JSON object.")


async def _on_review_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ReviewError)
    return error_response(exc, request.scope)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return error_response(_invalid_request(exc), request.scope)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    messages = {404: "There is no such endpoint.", 405: "The method is not allowed here."}
    error = InvalidRequest(messages.get(exc.status_code, "The request was not accepted."))
    return error_response(error, request.scope, status=exc.status_code, headers=exc.headers)


# --- middlewares ----------------------------------------------------------------------------


class _AccessLog:
    """One log line per request: method, path, status, duration, error code. No bodies,
    headers, query strings or client addresses."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        except Exception as exc:
            _log_unexpected(scope, exc)
            if status == 0:
                await error_response(_InternalError(), scope)(scope, receive, send_and_note)
        finally:
            _log_access(scope, status, time.perf_counter() - started)


def _loggable_path(scope: Scope) -> str:
    # The path is the client's: escape it so it cannot forge log lines, and bound it.
    path = str(scope.get("path", ""))[:MAX_LOGGED_PATH_CHARS]
    return path.encode("unicode_escape").decode("ascii")


def _log_access(scope: Scope, status: int, seconds: float) -> None:
    fields = {
        "method": str(scope.get("method", "")),
        "path": _loggable_path(scope),
        "status": status,
        "duration_ms": round(seconds * 1000),
        "code": scope.get("state", {}).get(_ERROR_CODE_KEY) or "-",
    }
    access_logger.info(
        "method=%(method)s path=%(path)s status=%(status)d duration_ms=%(duration_ms)d "
        "code=%(code)s",
        fields,
        extra={"access": fields},
    )


def _log_unexpected(scope: Scope, exc: Exception) -> None:
    # Frames and the exception's type only: its message could quote a key, a body or a path.
    frames = traceback.extract_tb(exc.__traceback__)[-8:]
    where = " <- ".join(
        f"{PurePath(frame.filename).name}:{frame.lineno}:{frame.name}" for frame in reversed(frames)
    )
    logger.error(
        "unexpected %s in %s %s at %s",
        type(exc).__name__,
        scope.get("method", ""),
        _loggable_path(scope),
        where,
    )


class _ServiceKeys:
    """Requires one of the configured keys, compared in constant time, on /v1 paths."""

    def __init__(self, app: ASGIApp, keys: tuple[bytes, ...]) -> None:
        self.app = app
        self.keys = keys

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        guarded = path == "/v1" or path.startswith("/v1/")
        if scope["type"] == "http" and self.keys and guarded and not self._authorized(scope):
            await error_response(Unauthorized(), scope)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        values = [value for name, value in scope["headers"] if name.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, token = values[0].strip().partition(b" ")
        token = token.strip()
        if scheme.lower() != b"bearer" or not token:
            return False
        # Compare against every key, without stopping early, so timing reveals nothing.
        matched = False
        for key in self.keys:
            matched |= hmac.compare_digest(token, key)
        return matched


class _BodyLimit:
    """Refuses request bodies above `limit` bytes, counting what actually arrives."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = self._declared_length(scope)
        if declared is not None and declared > self.limit:
            # Refused before reading; a small excess is still drained so the client sees the
            # 413, a huge one is not waited for.
            if declared <= self.limit + MAX_DRAINED_BYTES:
                await _drain(receive)
            await self._refuse(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.limit:
                if message.get("more_body", False):
                    await _drain(receive)
                await self._refuse(scope, receive, send)
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    def _declared_length(self, scope: Scope) -> int | None:
        for name, value in scope["headers"]:
            if name.lower() == b"content-length":
                return int(value) if value.isdigit() else self.limit + 1
        return None

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        error = InvalidRequest(f"The request body exceeds {self.limit // 1024} KiB.")
        response = error_response(error, scope, status=413, headers={"Connection": "close"})
        await response(scope, receive, send)


async def _drain(receive: Receive) -> None:
    """Read and drop up to MAX_DRAINED_BYTES of a refused body.

    Closing a connection with unread data makes the kernel reset it, and the client would
    then see a broken connection instead of the 413."""
    dropped = 0
    while dropped <= MAX_DRAINED_BYTES:
        message = await receive()
        dropped += len(message.get("body", b""))
        if message["type"] == "http.disconnect" or not message.get("more_body", False):
            return


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


# --- the review slots -----------------------------------------------------------------------


class ReviewSlots:
    """At most `limit` reviews in flight; one more is refused at once, never queued."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0

    @contextmanager
    def hold(self) -> Iterator[None]:
        """Take a slot for the block, or raise ServerBusy."""
        # One event loop: nothing can run between the check and the increment.
        if self.in_flight >= self.limit:
            raise ServerBusy()
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


# --- the application ------------------------------------------------------------------------


def get_reviewer() -> Reviewer:
    """The review function; tests swap it with `app.dependency_overrides[get_reviewer]`."""
    return run_review


def create_app(settings: Settings | None = None) -> FastAPI:
    """The service, configured by `settings` (read from the environment when not given)."""
    settings = settings if settings is not None else load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # One pooled provider client for every review; closed after the last one finished.
        async with ProviderClient(settings) as provider:
            app.state.provider = provider
            yield

    app = FastAPI(
        title="pr-review",
        version=__version__,
        summary="Review GitHub pull requests with a language model through read-only tools.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    app.state.settings = settings
    app.state.slots = ReviewSlots(settings.pr_review_max_concurrent_reviews)
    app.add_exception_handler(ReviewError, _on_review_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    # Starlette wraps in reverse order: the last added runs first.
    app.add_middleware(_BodyLimit, limit=MAX_REQUEST_BODY_BYTES)
    keys = tuple(key.get_secret_value().encode("utf-8") for key in settings.pr_review_api_keys)
    app.add_middleware(_ServiceKeys, keys=keys)
    app.add_middleware(_AccessLog)
    _add_routes(app, secured=bool(keys))
    return app


def _add_routes(app: FastAPI, *, secured: bool) -> None:
    openapi_extra: dict[str, Any] | None = {"security": [{"serviceKey": []}]} if secured else None
    responses: dict[int | str, dict[str, Any]] = {
        200: {"model": ReviewResult, "description": "A validated review."},
        **ERROR_RESPONSES,
    }

    @app.post(
        "/v1/reviews",
        response_model=None,
        responses=responses,
        summary="Review a pull request",
        openapi_extra=openapi_extra,
    )
    async def create_review(
        body: ReviewRequest,
        request: Request,
        reviewer: Annotated[Reviewer, Depends(get_reviewer)],
    ) -> Response:
        state = request.app.state
        with state.slots.hold():
            result = await reviewer(
                PullRequestTarget(body.pull_request_url),
                state.settings,
                include_trace=body.include_trace,
                provider=getattr(state, "provider", None),
            )
        return ContractJSONResponse(result.model_dump(mode="json"))

    @app.get("/healthz", response_model=Health, summary="Liveness")
    async def healthz() -> Health:
        return Health(status="ok")

    if secured:
        _declare_bearer_scheme(app)


def _declare_bearer_scheme(app: FastAPI) -> None:
    original = app.openapi

    def openapi() -> dict[str, Any]:
        schema = original()
        components = schema.setdefault("components", {})
        components.setdefault("securitySchemes", {})["serviceKey"] = {
            "type": "http",
            "scheme": "bearer",
            "description": "One of the keys in PR_REVIEW_API_KEYS.",
        }
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def server_config(app: ASGIApp, settings: Settings, *, host: str, port: int) -> uvicorn.Config:
    """How `pr-review serve` runs the app: our access log instead of uvicorn's (which would
    log query strings and client addresses), and a shutdown that lets reviews finish."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        access_log=False,
        log_config=None,
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=math.ceil(settings.review_timeout_seconds)
        + SHUTDOWN_SLACK_SECONDS,
    )
