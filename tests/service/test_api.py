"""The HTTP API: statuses, error documents, service keys, the body cap, capacity, logs.

Most tests run the app in process (httpx.ASGITransport); those where a real socket matters
(streamed bodies, concurrency, shutdown) run it on a real uvicorn server on loopback. The
review function is a stand-in where a test is about the shell, and the real `run_review`
against the scripted provider and the fake GitHub where it is about the whole service.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import hypothesis
import pytest
import schemathesis
import uvicorn
from schemathesis import checks as schemathesis_checks
from schemathesis.core.result import Ok

from pr_review_api import errors
from pr_review_api.errors import ReviewError
from pr_review_api.llm.client import ModelClient
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop.run import LocalTarget, PullRequestTarget, run_review
from pr_review_api.model import ReviewResult
from pr_review_api.output.formats import render_json
from pr_review_api.service.app import MAX_REQUEST_BODY_BYTES, create_app, get_reviewer
from pr_review_api.settings import Settings, load_settings
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes import provider_server
from tests.fakes.github_server import FakeGitHub, fake_github
from tests.fakes.provider_server import ScriptedProvider, stop_turn, tool_call_turn
from tests.gitrepo import GitRepo
from tests.results import PR_URL, as_json, review_result
from tests.results import SERVICE_REVIEW as REVIEW

__all__ = ["fake_github"]  # the fixture, imported for this module's tests
scripted_provider = provider_server.scripted_provider

pytestmark = pytest.mark.anyio
REPO_ROOT = Path(__file__).resolve().parents[2]
SERVICE_KEY = "svc-key-SERVICE-SECRET-93c1"
OTHER_KEY = "svc-key-OTHER-SECRET-5d20"
ERROR_KEYS = {"error", "termination_reason", "trace"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"opencode_api_key": PROVIDER_KEY}
    values.update(overrides)
    return load_settings(**values)


class FakeReviewer:
    """Stands in for run_review: records calls, then waits, fails or returns a review."""

    def __init__(
        self,
        result: ReviewResult | None = None,
        *,
        error: BaseException | None = None,
        delay: float = 0.0,
        gate: asyncio.Event | None = None,
    ) -> None:
        self.result = result or review_result()
        self.error = error
        self.delay = delay
        self.gate = gate
        self.calls: list[tuple[PullRequestTarget, bool, ModelClient | None]] = []
        self.in_flight = 0
        self._changed = asyncio.Condition()

    async def until_in_flight(self, count: int) -> None:
        """Wait until `count` reviews are running at once."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.in_flight >= count)

    async def __call__(
        self,
        target: PullRequestTarget,
        settings: Settings,
        *,
        include_trace: bool,
        model: ModelClient | None,
        post: bool = False,
    ) -> ReviewResult:
        self.calls.append((target, include_trace, model))
        async with self._changed:
            self.in_flight += 1
            self._changed.notify_all()
        try:
            if self.gate is not None:
                await self.gate.wait()
            if self.delay:
                await asyncio.sleep(self.delay)
            if self.error is not None:
                raise self.error
            return self.result
        finally:
            self.in_flight -= 1


def app_with(reviewer: FakeReviewer | None = None, **overrides: Any) -> Any:
    app = create_app(settings(**overrides))
    if reviewer is not None:
        app.dependency_overrides[get_reviewer] = lambda: reviewer
    return app


@asynccontextmanager
async def client_for(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        yield client


async def post_review(client: httpx.AsyncClient, body: Any = None, **kwargs: Any) -> httpx.Response:
    if body is None and "content" not in kwargs:
        body = {"pull_request_url": PR_URL}
    if body is not None:
        kwargs["json"] = body
    return await client.post("/v1/reviews", **kwargs)


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The response is the contract's error document with this status and code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    document: dict[str, Any] = response.json()
    assert set(document) == ERROR_KEYS
    assert document["error"]["code"] == code
    assert isinstance(document["error"]["message"], str)
    assert document["error"]["message"]
    assert document["trace"] is None
    return document


@contextmanager
def live_server(app: Any) -> Iterator[str]:
    """Serve `app` with uvicorn on an ephemeral loopback port; yield its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "uvicorn failed to start"
        assert time.monotonic() < deadline, "uvicorn did not start in time"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


# --- health and documentation ----------------------------------------------------------------


async def test_healthz_answers_ok() -> None:
    async with client_for(app_with()) as client:
        response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_openapi_documents_the_success_and_every_error_body() -> None:
    async with client_for(app_with()) as client:
        schema = (await client.get("/openapi.json")).json()
    operation = schema["paths"]["/v1/reviews"]["post"]
    request = operation["requestBody"]["content"]["application/json"]["schema"]
    if "$ref" in request:
        request = schema["components"]["schemas"][request["$ref"].rsplit("/", 1)[1]]
    assert operation["requestBody"]["required"] is True
    assert set(request["properties"]) == {"pull_request_url", "include_trace", "post"}
    assert request["additionalProperties"] is False
    responses = operation["responses"]
    success = responses["200"]["content"]["application/json"]["schema"]["$ref"]
    assert success.endswith("/ReviewResult")
    for status in ("401", "404", "413", "422", "500", "502", "503", "504"):
        ref = responses[status]["content"]["application/json"]["schema"]["$ref"]
        assert ref.endswith("/ErrorDocument"), status
    assert "Retry-After" in responses["503"]["headers"]
    error = schema["components"]["schemas"]["ErrorDocument"]
    assert set(error["required"]) == ERROR_KEYS
    # `publication` (CONTRACT 10) arrives with the publishing work; everything else is fixed.
    properties = set(schema["components"]["schemas"]["ReviewResult"]["properties"])
    assert properties - {"publication"} == {
        "coverage",
        "termination_reason",
        "pull_request",
        "revisions",
        "model",
        "review",
        "usage",
        "rounds",
        "tool_calls",
        "trace",
    }


async def test_openapi_declares_the_bearer_scheme_when_keys_are_set() -> None:
    async with client_for(app_with(pr_review_api_keys=SERVICE_KEY)) as client:
        response = await client.get("/openapi.json")  # open without a key
    schema = response.json()
    assert schema["components"]["securitySchemes"]["serviceKey"]["scheme"] == "bearer"
    assert schema["paths"]["/v1/reviews"]["post"]["security"] == [{"serviceKey": []}]
    assert SERVICE_KEY not in response.text


async def test_swagger_ui_is_served_when_the_service_is_open() -> None:
    async with client_for(app_with()) as client:
        response = await client.get("/docs")
    assert response.status_code == 200
    assert "swagger-ui" in response.text
    assert "/openapi.json" in response.text


async def test_swagger_ui_needs_a_service_key_when_keys_are_set() -> None:
    async with client_for(app_with(pr_review_api_keys=SERVICE_KEY)) as client:
        refused = await client.get("/docs")
        served = await client.get("/docs", headers={"Authorization": f"Bearer {SERVICE_KEY}"})
        document = await client.get("/openapi.json")  # the published contract stays public
    assert_error(refused, 401, "unauthorized")
    assert served.status_code == 200
    assert "swagger-ui" in served.text
    assert document.status_code == 200
    assert SERVICE_KEY not in served.text


async def test_the_bearer_scheme_is_absent_while_the_service_is_open() -> None:
    async with client_for(app_with()) as client:
        schema = (await client.get("/openapi.json")).json()
    assert "security" not in schema["paths"]["/v1/reviews"]["post"]
    assert "securitySchemes" not in schema.get("components", {})


# --- success ---------------------------------------------------------------------------------


async def test_success_returns_the_review_document() -> None:
    reviewer = FakeReviewer(review_result(trace=True))
    async with client_for(app_with(reviewer)) as client:
        response = await post_review(client, {"pull_request_url": PR_URL, "include_trace": True})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.json() == as_json(reviewer.result)
    assert response.content == render_json(as_json(reviewer.result)).encode()
    [(target, include_trace, _)] = reviewer.calls
    assert target == PullRequestTarget(PR_URL)
    assert include_trace is True


async def test_include_trace_defaults_to_false() -> None:
    reviewer = FakeReviewer()
    async with client_for(app_with(reviewer)) as client:
        await post_review(client)
    assert reviewer.calls[0][1] is False


async def test_the_shared_model_client_is_passed_to_each_review() -> None:
    reviewer = FakeReviewer()
    with live_server(app_with(reviewer)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as client:
            await post_review(client)
            await post_review(client)
    models = {id(model) for _, _, model in reviewer.calls}
    assert len(models) == 1
    assert isinstance(reviewer.calls[0][2], ProviderClient)


# --- the error tree ---------------------------------------------------------------------------

ERROR_CASES: list[tuple[ReviewError, int, str | None]] = [
    (errors.InvalidPullRequestUrl(), 422, None),
    (errors.PullRequestNotFound(), 404, None),
    (errors.GitHubUnavailable(), 502, None),
    (errors.OpenCodeAuthenticationFailed(), 502, None),
    (errors.OpenCodeRateLimited(retry_after=30), 503, None),
    (errors.OpenCodeUnavailable(), 502, None),
    (errors.MaxRounds(), 502, "max_rounds"),
    (errors.MaxToolCalls(), 502, "max_tool_calls"),
    (errors.InvalidToolCall(), 502, "invalid_tool_call"),
    (errors.InvalidModelResponse(), 502, "invalid_model_response"),
    (errors.UpstreamResponseTooLarge(), 502, "upstream_response_too_large"),
    (errors.UnsupportedFinishReason(), 502, "unsupported_finish_reason"),
    (errors.ReviewTimeout(), 504, "review_timeout"),
    (errors.ConfigurationError(), 500, None),
    # A pull request's repository over the preparation budgets (CONTRACT 5: 422).
    (errors.InvalidRepository(), 422, None),
    (errors.ServerBusy(), 503, None),
    (errors.InvalidSignature(), 401, None),
    (errors.JobNotFound(), 404, None),
]


@pytest.mark.parametrize(
    ("error", "status", "termination_reason"),
    ERROR_CASES,
    ids=[error.code for error, _, _ in ERROR_CASES],
)
async def test_review_errors_map_to_their_status_and_document(
    error: ReviewError, status: int, termination_reason: str | None
) -> None:
    async with client_for(app_with(FakeReviewer(error=error))) as client:
        response = await post_review(client)
    document = assert_error(response, status, error.code)
    assert document == error.to_body()
    assert document["termination_reason"] == termination_reason


def _contract_errors(cls: type[ReviewError] = ReviewError) -> set[type[ReviewError]]:
    found = set()
    for sub in cls.__subclasses__():
        if sub.__module__ == errors.__name__:
            found |= {sub} | _contract_errors(sub)
    return found


def test_every_error_the_service_can_raise_has_a_mapping_test() -> None:
    abstract = {errors.ProviderError, errors.ReviewTerminated}
    cli_only = {errors.Interrupted}
    tested = {type(error) for error, _, _ in ERROR_CASES}
    # InvalidRequest and Unauthorized are raised by the shell itself; tested below.
    shell = {errors.InvalidRequest, errors.Unauthorized}
    assert _contract_errors() - abstract - cli_only - shell == tested


async def test_rate_limit_sets_retry_after_header_and_field() -> None:
    error = errors.OpenCodeRateLimited(retry_after=30)
    async with client_for(app_with(FakeReviewer(error=error))) as client:
        response = await post_review(client)
    document = assert_error(response, 503, "opencode_rate_limited")
    assert response.headers["retry-after"] == "30"
    assert document["error"]["retry_after"] == 30


async def test_rate_limit_without_a_hint_has_no_retry_after() -> None:
    error = errors.OpenCodeRateLimited()
    async with client_for(app_with(FakeReviewer(error=error))) as client:
        response = await post_review(client)
    document = assert_error(response, 503, "opencode_rate_limited")
    assert "retry-after" not in response.headers
    assert "retry_after" not in document["error"]


async def test_unexpected_exception_is_a_fixed_500_without_details(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret = "boom sk-live-LEAKED-in-a-message /home/user/secret.txt"
    reviewer = FakeReviewer(error=RuntimeError(secret))
    with caplog.at_level(logging.DEBUG):
        async with client_for(app_with(reviewer)) as client:
            response = await post_review(client)
    document = assert_error(response, 500, "internal_error")
    assert document == {
        "error": {"code": "internal_error", "message": "The server failed unexpectedly."},
        "termination_reason": None,
        "trace": None,
    }
    assert "RuntimeError" in caplog.text
    assert secret not in caplog.text
    assert "LEAKED" not in caplog.text


async def test_the_service_keeps_serving_after_an_unexpected_exception() -> None:
    reviewer = FakeReviewer(error=ZeroDivisionError())
    async with client_for(app_with(reviewer)) as client:
        assert (await post_review(client)).status_code == 500
        reviewer.error = None
        assert (await post_review(client)).status_code == 200


async def test_unknown_path_and_wrong_method_use_the_error_document() -> None:
    async with client_for(app_with()) as client:
        missing = await client.get("/v2/reviews")
        wrong = await client.get("/v1/reviews")
    assert_error(missing, 404, "invalid_request")
    assert_error(wrong, 405, "invalid_request")
    assert wrong.headers["allow"] == "POST"


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


async def test_settings_and_the_model_client_are_dependencies_a_test_can_override() -> None:
    from pr_review_api.service.dependencies import get_model, get_settings

    reviewer = FakeReviewer()
    app = app_with(reviewer)
    other = settings(review_max_rounds=3)
    marker = object()
    app.dependency_overrides[get_settings] = lambda: other
    app.dependency_overrides[get_model] = lambda: marker
    seen: list[Settings] = []

    async def recording(target: Any, settings_: Settings, **kwargs: Any) -> ReviewResult:
        seen.append(settings_)
        return await reviewer(target, settings_, **kwargs)

    app.dependency_overrides[get_reviewer] = lambda: recording
    async with client_for(app) as client:
        assert (await post_review(client)).status_code == 200
    assert seen == [other]
    assert reviewer.calls[0][2] is marker


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
    """CONTRACT 5: whatever the bytes, the nesting or the Content-Type, never a 500."""
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
    @hypothesis.settings(max_examples=200, deadline=None, database=None)
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


# --- service keys ------------------------------------------------------------------------------


async def test_without_configured_keys_no_authorization_is_needed() -> None:
    async with client_for(app_with(FakeReviewer())) as client:
        assert (await post_review(client)).status_code == 200


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Bearer {SERVICE_KEY}x"},
        {"Authorization": f"Bearer {SERVICE_KEY[:-1]}"},
        {"Authorization": f"Basic {SERVICE_KEY}"},
        {"Authorization": SERVICE_KEY},
        {"Authorization": "Bearer "},
        {"X-Api-Key": SERVICE_KEY},
    ],
    ids=["missing", "wrong", "longer", "shorter", "basic", "no-scheme", "empty", "other-header"],
)
async def test_missing_or_wrong_key_is_unauthorized(headers: dict[str, str]) -> None:
    reviewer = FakeReviewer()
    app = app_with(reviewer, pr_review_api_keys=f"{SERVICE_KEY},{OTHER_KEY}")
    async with client_for(app) as client:
        response = await post_review(client, headers=headers)
    assert_error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"] == "Bearer"
    assert SERVICE_KEY not in response.text
    assert reviewer.calls == []


@pytest.mark.parametrize("key", [SERVICE_KEY, OTHER_KEY])
async def test_any_configured_key_is_accepted(key: str) -> None:
    reviewer = FakeReviewer()
    app = app_with(reviewer, pr_review_api_keys=f"{SERVICE_KEY}, {OTHER_KEY}")
    async with client_for(app) as client:
        response = await post_review(client, headers={"Authorization": f"bearer {key}"})
    assert response.status_code == 200
    assert len(reviewer.calls) == 1


async def test_two_authorization_headers_are_unauthorized() -> None:
    app = app_with(FakeReviewer(), pr_review_api_keys=SERVICE_KEY)
    headers = [("Authorization", f"Bearer {SERVICE_KEY}"), ("Authorization", "Bearer other")]
    async with client_for(app) as client:
        response = await client.post(
            "/v1/reviews", json={"pull_request_url": PR_URL}, headers=headers
        )
    assert_error(response, 401, "unauthorized")


async def test_authorization_is_checked_before_the_body_is_read() -> None:
    app = app_with(FakeReviewer(), pr_review_api_keys=SERVICE_KEY)
    async with client_for(app) as client:
        invalid = await client.post("/v1/reviews", content=b"{not json")
        huge = await client.post("/v1/reviews", content=b"x" * (MAX_REQUEST_BODY_BYTES + 1))
    assert_error(invalid, 401, "unauthorized")
    assert_error(huge, 401, "unauthorized")


async def test_health_and_openapi_need_no_key() -> None:
    app = app_with(pr_review_api_keys=SERVICE_KEY)
    async with client_for(app) as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/openapi.json")).status_code == 200


async def test_every_key_is_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []

    original = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", spy)
    keys = [SERVICE_KEY, OTHER_KEY, "third-key"]
    app = app_with(FakeReviewer(), pr_review_api_keys=",".join(keys))
    async with client_for(app) as client:
        response = await post_review(client, headers={"Authorization": f"Bearer {SERVICE_KEY}"})
    assert response.status_code == 200
    # The first key matched, and still every key was compared: no early exit to time.
    assert [b for _, b in compared] == [key.encode() for key in keys]


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


# --- capacity and concurrency -------------------------------------------------------------------


async def test_a_full_server_answers_server_busy_at_once() -> None:
    gate = asyncio.Event()
    reviewer = FakeReviewer(gate=gate)
    app = app_with(reviewer, pr_review_max_concurrent_reviews=2)
    async with client_for(app) as client:
        running = [asyncio.create_task(post_review(client)) for _ in range(2)]
        await reviewer.until_in_flight(2)
        started = time.perf_counter()
        busy = await post_review(client)
        assert time.perf_counter() - started < 0.5  # refused, not queued
        assert_error(busy, 503, "server_busy")
        assert busy.headers["retry-after"] == "5"
        gate.set()
        assert [(await task).status_code for task in running] == [200, 200]
        assert (await post_review(client)).status_code == 200  # the slots were given back
    assert len(reviewer.calls) == 3


async def test_a_failed_review_gives_its_slot_back() -> None:
    reviewer = FakeReviewer(error=errors.MaxRounds())
    app = app_with(reviewer, pr_review_max_concurrent_reviews=1)
    async with client_for(app) as client:
        for _ in range(3):
            assert_error(await post_review(client), 502, "max_rounds")


async def test_ten_slow_reviews_run_concurrently_on_a_real_server() -> None:
    reviewer = FakeReviewer(delay=1.0)
    with live_server(app_with(reviewer)) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
            started = time.perf_counter()
            assert (await post_review(client)).status_code == 200
            one = time.perf_counter() - started
            started = time.perf_counter()
            responses = await asyncio.gather(*(post_review(client) for _ in range(10)))
            ten = time.perf_counter() - started
    assert [r.status_code for r in responses] == [200] * 10
    assert ten < 1.5 * one, (one, ten)


# --- access log ---------------------------------------------------------------------------------


async def test_each_request_logs_one_structured_line_without_secrets(
    caplog: pytest.LogCaptureFixture,
) -> None:
    secret_body = "https://github.com/acme/widget/pull/7?token=BODY-SECRET"
    app = app_with(FakeReviewer(error=errors.MaxRounds()), pr_review_api_keys=SERVICE_KEY)
    with caplog.at_level(logging.INFO, logger="pr_review_api.access"):
        async with client_for(app) as client:
            await post_review(
                client,
                {"pull_request_url": secret_body},
                headers={"Authorization": f"Bearer {SERVICE_KEY}"},
                params={"q": "QUERY-SECRET"},
            )
            await client.get("/healthz")
    records = [r for r in caplog.records if r.name == "pr_review_api.access"]
    assert [r.getMessage().split(" duration_ms=")[0] for r in records] == [
        "method=POST path=/v1/reviews status=502",
        "method=GET path=/healthz status=200",
    ]
    assert records[0].getMessage().endswith(" code=max_rounds")
    assert records[1].getMessage().endswith(" code=-")
    fields = records[0].access  # type: ignore[attr-defined]
    assert fields["status"] == 502
    assert fields["code"] == "max_rounds"
    assert isinstance(fields["duration_ms"], int)
    for secret in (SERVICE_KEY, "BODY-SECRET", "QUERY-SECRET", PROVIDER_KEY):
        assert secret not in caplog.text


async def test_unauthorized_and_oversized_requests_are_logged_with_their_code(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = app_with(FakeReviewer(), pr_review_api_keys=SERVICE_KEY)
    headers = {"Authorization": f"Bearer {SERVICE_KEY}"}
    with caplog.at_level(logging.INFO, logger="pr_review_api.access"):
        async with client_for(app) as client:
            await post_review(client)
            await client.post("/v1/reviews", content=b"x" * 70_000, headers=headers)
    messages = [r.getMessage() for r in caplog.records if r.name == "pr_review_api.access"]
    assert "status=401" in messages[0]
    assert messages[0].endswith("code=unauthorized")
    assert "status=413" in messages[1]
    assert messages[1].endswith("code=invalid_request")


async def test_a_hostile_path_cannot_forge_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="pr_review_api.access"):
        async with client_for(app_with()) as client:
            await client.get("/healthz%0Amethod=GET%20path=/forged")
    [record] = [r for r in caplog.records if r.name == "pr_review_api.access"]
    assert "\n" not in record.getMessage()
    assert "path=/healthz\\nmethod=GET path=/forged" in record.getMessage()


# --- slow clients (issue 9 item 3; the load test is tests/hostile/test_load.py) ----------------


@contextmanager
def guarded_server(app: Any, **bounds: Any) -> Iterator[int]:
    """Serve `app` with `server_config` (the guard included) on loopback; yield the port."""
    from pr_review_api.service.app import server_config

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = server_config(app, settings(), host="127.0.0.1", port=port, **bounds)
    config.timeout_graceful_shutdown = 5
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive(), "uvicorn failed to start"
        assert time.monotonic() < deadline, "uvicorn did not start in time"
        time.sleep(0.01)
    try:
        yield port
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def _closed_within(connection: socket.socket, seconds: float) -> bool:
    connection.settimeout(seconds)
    try:
        return connection.recv(1024) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_a_request_head_that_never_ends_is_closed_at_the_read_deadline() -> None:
    with guarded_server(app_with(FakeReviewer()), read_timeout=0.5) as port:
        with socket.create_connection(("127.0.0.1", port)) as slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
            started = time.monotonic()
            assert _closed_within(slow, 5)
            assert 0.4 < time.monotonic() - started < 3
        with socket.create_connection(("127.0.0.1", port)) as silent:  # not one byte
            assert _closed_within(silent, 5)


def test_a_slow_review_is_not_cut_by_the_read_deadline() -> None:
    reviewer = FakeReviewer(delay=1.0)
    with guarded_server(app_with(reviewer), read_timeout=0.3) as port:
        response = httpx.post(
            f"http://127.0.0.1:{port}/v1/reviews", json={"pull_request_url": PR_URL}, timeout=10
        )
    assert response.status_code == 200


def test_past_the_cap_the_longest_waiting_connection_makes_room() -> None:
    with guarded_server(app_with(), max_connections=4, read_timeout=30) as port:
        waiting = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        try:
            for connection in waiting:
                connection.sendall(b"GET /healthz HTTP/1.1\r\n")
                time.sleep(0.05)
            response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
            assert response.json() == {"status": "ok"}
            assert _closed_within(waiting[0], 2)  # the oldest one made room
            assert not _closed_within(waiting[-1], 0.2)
        finally:
            for connection in waiting:
                connection.close()


def test_running_out_of_descriptors_is_one_line_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import errno

    from pr_review_api.service.server import _ResourceErrorLog

    handler = _ResourceErrorLog()
    loop = asyncio.new_event_loop()
    try:
        with caplog.at_level(logging.DEBUG):
            for _ in range(500):
                error = OSError(errno.EMFILE, "Too many open files")
                handler(
                    loop, {"message": "socket.accept() out of system resource", "exception": error}
                )
    finally:
        loop.close()
    records = [r for r in caplog.records if "EMFILE" in r.getMessage()]
    assert len(records) == 1
    assert records[0].exc_info is None  # no traceback
    assert handler.suppressed == 499


# --- graceful shutdown --------------------------------------------------------------------------

SHUTDOWN_SERVER = textwrap.dedent(
    """
    import asyncio, sys
    import uvicorn
    from pr_review_api.service.app import create_app, get_reviewer, server_config
    from pr_review_api.settings import load_settings
    from tests.results import review_result

    async def slow(target, settings, *, include_trace, model):
        await asyncio.sleep(1.5)
        return review_result()

    settings = load_settings(opencode_api_key="k")
    app = create_app(settings)
    app.dependency_overrides[get_reviewer] = lambda: slow
    uvicorn.Server(server_config(app, settings, host="127.0.0.1", port=int(sys.argv[1]))).run()
    """
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_until_healthy(base_url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError("the server did not start")


def test_sigterm_lets_a_review_in_flight_finish(tmp_path: Path) -> None:
    script = tmp_path / "serve_slow.py"
    script.write_text(SHUTDOWN_SERVER)
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    process = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        _wait_until_healthy(base_url, process)
        answers: list[httpx.Response] = []
        request = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{base_url}/v1/reviews", json={"pull_request_url": PR_URL}, timeout=20)
            )
        )
        request.start()
        time.sleep(0.5)  # the review is in flight
        process.send_signal(signal.SIGTERM)
        request.join(timeout=20)
        # uvicorn re-raises the signal once it has shut down, as a well-behaved daemon does.
        assert process.wait(timeout=20) in {0, -signal.SIGTERM}
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    [answer] = answers
    assert answer.status_code == 200
    assert answer.json() == as_json(review_result())


# --- end to end: the real review loop ----------------------------------------------------------

BASE_FILES = {"src/service.py": "def save(x):\n    store(x)\n", "README.md": "# widget\n"}
HEAD_FILES = {"src/service.py": "def save(x):\n    store(x)\n    validate(x)\n"}


def e2e_settings(
    fake_github: FakeGitHub, provider: ScriptedProvider, tmp_path: Path, **overrides: Any
) -> Settings:
    return fake_github.settings(
        tmp_path / "cache",
        token=GITHUB_TOKEN,
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=provider.base_url,
        review_timeout_seconds=60,
        **overrides,
    )


async def one_and_ten(
    review: Callable[[], Awaitable[httpx.Response]], *, attempts: int = 3
) -> tuple[float, float]:
    """Seconds for one review and for ten at once, each the best of `attempts` tries.

    Load from elsewhere on the machine can only add time, so the best try is the measure."""

    async def timed(count: int) -> float:
        started = time.perf_counter()
        responses = await asyncio.gather(*(review() for _ in range(count)))
        elapsed = time.perf_counter() - started
        assert [r.status_code for r in responses] == [200] * count, [r.text for r in responses]
        return elapsed

    one = min([await timed(1) for _ in range(attempts)])
    ten = min([await timed(10) for _ in range(attempts)])
    return one, ten


async def test_end_to_end_review_of_a_pull_request(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    scripted_provider.script(
        tool_call_turn([("call_1", "read_repository_file", {"path": "src/service.py"})]),
        stop_turn(REVIEW),
    )
    app = create_app(e2e_settings(fake_github, scripted_provider, tmp_path))
    with live_server(app) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            response = await post_review(
                client, {"pull_request_url": pull.url + "/files", "include_trace": True}
            )
    assert response.status_code == 200, response.text
    document = response.json()
    scripted_provider.assert_complete()
    assert document["termination_reason"] == "final_review"
    assert document["pull_request"] == {
        "url": pull.url,
        "owner": "acme",
        "repo": "widget",
        "number": 7,
    }
    assert document["revisions"]["head_sha"] == pull.head_sha
    assert document["revisions"]["base_sha"] == pull.base_sha
    assert document["review"] == REVIEW
    assert document["rounds"] == 2
    assert document["tool_calls"] == 1
    assert [turn["protocol_action"] for turn in document["trace"]] == [
        "execute_tools",
        "final_review",
    ]
    for secret in (PROVIDER_KEY, GITHUB_TOKEN, str(tmp_path)):
        assert secret not in response.text


async def test_end_to_end_failures_keep_the_contract(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    scripted_provider.script(
        stop_turn(REVIEW, finish_reason="length"),
        provider_server.Fault.rate_limited("12"),
    )
    app = create_app(e2e_settings(fake_github, scripted_provider, tmp_path))
    with live_server(app) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            stopped = await post_review(
                client, {"pull_request_url": pull.url, "include_trace": True}
            )
            limited = await post_review(client, {"pull_request_url": pull.url})
            foreign = await post_review(client, {"pull_request_url": PR_URL})
            missing = await post_review(client, {"pull_request_url": pull.url[:-1] + "8"})
    stopped_document = assert_error(stopped, 502, "unsupported_finish_reason")
    assert stopped_document["termination_reason"] == "unsupported_finish_reason"
    assert stopped_document["trace"] is None
    assert_error(limited, 503, "opencode_rate_limited")
    assert limited.headers["retry-after"] == "12"
    assert_error(foreign, 422, "invalid_pull_request_url")  # github.com is not this host
    assert_error(missing, 404, "pull_request_not_found")


async def test_end_to_end_ten_reviews_share_the_server_concurrently(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, base=BASE_FILES, head=HEAD_FILES)
    body = {"pull_request_url": pull.url}
    with ScriptedProvider(responder=lambda _: stop_turn(REVIEW), latency=1.0) as provider:
        app = create_app(e2e_settings(fake_github, provider, tmp_path))
        with live_server(app) as base_url:
            async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
                warm = await post_review(client, body)
                assert warm.status_code == 200, warm.text  # the cache now holds the repository
                one, ten = await one_and_ten(lambda: post_review(client, body))
    assert ten < 1.5 * one, (one, ten)


async def test_end_to_end_ten_local_reviews_share_the_server_concurrently(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "widget")
    base = repo.commit_files(BASE_FILES)
    head = repo.commit_files(HEAD_FILES)

    def local_reviewer() -> Any:
        async def reviewer(
            target: PullRequestTarget,
            settings: Settings,
            *,
            include_trace: bool,
            model: ModelClient | None,
        ) -> ReviewResult:
            local = LocalTarget(repo.path, base, head)
            return await run_review(local, settings, include_trace=include_trace, model=model)

        return reviewer

    with ScriptedProvider(responder=lambda _: stop_turn(REVIEW), latency=1.0) as provider:
        app = create_app(settings(opencode_base_url=provider.base_url))
        app.dependency_overrides[get_reviewer] = local_reviewer
        with live_server(app) as base_url:
            async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
                one, ten = await one_and_ten(lambda: post_review(client))
    assert ten < 1.5 * one, (one, ten)


# --- the OpenAPI document against the running app ----------------------------------------------


class _UrlCheckingReviewer(FakeReviewer):
    """Accepts only PR_URL, as the real service accepts only its host's pull requests."""

    async def __call__(
        self,
        target: PullRequestTarget,
        settings: Settings,
        *,
        include_trace: bool,
        model: ModelClient | None,
        post: bool = False,
    ) -> ReviewResult:
        if target.url != PR_URL:
            raise errors.InvalidPullRequestUrl()
        return review_result(trace=include_trace)


def _operations(app: Any) -> list[Any]:
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    operations = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), "the OpenAPI document has an invalid operation"
        operations.append(result.ok())
    return operations


# schemathesis's pytest plugin does not run under pytest 9; its strategies do.
@pytest.mark.parametrize("keys", ["", SERVICE_KEY], ids=["open", "with-keys"])
def test_the_api_keeps_its_openapi_document(keys: str) -> None:
    app = app_with(_UrlCheckingReviewer(), pr_review_api_keys=keys)
    headers = {"Authorization": f"Bearer {SERVICE_KEY}"} if keys else None
    operations = _operations(app)
    assert sorted(f"{op.method.upper()} {op.path}" for op in operations) == [
        "GET /healthz",
        "POST /v1/reviews",
    ]
    for operation in operations:

        @hypothesis.given(case=operation.as_strategy())
        @hypothesis.settings(
            max_examples=50,
            deadline=None,
            suppress_health_check=list(hypothesis.HealthCheck),
            database=None,
        )
        def check(case: schemathesis.Case[Any]) -> None:
            # Every other check runs. This one expects any schema-valid string to be accepted,
            # but a URL must also name a pull request on the configured host (422 otherwise),
            # which JSON Schema cannot say.
            case.call_and_validate(
                headers=headers, excluded_checks=[schemathesis_checks.positive_data_acceptance]
            )

        check()
