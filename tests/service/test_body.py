"""The request body (service/body.py): strict JSON, its content type, and the 64 KiB cap."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import hypothesis
import pytest

from pr_review_api.service.body import MAX_REQUEST_BODY_BYTES
from tests.conftest import examples
from tests.results import PR_URL
from tests.service.support import (
    FakeReviewer,
    app_with,
    assert_error,
    client_for,
    live_server,
    post_review,
)

pytestmark = pytest.mark.anyio


# --- request validation ------------------------------------------------------------------------

INVALID_BODIES: list[tuple[str, dict[str, Any]]] = [
    ("missing url", {"json": {}}),
    ("missing url, trace only", {"json": {"include_trace": True}}),
    ("extra field", {"json": {"pull_request_url": PR_URL, "include_trace": False, "x": 1}}),
    ("url is a number", {"json": {"pull_request_url": 7}}),
    ("url is null", {"json": {"pull_request_url": None}}),
    ("url is a list", {"json": {"pull_request_url": [PR_URL]}}),
    ("trace is a string", {"json": {"pull_request_url": PR_URL, "include_trace": "true"}}),
    ("trace is a number", {"json": {"pull_request_url": PR_URL, "include_trace": 1}}),
    ("trace is null", {"json": {"pull_request_url": PR_URL, "include_trace": None}}),
    ("body is a list", {"json": [{"pull_request_url": PR_URL}]}),
    ("body is a string", {"json": PR_URL}),
    ("body is null", {"json": None}),
    (
        "not json",
        {"content": b"{pull_request_url:", "headers": {"content-type": "application/json"}},
    ),
    ("empty", {"content": b"", "headers": {"content-type": "application/json"}}),
    ("not utf-8", {"content": b'{"pull_request_url":"\xff"}'}),
    ("text/plain", {"content": json.dumps({"pull_request_url": PR_URL}).encode()}),
    ("duplicate key", {"content": b'{"pull_request_url":"a","pull_request_url":"b","x":1}'}),
]


@pytest.mark.parametrize(
    ("name", "request_kwargs"), INVALID_BODIES, ids=[n for n, _ in INVALID_BODIES]
)
async def test_invalid_bodies_are_invalid_request(
    name: str, request_kwargs: dict[str, Any]
) -> None:
    reviewer = FakeReviewer()
    async with client_for(app_with(reviewer)) as client:
        if "json" in request_kwargs:
            response = await client.post("/v1/reviews", json=request_kwargs["json"])
        else:
            response = await client.post("/v1/reviews", **request_kwargs)
    assert_error(response, 422, "invalid_request")
    assert reviewer.calls == []


async def test_validation_messages_never_echo_the_client_input() -> None:
    field = "sk-client-FIELD-NAME-0x1"
    async with client_for(app_with(FakeReviewer())) as client:
        extra = await post_review(client, {"pull_request_url": PR_URL, field: field})
        typed = await post_review(client, {"pull_request_url": {field: field}})
    for response in (extra, typed):
        assert field not in response.text
    assert assert_error(extra, 422, "invalid_request")["error"]["message"] == (
        "The request body may hold only pull_request_url, include_trace and post."
    )
    assert assert_error(typed, 422, "invalid_request")["error"]["message"] == (
        "pull_request_url must be a string."
    )


async def test_duplicate_keys_are_invalid_request() -> None:
    reviewer = FakeReviewer()
    body = json.dumps({"pull_request_url": PR_URL})[:-1] + ', "pull_request_url": "other"}'
    async with client_for(app_with(reviewer)) as client:
        response = await client.post(
            "/v1/reviews", content=body, headers={"content-type": "application/json"}
        )
    document = assert_error(response, 422, "invalid_request")
    assert document["error"]["message"] == "The request body must not repeat a key."
    assert reviewer.calls == []


# As deep as fits under the 64 KiB cap: 30,000 arrays, 12,000 objects.
@pytest.mark.parametrize(("opening", "depth"), [("[", 30_000), ('{"":', 12_000)])
async def test_any_nesting_depth_is_422_never_400_or_500(opening: str, depth: int) -> None:
    closing = {"[": "]", '{"":': "}"}[opening]
    body = opening * depth + "1" + closing * depth
    async with client_for(app_with(FakeReviewer())) as client:
        response = await client.post(
            "/v1/reviews", content=body, headers={"content-type": "application/json"}
        )
    assert_error(response, 422, "invalid_request")


@pytest.mark.parametrize(
    "content_type", [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]
)
async def test_a_json_body_with_another_content_type_says_so(content_type: str | None) -> None:
    reviewer = FakeReviewer()
    headers = {"content-type": content_type} if content_type else {}
    async with client_for(app_with(reviewer)) as client:
        response = await client.post(
            "/v1/reviews", content=json.dumps({"pull_request_url": PR_URL}), headers=headers
        )
    document = assert_error(response, 422, "invalid_request")
    assert document["error"]["message"] == (
        "The request body must be sent with Content-Type: application/json."
    )
    assert reviewer.calls == []


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "application/x+json"])
async def test_json_content_types_with_parameters_or_suffixes_are_accepted(
    content_type: str,
) -> None:
    async with client_for(app_with(FakeReviewer())) as client:
        response = await client.post(
            "/v1/reviews",
            content=json.dumps({"pull_request_url": PR_URL}),
            headers={"content-type": content_type},
        )
    assert response.status_code == 200


_JSONISH = hypothesis.strategies.recursive(
    hypothesis.strategies.none()
    | hypothesis.strategies.booleans()
    | hypothesis.strategies.integers()
    | hypothesis.strategies.floats()
    | hypothesis.strategies.text(max_size=20),
    lambda inner: (
        hypothesis.strategies.lists(inner, max_size=4)
        | hypothesis.strategies.dictionaries(
            hypothesis.strategies.sampled_from(["pull_request_url", "include_trace", "x", ""]),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


def test_no_body_and_no_content_type_ever_makes_the_service_answer_500() -> None:
    """specification §5: whatever the bytes, the nesting or the Content-Type, never a 500."""
    reviewer = FakeReviewer()
    app = app_with(reviewer)
    transport = httpx.ASGITransport(app=app)

    @hypothesis.given(
        body=hypothesis.strategies.binary(max_size=200)
        | _JSONISH.map(lambda value: json.dumps(value).encode()),
        content_type=hypothesis.strategies.sampled_from(
            [
                None,
                "application/json",
                "text/plain",
                "application/json; charset=latin-1",
                "x/y+json",
            ]
        ),
    )
    @hypothesis.settings(max_examples=examples(200), deadline=None, database=None)
    def check(body: bytes, content_type: str | None) -> None:
        headers = {"content-type": content_type} if content_type else {}

        async def send() -> httpx.Response:
            async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
                return await client.post("/v1/reviews", content=body, headers=headers)

        response = asyncio.run(send())
        assert response.status_code in (200, 422), (response.status_code, response.text)
        if response.status_code == 422:
            assert_error(response, 422, "invalid_request")

    check()


# --- the body cap ------------------------------------------------------------------------------


def _body_of_size(size: int) -> bytes:
    base = json.dumps({"pull_request_url": ""}).encode()
    return json.dumps({"pull_request_url": "x" * (size - len(base))}).encode()


async def test_a_body_at_the_cap_is_accepted() -> None:
    reviewer = FakeReviewer()
    body = _body_of_size(MAX_REQUEST_BODY_BYTES)
    assert len(body) == MAX_REQUEST_BODY_BYTES
    async with client_for(app_with(reviewer)) as client:
        response = await client.post(
            "/v1/reviews", content=body, headers={"content-type": "application/json"}
        )
    assert response.status_code == 200


async def test_a_body_over_the_cap_is_413() -> None:
    reviewer = FakeReviewer()
    body = _body_of_size(MAX_REQUEST_BODY_BYTES + 1)
    async with client_for(app_with(reviewer)) as client:
        response = await client.post(
            "/v1/reviews", content=body, headers={"content-type": "application/json"}
        )
    assert_error(response, 413, "invalid_request")
    assert reviewer.calls == []


async def test_a_declared_length_over_the_cap_is_413_before_reading() -> None:
    async def receive() -> dict[str, Any]:
        raise AssertionError("the body must not be read")

    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "path": "/v1/reviews",
        "raw_path": b"/v1/reviews",
        "query_string": b"",
        "root_path": "",
        "scheme": "http",
        "server": ("testserver", 80),
        "client": ("127.0.0.1", 1),
        "headers": [(b"content-length", str(10**9).encode())],
    }
    await app_with(FakeReviewer())(scope, receive, send)
    assert sent[0]["status"] == 413


async def test_a_streamed_body_over_the_cap_is_413_on_a_real_server() -> None:
    reviewer = FakeReviewer()

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"pull_request_url":"'
        for _ in range(MAX_REQUEST_BODY_BYTES // 1024 + 1):
            yield b"x" * 1024
        yield b'"}'

    with live_server(app_with(reviewer)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as client:
            response = await client.post(
                "/v1/reviews", content=chunks(), headers={"content-type": "application/json"}
            )
            assert "content-length" not in response.request.headers  # sent chunked
            assert_error(response, 413, "invalid_request")
            ok = await post_review(client)  # the server is fine afterwards
    assert ok.status_code == 200
    assert len(reviewer.calls) == 1
