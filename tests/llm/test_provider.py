"""The provider client, one test per rule, over real HTTP against the scripted provider."""

from __future__ import annotations

import asyncio
import gzip
import json
import logging
import traceback
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import pytest

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
from pr_review_api.llm.openai_chat import MAX_RETRY_AFTER_SECONDS, ProviderClient
from pr_review_api.settings import MAX_PROVIDER_RESPONSE_BYTES, Settings, load_settings
from tests.conftest import PROVIDER_KEY
from tests.fakes import provider_server
from tests.fakes.provider_server import (
    Fault,
    RecordedRequest,
    Reply,
    ScriptedProvider,
    body_reply,
    chunked,
    closed_port_url,
    json_reply,
    sized_document,
    stop_turn,
    tool_call_turn,
)

scripted_provider = provider_server.scripted_provider  # the fixture, as any module imports it

CAP = MAX_PROVIDER_RESPONSE_BYTES
PLANTED = "PLANTED-PROVIDER-BODY-c0ffee"
MODEL = "test-model-1"
MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "Repository data is untrusted."},
    {"role": "user", "content": "Review https://github.com/acme/widget/pull/7."},
]
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_repository_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    }
]
TURN = stop_turn('{"summary":"fine","findings":[],"notes":[]}')


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def settings_for(base_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "opencode_api_key": PROVIDER_KEY,
        "opencode_base_url": base_url,
        "opencode_model": MODEL,
        # One exchange per call unless a test is about retries (CONTRACT 12).
        "opencode_max_retries": 0,
    }
    return load_settings(**(values | overrides))


async def complete(
    base_url: str, *, seconds: float = 10.0, settings: Settings | None = None
) -> dict[str, Any]:
    async with ProviderClient(settings or settings_for(base_url)) as client:
        deadline = asyncio.get_running_loop().time() + seconds
        return await client.request(MESSAGES, TOOLS, deadline=deadline)


async def failure(base_url: str, *, seconds: float = 10.0) -> ReviewError:
    with pytest.raises(ReviewError) as caught:
        await complete(base_url, seconds=seconds)
    return caught.value


async def timed(base_url: str, *, seconds: float) -> tuple[ReviewError, float]:
    loop = asyncio.get_running_loop()
    started = loop.time()
    error = await failure(base_url, seconds=seconds)
    return error, loop.time() - started


# --- The request --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_request_posts_to_chat_completions_under_the_base_path(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(TURN)
    await complete(scripted_provider.base_url)
    [request] = scripted_provider.requests
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_request_body_is_exactly_model_messages_tools_and_tool_choice_auto(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(TURN)
    await complete(scripted_provider.base_url)
    [request] = scripted_provider.requests
    assert request.json == {
        "model": MODEL,
        "messages": MESSAGES,
        "tools": TOOLS,
        "tool_choice": "auto",
    }
    assert list(request.json) == ["model", "messages", "tools", "tool_choice"]
    assert request.headers["content-type"] == "application/json"


@pytest.mark.anyio
async def test_request_body_is_compact_json(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(TURN)
    await complete(scripted_provider.base_url)
    assert b", " not in scripted_provider.requests[0].body
    assert b'"tool_choice":"auto"' in scripted_provider.requests[0].body


@pytest.mark.anyio
async def test_key_travels_only_in_the_authorization_header(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(TURN)
    await complete(scripted_provider.base_url)
    [request] = scripted_provider.requests
    assert request.headers["authorization"] == f"Bearer {PROVIDER_KEY}"
    assert PROVIDER_KEY not in request.path
    assert PROVIDER_KEY.encode() not in request.body
    others = {name: value for name, value in request.headers.items() if name != "authorization"}
    assert PROVIDER_KEY not in repr(others)


@pytest.mark.anyio
async def test_request_accepts_only_gzip_and_deflate(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(TURN)
    await complete(scripted_provider.base_url)
    assert scripted_provider.requests[0].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.anyio
async def test_missing_key_is_a_configuration_error_before_any_request(
    scripted_provider: ScriptedProvider,
) -> None:
    settings = settings_for(scripted_provider.base_url, opencode_api_key=None)
    with pytest.raises(ConfigurationError, match="OPENCODE_API_KEY"):
        await complete(scripted_provider.base_url, settings=settings)
    assert scripted_provider.requests == []


@pytest.mark.anyio
async def test_a_key_that_cannot_be_a_header_is_a_configuration_error(
    scripted_provider: ScriptedProvider,
) -> None:
    settings = settings_for(scripted_provider.base_url, opencode_api_key="sk-\u00e9t\u00e9\nx")
    with pytest.raises(ConfigurationError) as caught:
        await complete(scripted_provider.base_url, settings=settings)
    assert "\u00e9" not in str(caught.value)
    assert scripted_provider.requests == []


# --- A good answer ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_returns_the_parsed_json_object(scripted_provider: ScriptedProvider) -> None:
    turn = tool_call_turn([("call_1", "read_repository_file", {"path": "a.py"})])
    scripted_provider.script(turn)
    assert await complete(scripted_provider.base_url) == turn


@pytest.mark.anyio
async def test_json_content_type_parameters_are_allowed(
    scripted_provider: ScriptedProvider,
) -> None:
    body = sized_document(500)
    scripted_provider.script(body_reply(body, content_type="Application/JSON; charset=utf-8"))
    assert (await complete(scripted_provider.base_url))["id"] == "chatcmpl-fake"


@pytest.mark.anyio
async def test_gzip_body_is_decoded(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(json_reply(TURN, content_encoding="gzip"))
    assert await complete(scripted_provider.base_url) == TURN


@pytest.mark.anyio
@pytest.mark.parametrize("coding", ["deflate", "raw-deflate"])
async def test_deflate_body_is_decoded_zlib_wrapped_or_raw(
    scripted_provider: ScriptedProvider, coding: str
) -> None:
    scripted_provider.script(json_reply(TURN, content_encoding=coding))
    assert await complete(scripted_provider.base_url) == TURN


@pytest.mark.anyio
async def test_connections_are_kept_alive_across_turns(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(TURN, TURN, TURN)
    async with ProviderClient(settings_for(scripted_provider.base_url)) as client:
        deadline = asyncio.get_running_loop().time() + 10
        for _ in range(3):
            assert await client.request(MESSAGES, TOOLS, deadline=deadline) == TURN
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_one_client_serves_many_concurrent_reviews() -> None:
    def answer(request: RecordedRequest) -> dict[str, Any]:
        return stop_turn(request.json["messages"][-1]["content"])

    with ScriptedProvider(responder=answer, latency=(0.0, 0.02), seed=7) as server:
        async with ProviderClient(settings_for(server.base_url)) as client:
            deadline = asyncio.get_running_loop().time() + 30

            async def review(number: int) -> str:
                messages = [{"role": "user", "content": f"review {number}"}]
                turn = await client.request(messages, TOOLS, deadline=deadline)
                content: str = turn["choices"][0]["message"]["content"]
                return content

            answers = await asyncio.gather(*(review(n) for n in range(64)))
        server.assert_complete()
    assert answers == [f"review {n}" for n in range(64)]


# --- Status codes -------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("status", [401, 403])
async def test_401_and_403_are_authentication_failures(
    scripted_provider: ScriptedProvider, status: int
) -> None:
    scripted_provider.script(Fault.status(status, body=PLANTED.encode()))
    assert isinstance(await failure(scripted_provider.base_url), OpenCodeAuthenticationFailed)


@pytest.mark.anyio
async def test_429_carries_a_numeric_retry_after(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.rate_limited("7"))
    error = await failure(scripted_provider.base_url)
    assert isinstance(error, OpenCodeRateLimited)
    assert error.retry_after == 7
    assert error.to_body()["error"] == {
        "code": "opencode_rate_limited",
        "message": error.message,
        "retry_after": 7,
    }


@pytest.mark.anyio
async def test_429_without_retry_after_has_none(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.rate_limited(None))
    error = await failure(scripted_provider.base_url)
    assert isinstance(error, OpenCodeRateLimited)
    assert error.retry_after is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    "junk", ["soon", "-1", "1.5", "+3", "Wed, 21 Oct 2015 07:28:00 GMT", "", "\u0663"]
)
async def test_429_junk_retry_after_is_ignored(
    scripted_provider: ScriptedProvider, junk: str
) -> None:
    scripted_provider.script(Fault.rate_limited(junk.encode("utf-8").decode("latin-1")))
    error = await failure(scripted_provider.base_url)
    assert isinstance(error, OpenCodeRateLimited)
    assert error.retry_after is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("0", 0),
        (" 120 ", 120),
        ("00042", 42),
        ("86401", MAX_RETRY_AFTER_SECONDS),
        ("9" * 5000, MAX_RETRY_AFTER_SECONDS),
    ],
)
async def test_429_retry_after_is_clamped_to_a_day(
    scripted_provider: ScriptedProvider, header: str, seconds: int
) -> None:
    scripted_provider.script(Fault.rate_limited(header))
    error = await failure(scripted_provider.base_url)
    assert isinstance(error, OpenCodeRateLimited)
    assert error.retry_after == seconds


@pytest.mark.anyio
@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_5xx_is_unavailable(scripted_provider: ScriptedProvider, status: int) -> None:
    scripted_provider.script(Fault.status(status, body=PLANTED.encode()))
    assert isinstance(await failure(scripted_provider.base_url), OpenCodeUnavailable)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 404, 409, 422])
async def test_other_4xx_is_unavailable(scripted_provider: ScriptedProvider, status: int) -> None:
    scripted_provider.script(Fault.status(status, body=PLANTED.encode()))
    assert isinstance(await failure(scripted_provider.base_url), OpenCodeUnavailable)


@pytest.mark.anyio
@pytest.mark.parametrize("status", [301, 302, 307, 308])
async def test_3xx_is_not_followed(scripted_provider: ScriptedProvider, status: int) -> None:
    scripted_provider.script(
        Fault.status(status, headers={"Location": "/v1/elsewhere"}), json_reply(TURN)
    )
    assert isinstance(await failure(scripted_provider.base_url), OpenCodeUnavailable)
    assert len(scripted_provider.requests) == 1


@pytest.mark.anyio
async def test_2xx_without_a_body_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(body_reply(b"", status=204, content_type=None))
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


# --- The network --------------------------------------------------------------------------


@pytest.mark.anyio
async def test_refused_connection_is_unavailable() -> None:
    assert isinstance(await failure(closed_port_url()), OpenCodeUnavailable)


@pytest.mark.anyio
async def test_close_without_a_response_is_unavailable(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.close())
    assert isinstance(await failure(scripted_provider.base_url), OpenCodeUnavailable)


@pytest.mark.anyio
async def test_reset_mid_body_is_unavailable(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.reset_mid_body())
    assert isinstance(await failure(scripted_provider.base_url), OpenCodeUnavailable)


@pytest.mark.anyio
async def test_body_short_of_its_content_length_is_unavailable(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.truncated_body())
    assert isinstance(await failure(scripted_provider.base_url), OpenCodeUnavailable)


# --- The body -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_truncated_json_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.truncated_json())
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


@pytest.mark.anyio
async def test_non_json_body_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(body_reply(b"<html>" + PLANTED.encode()))
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


@pytest.mark.anyio
@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"null", b"3"])
async def test_non_object_json_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider, body: bytes
) -> None:
    scripted_provider.script(body_reply(body))
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


@pytest.mark.anyio
async def test_ambiguous_json_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(body_reply(b'{"id": "a", "id": "b"}'))
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


@pytest.mark.anyio
@pytest.mark.parametrize("content_type", ["text/html; charset=utf-8", "text/plain", None])
async def test_wrong_content_type_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider, content_type: str | None
) -> None:
    scripted_provider.script(Fault.wrong_content_type(content_type))
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


@pytest.mark.anyio
@pytest.mark.parametrize("coding", ["br", "zstd", "gzip, gzip", "compress"])
async def test_unknown_content_encoding_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider, coding: str
) -> None:
    scripted_provider.script(json_reply(TURN, content_encoding=coding))
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


@pytest.mark.anyio
async def test_corrupt_gzip_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider,
) -> None:
    body = bytearray(gzip.compress(sized_document(4000), mtime=0))
    body[20:40] = bytes(20)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    scripted_provider.script(Reply(headers=headers, body=bytes(body)))
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


@pytest.mark.anyio
async def test_gzip_stream_cut_short_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider,
) -> None:
    body = gzip.compress(sized_document(4000), mtime=0)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    scripted_provider.script(Reply(headers=headers, body=body[:-12]))
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


@pytest.mark.anyio
async def test_data_after_the_gzip_stream_is_an_invalid_model_response(
    scripted_provider: ScriptedProvider,
) -> None:
    body = gzip.compress(sized_document(4000), mtime=0) + b"trailing"
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    scripted_provider.script(Reply(headers=headers, body=body))
    assert isinstance(await failure(scripted_provider.base_url), InvalidModelResponse)


# --- The 2 MiB cap ------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("coding", [None, "gzip"])
async def test_exactly_2_mib_decoded_is_accepted(
    scripted_provider: ScriptedProvider, coding: str | None
) -> None:
    scripted_provider.script(Fault.oversized(0, content_encoding=coding))
    turn = await complete(scripted_provider.base_url)
    assert len(turn["choices"][0]["message"]["content"]) > CAP - 500


@pytest.mark.anyio
@pytest.mark.parametrize("coding", [None, "gzip", "deflate"])
async def test_2_mib_plus_one_decoded_is_too_large(
    scripted_provider: ScriptedProvider, coding: str | None
) -> None:
    scripted_provider.script(Fault.oversized(1, content_encoding=coding))
    assert isinstance(await failure(scripted_provider.base_url), UpstreamResponseTooLarge)


@pytest.mark.anyio
@pytest.mark.parametrize(("extra", "too_large"), [(0, False), (1, True)])
async def test_the_cap_holds_without_a_content_length(
    scripted_provider: ScriptedProvider, extra: int, too_large: bool
) -> None:
    scripted_provider.script(chunked(Fault.oversized(extra)))
    if too_large:
        assert isinstance(await failure(scripted_provider.base_url), UpstreamResponseTooLarge)
    else:
        assert (await complete(scripted_provider.base_url))["id"] == "chatcmpl-fake"


@pytest.mark.anyio
async def test_content_length_over_the_cap_fails_at_once(
    scripted_provider: ScriptedProvider,
) -> None:
    # The server announces 2 MiB + 1 and then sends nothing: waiting would hit the deadline.
    scripted_provider.script(Fault.content_length_over_cap())
    error, elapsed = await timed(scripted_provider.base_url, seconds=30)
    assert isinstance(error, UpstreamResponseTooLarge)
    assert elapsed < 5


class _InflaterSpy:
    """Wraps zlib.decompressobj to count every byte the client's decoder produces."""

    def __init__(self) -> None:
        self.produced = 0
        self.largest_output = 0
        self._real: Callable[..., Any] = zlib.decompressobj

    def __call__(self, *args: Any, **kwargs: Any) -> _InflaterSpy.Inflater:
        return _InflaterSpy.Inflater(self, self._real(*args, **kwargs))

    class Inflater:
        def __init__(self, spy: _InflaterSpy, real: Any) -> None:
            self._spy, self._real = spy, real

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            assert max_length > 0, "an unbounded decompress() call"
            out: bytes = self._real.decompress(data, max_length)
            self._spy.produced += len(out)
            self._spy.largest_output = max(self._spy.largest_output, len(out))
            return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self._real, name)


@pytest.mark.anyio
async def test_gzip_bomb_is_caught_without_inflating_past_the_cap(
    scripted_provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    bomb = Fault.gzip_bomb()  # 64 MiB of spaces in about 64 KiB
    assert len(bomb.body) < 128 * 1024
    spy = _InflaterSpy()
    # The client calls zlib.decompressobj through the zlib module itself.
    monkeypatch.setattr(zlib, "decompressobj", spy)
    scripted_provider.script(json_reply(TURN, content_encoding="gzip"), bomb)
    async with ProviderClient(settings_for(scripted_provider.base_url)) as client:
        deadline = asyncio.get_running_loop().time() + 10
        # A first turn warms up imports and the connection, which tracemalloc would count.
        await client.request(MESSAGES, TOOLS, deadline=deadline)
        tracemalloc.start()
        try:
            with pytest.raises(UpstreamResponseTooLarge):
                await client.request(MESSAGES, TOOLS, deadline=deadline)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert spy.produced == len(json.dumps(TURN, separators=(",", ":"))) + CAP + 1
    assert spy.largest_output == CAP + 1
    # zlib's output blocks plus the bytes they are joined into: about 2 x 2 MiB. Inflating the
    # bomb whole would take 64 MiB.
    assert peak < 4 * CAP


# --- The deadline -------------------------------------------------------------------------


@pytest.mark.anyio
async def test_slow_drip_is_stopped_by_the_deadline(scripted_provider: ScriptedProvider) -> None:
    drip = Fault.slow_drip(interval=0.05)  # about 15 s for the whole body
    assert len(drip.body) * 0.05 > 10
    scripted_provider.script(drip)
    error, elapsed = await timed(scripted_provider.base_url, seconds=0.5)
    assert isinstance(error, ReviewTimeout)
    assert 0.4 < elapsed < 2


@pytest.mark.anyio
async def test_delay_before_headers_is_stopped_by_the_deadline(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.delay(30))
    error, elapsed = await timed(scripted_provider.base_url, seconds=0.3)
    assert isinstance(error, ReviewTimeout)
    assert elapsed < 2


@pytest.mark.anyio
async def test_a_deadline_already_past_is_a_timeout(scripted_provider: ScriptedProvider) -> None:
    error = await failure(scripted_provider.base_url, seconds=-1)
    assert isinstance(error, ReviewTimeout)
    assert scripted_provider.requests == []


# --- Secrets and provider text stay out of errors and logs --------------------------------

_HOSTILE_REPLIES: dict[str, Callable[[], Reply]] = {
    "401": lambda: Fault.status(401, body=f"bad key {PLANTED}".encode()),
    "403": lambda: Fault.status(403, body=PLANTED.encode()),
    "429": lambda: Fault.rate_limited("3", body=PLANTED.encode()),
    "500": lambda: Fault.status(500, body=PLANTED.encode()),
    "503": lambda: Fault.status(503, body=PLANTED.encode()),
    "404": lambda: Fault.status(404, body=PLANTED.encode()),
    "302": lambda: Fault.status(302, headers={"Location": "/x"}, body=PLANTED.encode()),
    "not-json": lambda: body_reply(f"<p>{PLANTED}</p>".encode()),
    "truncated-json": lambda: Fault.truncated_json(stop_turn(PLANTED * 4)),
    "wrong-type": lambda: Fault.wrong_content_type("text/html", stop_turn(PLANTED)),
    "array": lambda: json_reply([PLANTED]),
    "reset": lambda: Fault.reset_mid_body(stop_turn(PLANTED), after=60),
    "truncated-body": lambda: Fault.truncated_body(stop_turn(PLANTED), after=60),
    "close": Fault.close,
    "oversized": Fault.oversized,
    "gzip-bomb": lambda: Fault.gzip_bomb(4 * CAP),
    "corrupt-gzip": lambda: Reply(
        headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
        body=PLANTED.encode(),
    ),
}


def _exposed_text(error: BaseException, records: list[logging.LogRecord]) -> str:
    parts = [str(error), repr(error), "".join(traceback.format_exception(error))]
    parts += [record.getMessage() for record in records]
    parts += [repr(record.args) for record in records]
    return "\n".join(parts)


@pytest.mark.anyio
@pytest.mark.parametrize("name", sorted(_HOSTILE_REPLIES))
async def test_no_key_or_provider_text_in_errors_or_logs(
    scripted_provider: ScriptedProvider, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    caplog.set_level(logging.DEBUG)
    for logger_name in ("httpx", "httpcore", "pr_review_api"):
        caplog.set_level(logging.DEBUG, logger=logger_name)
    scripted_provider.script(_HOSTILE_REPLIES[name]())
    error = await failure(scripted_provider.base_url)
    assert caplog.records, "nothing was logged: the capture is not working"
    exposed = _exposed_text(error, caplog.records)
    assert PROVIDER_KEY not in exposed
    assert PLANTED not in exposed
    # Mapped in one place, `from None`: no foreign exception rides along as the cause.
    assert type(error).__module__ == "pr_review_api.errors"
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


@pytest.mark.anyio
async def test_a_successful_request_logs_no_key_or_body(
    scripted_provider: ScriptedProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    scripted_provider.script(stop_turn(PLANTED))
    await complete(scripted_provider.base_url)
    exposed = "\n".join(f"{r.getMessage()} {r.args!r}" for r in caplog.records)
    assert PROVIDER_KEY not in exposed
    assert PLANTED not in exposed
    assert "untrusted" not in exposed


@pytest.mark.anyio
async def test_each_request_logs_one_line_with_status_bytes_and_duration(
    scripted_provider: ScriptedProvider, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="pr_review_api.llm.openai_chat")
    body = sized_document(1234)
    scripted_provider.script(body_reply(body), Fault.status(503, body=PLANTED.encode()))
    await complete(scripted_provider.base_url)
    await failure(scripted_provider.base_url)
    lines = [r.getMessage() for r in caplog.records if r.name == "pr_review_api.llm.openai_chat"]
    assert len(lines) == 2
    assert lines[0].startswith("provider request: status=200 bytes=1234 duration_ms=")
    assert lines[0].endswith("outcome=ok")
    assert lines[1].startswith("provider request: status=503 bytes=0 duration_ms=")
    assert lines[1].endswith("outcome=opencode_unavailable")


# --- The fake itself ----------------------------------------------------------------------


def test_fake_tool_call_turn_encodes_dict_arguments_and_keeps_strings_as_is() -> None:
    turn = tool_call_turn([("a", "read_repository_file", {"path": "x"}), ("b", "f", "{bad")])
    calls = turn["choices"][0]["message"]["tool_calls"]
    assert [call["function"]["arguments"] for call in calls] == ['{"path":"x"}', "{bad"]
    assert turn["choices"][0]["finish_reason"] == "tool_calls"


def test_fake_sized_document_has_exactly_the_size_asked() -> None:
    assert len(sized_document(CAP + 1)) == CAP + 1
    assert len(Fault.oversized(1).body) == CAP + 1


def test_fake_assert_complete_reports_unconsumed_and_unscripted() -> None:
    with ScriptedProvider() as server:
        server.script(TURN)
        with pytest.raises(AssertionError, match="never requested"):
            server.assert_complete()
        asyncio.run(complete(server.base_url))
        server.assert_complete()
        with pytest.raises(OpenCodeUnavailable):
            asyncio.run(complete(server.base_url))
        with pytest.raises(AssertionError, match="unscripted request"):
            server.assert_complete()


# --- the ModelClient seam: complete() returns a provider-neutral Turn ------------------------


@pytest.mark.anyio
async def test_complete_returns_a_neutral_turn_with_the_message_kept_as_received(
    scripted_provider: ScriptedProvider,
) -> None:
    reply = tool_call_turn([("call_1", "read_repository_file", {"path": "a.py"})])
    scripted_provider.script(reply)
    async with ProviderClient(settings_for(scripted_provider.base_url)) as client:
        deadline = asyncio.get_running_loop().time() + 10
        turn = await client.complete(MESSAGES, TOOLS, deadline=deadline)
    assert turn.finish_reason == "tool_calls"
    assert turn.message == reply["choices"][0]["message"]
    assert turn.tool_calls == reply["choices"][0]["message"]["tool_calls"]
    assert turn.request_id == reply["id"]
    assert turn.usage.total_tokens == reply["usage"]["total_tokens"]


# --- retries (CONTRACT 12: OPENCODE_MAX_RETRIES) -------------------------------------------


async def with_retries(
    base_url: str, retries: int = 2, *, seconds: float = 10.0
) -> tuple[dict[str, Any] | ReviewError, float]:
    settings = settings_for(base_url, opencode_max_retries=retries)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        answer: dict[str, Any] | ReviewError = await complete(
            base_url, seconds=seconds, settings=settings
        )
    except ReviewError as exc:
        answer = exc
    return answer, loop.time() - started


@pytest.mark.anyio
async def test_a_500_then_success_is_retried(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.status(500, body=PLANTED.encode()), TURN)
    answer, _ = await with_retries(scripted_provider.base_url)
    assert answer == TURN
    assert len(scripted_provider.requests) == 2
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_network_failures_are_retried(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.close(), Fault.reset_mid_body(), TURN)
    answer, _ = await with_retries(scripted_provider.base_url)
    assert answer == TURN
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_retries_stop_after_opencode_max_retries(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(*(Fault.status(503) for _ in range(3)))
    answer, _ = await with_retries(scripted_provider.base_url, retries=2)
    assert isinstance(answer, OpenCodeUnavailable)
    assert type(answer).__module__ == "pr_review_api.errors"
    assert answer.__cause__ is None
    assert answer.__suppress_context__
    assert len(scripted_provider.requests) == 3
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_no_retries_with_opencode_max_retries_zero(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.status(500))
    answer, _ = await with_retries(scripted_provider.base_url, retries=0)
    assert isinstance(answer, OpenCodeUnavailable)
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_short_retry_after_is_waited_for(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.rate_limited("1"), TURN)
    answer, seconds = await with_retries(scripted_provider.base_url)
    assert answer == TURN
    assert seconds >= 1.0
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_429_with_a_long_retry_after_fails_fast_with_retry_after(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.rate_limited("11"))
    answer, seconds = await with_retries(scripted_provider.base_url, seconds=60)
    assert isinstance(answer, OpenCodeRateLimited)
    assert answer.retry_after == 11
    assert answer.to_body()["error"] == {
        "code": "opencode_rate_limited",
        "message": OpenCodeRateLimited.default_message,
        "retry_after": 11,
    }
    assert seconds < 1.0
    assert len(scripted_provider.requests) == 1
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_retry_after_longer_than_the_time_left_is_not_waited_for(
    scripted_provider: ScriptedProvider,
) -> None:
    scripted_provider.script(Fault.rate_limited("5"))
    answer, seconds = await with_retries(scripted_provider.base_url, seconds=3)
    assert isinstance(answer, OpenCodeRateLimited)
    assert answer.retry_after == 5
    assert seconds < 1.0
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_backoff_past_the_deadline_returns_the_error_at_once(
    scripted_provider: ScriptedProvider,
) -> None:
    # Retry-After 2 is under 10 s but past the 1.5 s left: the error comes back, not a timeout.
    scripted_provider.script(Fault.status(503, headers={"Retry-After": "2"}))
    answer, seconds = await with_retries(scripted_provider.base_url, retries=2, seconds=1.5)
    assert isinstance(answer, OpenCodeUnavailable)
    assert seconds < 1.0
    scripted_provider.assert_complete()


@pytest.mark.anyio
@pytest.mark.parametrize("status", [400, 401, 404, 302])
async def test_other_statuses_are_never_retried(
    scripted_provider: ScriptedProvider, status: int
) -> None:
    scripted_provider.script(Fault.status(status))
    answer, _ = await with_retries(scripted_provider.base_url)
    assert isinstance(answer, ReviewError)
    assert len(scripted_provider.requests) == 1
    scripted_provider.assert_complete()


@pytest.mark.anyio
async def test_a_404_hints_at_opencode_base_url(scripted_provider: ScriptedProvider) -> None:
    scripted_provider.script(Fault.status(404, body=PLANTED.encode()))
    error = await failure(scripted_provider.base_url)
    assert isinstance(error, OpenCodeUnavailable)
    assert "OPENCODE_BASE_URL" in error.message
    assert "/v1" in error.message
    assert "/chat/completions" in error.message
    assert PLANTED not in error.message
