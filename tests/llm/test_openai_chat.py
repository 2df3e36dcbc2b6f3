"""The provider client (llm/openai_chat.py), one test per rule, over real sockets against
the scripted provider: the request, a good answer, statuses, the network, and secrets.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from pr_review_api.errors import (
    ConfigurationError,
    InvalidModelResponse,
    OpenCodeAuthenticationFailed,
    OpenCodeRateLimited,
    OpenCodeUnavailable,
)
from pr_review_api.llm.openai_chat import MAX_RETRY_AFTER_SECONDS, ProviderClient
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import (
    Fault,
    RecordedRequest,
    Reply,
    ScriptedProvider,
    body_reply,
    closed_port_url,
    json_reply,
    sized_document,
    stop_turn,
    tool_call_turn,
)
from tests.llm.support import (
    CAP,
    MESSAGES,
    MODEL,
    PLANTED,
    TOOLS,
    TURN,
    complete,
    failure,
    settings_for,
)

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
