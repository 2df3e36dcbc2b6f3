"""The one place a `ReviewError` becomes a status, headers and the contract's error document.

The exception handlers, the middleware and the body reader all answer through
`error_response()`; it also remembers the error's code for the access log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Scope

from pr_review_api.errors import (
    InvalidRequest,
    OpenCodeRateLimited,
    ReviewError,
    ServerBusy,
    Unauthorized,
)
from pr_review_api.jsonutil import dumps_compact

ERROR_CODE_KEY = "pr_review_error_code"


class ContractJSONResponse(JSONResponse):
    """JSON serialized exactly as `pr-review review --format json` prints it."""

    def render(self, content: Any) -> bytes:
        return dumps_compact(content).encode("utf-8")


class InternalError(ReviewError):
    """Anything the error tree does not name: a fixed body, no details."""

    default_message = "The server failed unexpectedly."


class BodyTooLarge(InvalidRequest):
    """A request body over the cap: `invalid_request` with status 413, and the connection
    is closed after the answer (the rest of the body is not read)."""

    status = 413


class MisdirectedRequest(InvalidRequest):
    """A keyless server asked for a `Host` it does not answer (service/hosts.py): 421, with
    the contract's `invalid_request` code, since the request is what is wrong, not a key."""

    status = 421
    default_message = (
        "This server does not answer for that host name: use 127.0.0.1 or localhost, or list "
        "the name in PR_REVIEW_ALLOWED_HOSTS."
    )


def error_response(
    exc: ReviewError,
    scope: Scope,
    *,
    status: int | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response:
    """The contract's answer to `exc`; remembers its code for the access log."""
    scope.setdefault("state", {})[ERROR_CODE_KEY] = exc.code
    extra = dict(headers or {})
    if isinstance(exc, OpenCodeRateLimited | ServerBusy) and exc.retry_after is not None:
        extra["Retry-After"] = str(exc.retry_after)
    if isinstance(exc, Unauthorized):
        extra["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, BodyTooLarge):
        extra["Connection"] = "close"
    return ContractJSONResponse(exc.to_body(), status_code=status or exc.status, headers=extra)


def invalid_request(errors: Sequence[Mapping[str, Any]], fields: frozenset[str]) -> InvalidRequest:
    """A fixed sentence for the first validation problem; a client's own field names and
    values are never echoed. `errors` are pydantic's, located from the body's root."""
    first: Mapping[str, Any] = errors[0] if errors else {}
    location = tuple(first.get("loc", ()))
    field = location[0] if location and location[0] in fields else None
    kind = first.get("type")
    if kind == "extra_forbidden":
        names = sorted(fields, key=_field_order)
        listed = ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else names[0]
        return InvalidRequest(f"The request body may hold only {listed}.")
    if kind == "missing" and field is not None:
        return InvalidRequest(f"The request body is missing {field}.")
    if field == "pull_request_url":
        return InvalidRequest("pull_request_url must be a string.")
    if field is not None:
        return InvalidRequest(f"{field} must be a boolean.")
    return InvalidRequest("The request body must be a JSON object.")


def _field_order(name: str) -> tuple[int, str]:
    # The documented order; a field added later goes after these two.
    return ({"pull_request_url": 0, "include_trace": 1, "post": 2}.get(name, 3), name)


async def _on_review_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ReviewError)
    return error_response(exc, request.scope)


async def _on_validation_error(request: Request, exc: Exception) -> Response:
    # Only reachable from a route with declared parameters; the review body is read by
    # `body.review_request`, which raises InvalidRequest itself.
    assert isinstance(exc, RequestValidationError)
    return error_response(InvalidRequest("The request was not accepted."), request.scope)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    messages = {404: "There is no such endpoint.", 405: "The method is not allowed here."}
    error = InvalidRequest(messages.get(exc.status_code, "The request was not accepted."))
    return error_response(error, request.scope, status=exc.status_code, headers=exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    """Route every error FastAPI or Starlette can raise through `error_response`."""
    app.add_exception_handler(ReviewError, _on_review_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
