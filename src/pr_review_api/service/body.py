"""The request bodies (`POST /v1/reviews`, `POST /v1/review-jobs`, /ui's forms), read by the route
itself (not by FastAPI) so that:

- it is read only after the service key was checked (a router-level dependency runs first);
- its size is capped while it streams (64 KiB), and a declared Content-Length over the cap
  is refused before a byte is read;
- it must be sent as `application/json`, and the answer says so when it is not;
- it is strict JSON: duplicate keys (a proxy may have checked the other one), NaN, and any
  nesting depth are `invalid_request`, never a 400 or a 500 (specification §5).
"""

from __future__ import annotations

import email.message
from typing import TypeVar
from urllib.parse import parse_qsl

from fastapi import Request
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from pr_review_api.errors import InvalidRequest
from pr_review_api.jsonutil import StrictJSONError, loads_strict
from pr_review_api.service.documents import ReviewRequest
from pr_review_api.service.errors import BodyTooLarge, invalid_request

MAX_REQUEST_BODY_BYTES = 64 * 1024
# A refused body this much over the cap is still read and dropped, so that the client sees
# the 413 (closing with unread data makes the kernel reset the connection); more is not.
MAX_DRAINED_BYTES = 1024 * 1024

_NOT_JSON = "The request body must be sent with Content-Type: application/json."

Body = TypeVar("Body", bound=BaseModel)


async def review_request(request: Request) -> ReviewRequest:
    """The body of `POST /v1/reviews`, or an `InvalidRequest` that says what is wrong."""
    return await json_body(request, ReviewRequest, MAX_REQUEST_BODY_BYTES)


async def json_body(request: Request, model: type[Body], limit: int) -> Body:
    """A request body of at most `limit` bytes, strict JSON, one object that `model` accepts;
    an `InvalidRequest` (or `BodyTooLarge`) that says what is wrong otherwise."""
    body = await read_capped(request, limit)
    if not is_json_content_type(request.headers.get("content-type")):
        raise InvalidRequest(_NOT_JSON)
    try:
        document = loads_strict(body)
    except StrictJSONError as exc:
        if str(exc) == "duplicate key":
            raise InvalidRequest("The request body must not repeat a key.") from None
        raise InvalidRequest("The request body must be a JSON object.") from None
    if not isinstance(document, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        fields = frozenset(model.model_fields)
        raise invalid_request(exc.errors(include_input=False), fields) from None


async def form_body(request: Request, limit: int) -> dict[str, str]:
    """An HTML form's fields (`application/x-www-form-urlencoded`, at most `limit` bytes),
    each given at most once; an `InvalidRequest` otherwise. /ui's forms read theirs here."""
    body = await read_capped(request, limit)
    if _media_type(request.headers.get("content-type")) != "application/x-www-form-urlencoded":
        raise InvalidRequest("The form must be sent as application/x-www-form-urlencoded.")
    try:
        pairs = parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=64)
    except (UnicodeDecodeError, ValueError):
        raise InvalidRequest("The form could not be read.") from None
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise InvalidRequest("The form must not repeat a field.")
        fields[name] = value
    return fields


def _media_type(value: str | None) -> str:
    message = email.message.Message()
    message["content-type"] = value or ""
    return message.get_content_type() if value else ""


def is_json_content_type(value: str | None) -> bool:
    """`application/json` or `application/<anything>+json`, parameters allowed."""
    maintype, _, subtype = _media_type(value).partition("/")
    return maintype == "application" and (subtype == "json" or subtype.endswith("+json"))


async def read_capped(request: Request, limit: int) -> bytes:
    """The request body, or `BodyTooLarge` when more than `limit` bytes are declared or
    arrive. A declared length far over the cap is refused before a byte is read."""
    too_large = BodyTooLarge(f"The request body exceeds {limit // 1024} KiB.")
    declared = request.headers.get("content-length")
    if declared is not None and (
        not declared.isdigit() or int(declared) > limit + MAX_DRAINED_BYTES
    ):
        raise too_large
    chunks: list[bytes] = []
    received = 0
    try:
        async for chunk in request.stream():
            received += len(chunk)
            if received > limit + MAX_DRAINED_BYTES:
                break
            if received <= limit:
                chunks.append(chunk)
    except ClientDisconnect:
        raise InvalidRequest("The request body was not received in full.") from None
    if received > limit:
        raise too_large
    return b"".join(chunks)
