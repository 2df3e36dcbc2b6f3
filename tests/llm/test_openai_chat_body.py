"""The provider client (llm/openai_chat.py): the answer's body, its encodings, and the 2 MiB cap."""

from __future__ import annotations

import asyncio
import gzip
import json
import tracemalloc
import zlib
from collections.abc import Callable
from typing import Any

import pytest

from pr_review_api.errors import InvalidModelResponse, UpstreamResponseTooLarge
from pr_review_api.llm.openai_chat import ProviderClient
from tests.fakes.provider_server import (
    Fault,
    Reply,
    ScriptedProvider,
    body_reply,
    chunked,
    json_reply,
    sized_document,
)
from tests.llm.support import CAP, MESSAGES, PLANTED, TOOLS, TURN, complete, failure, settings_for

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
    # The server announces 2 MiB + 1 and then sends nothing: a client that waited would meet
    # the deadline and fail with review_timeout, so the error itself says it refused at once.
    scripted_provider.script(Fault.content_length_over_cap())
    error = await failure(scripted_provider.base_url, seconds=30)
    assert isinstance(error, UpstreamResponseTooLarge)


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
