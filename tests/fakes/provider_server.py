"""A real, scripted OpenAI-compatible chat-completions server on loopback, for tests.

`ScriptedProvider` listens on 127.0.0.1 on an ephemeral port and answers from its own asyncio
loop in a background thread, so the client under test goes through real sockets, real HTTP/1.1
framing and real faults (resets, truncation, slow drips) that a mock transport cannot produce.

Use it through the `scripted_provider` fixture. `tests/conftest.py` lists this module in its
`pytest_plugins`, so every test module under `tests/` simply asks for it, never imports it::

    from tests.fakes.provider_server import ScriptedProvider, stop_turn, tool_call_turn

    def test_two_rounds(scripted_provider: ScriptedProvider) -> None:
        scripted_provider.script(
            tool_call_turn([("call_1", "read_repository_file", {"path": "a.py"})]),
            stop_turn({"summary": "ok", "findings": [], "notes": []}),
        )
        settings = load_settings(
            opencode_api_key="key", opencode_base_url=scripted_provider.base_url
        )
        ...  # run the code under test
        scripted_provider.assert_complete()
        assert scripted_provider.requests[1].json["messages"][-1]["role"] == "tool"

Outside pytest, `with ScriptedProvider() as provider:` does what the fixture does. To test the
review loop's rules rather than HTTP, use the in-process `ScriptedModel`
(`pr_review_api.llm.testing`) instead: see tests/README.md.

Replies are served in order: first the scripted queue (`script()`), then the `responder`
callable, if any. A request with neither is answered 500 and noted, and `assert_complete()`
then fails. A scripted item is a `Reply` (any status, headers and bytes, plus fault knobs) or a
JSON document (sent as a 200 `application/json` reply); `Fault` builds misbehaving replies.
Request bodies must carry a Content-Length (httpx always sends one for bytes and JSON).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gzip
import json
import random
import socket
import struct
import threading
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from http import HTTPStatus
from types import MappingProxyType, TracebackType
from typing import Any, Literal

import pytest

from pr_review_api.settings import MAX_PROVIDER_RESPONSE_BYTES

CAP = MAX_PROVIDER_RESPONSE_BYTES
DEFAULT_MODEL = "deepseek-v4-flash"
DEFAULT_USAGE: Mapping[str, int] = MappingProxyType(
    {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
)
GZIP_BOMB_INFLATED_BYTES = 64 * 1024 * 1024
_MAX_REQUEST_HEAD_BYTES = 64 * 1024
# How long `gather` holds replies before it gives up (the test then fails on the count).
GATHER_TIMEOUT_SECONDS = 30.0
_START_TIMEOUT_SECONDS = 10.0

Headers = Mapping[str, str] | Sequence[tuple[str, str]]
Ending = Literal["keep", "close", "reset", "stall"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    """Lower-cased names; a repeated header keeps its last value."""
    body: bytes
    json: Any
    """The parsed body, or None when it is not JSON."""


@dataclass(frozen=True)
class Reply:
    """One HTTP response, with knobs for the faults a real network produces."""

    status: int = 200
    headers: Headers = ()
    body: bytes = b""
    delay: float = 0.0
    """Seconds to wait before the status line."""
    drip_bytes: int = 0
    """When > 0, the body goes out this many bytes at a time, `drip_interval` apart."""
    drip_interval: float = 0.0
    send_body_bytes: int | None = None
    """Send only this prefix of the body (Content-Length still announces all of it)."""
    ending: Ending = "keep"
    """After the body: keep the connection, close it (FIN), reset it (RST), or stall open."""
    respond: bool = True
    """False: read the request, then close without a response."""

    def header_pairs(self) -> list[tuple[str, str]]:
        """The headers to send, with Content-Length and Connection added when missing."""
        pairs = list(self.headers.items() if isinstance(self.headers, Mapping) else self.headers)
        names = {name.lower() for name, _ in pairs}
        if not names & {"content-length", "transfer-encoding"}:
            pairs.append(("Content-Length", str(len(self.body))))
        if self.ending != "keep" and "connection" not in names:
            pairs.append(("Connection", "close"))
        return pairs


Scripted = Reply | Mapping[str, Any]
Responder = Callable[[RecordedRequest], Scripted]


# --- Bodies and replies -------------------------------------------------------------------


def encode_body(data: bytes, coding: str) -> bytes:
    """`data` compressed as `coding` says ("raw-deflate" is deflate without the zlib wrapper)."""
    if coding == "gzip":
        return gzip.compress(data, mtime=0)
    if coding == "deflate":
        return zlib.compress(data)
    if coding == "raw-deflate":
        compressor = zlib.compressobj(wbits=-zlib.MAX_WBITS)
        return compressor.compress(data) + compressor.flush()
    return data  # an encoding the client should refuse: the body goes out as given


def body_reply(
    body: bytes,
    *,
    status: int = 200,
    content_type: str | None = "application/json",
    content_encoding: str | None = None,
    headers: Headers = (),
) -> Reply:
    """A reply carrying `body`, compressed when `content_encoding` is given."""
    pairs = list(headers.items() if isinstance(headers, Mapping) else headers)
    if content_type is not None:
        pairs.append(("Content-Type", content_type))
    if content_encoding is not None:
        body = encode_body(body, content_encoding)
        pairs.append(("Content-Encoding", content_encoding.removeprefix("raw-")))
    return Reply(status=status, headers=tuple(pairs), body=body)


def json_reply(
    document: Any,
    *,
    status: int = 200,
    content_encoding: str | None = None,
    headers: Headers = (),
) -> Reply:
    """A JSON reply (200 `application/json` unless told otherwise)."""
    body = json.dumps(document, separators=(",", ":")).encode("utf-8")
    return body_reply(body, status=status, content_encoding=content_encoding, headers=headers)


def chunked(reply: Reply, size: int = 16 * 1024) -> Reply:
    """`reply` framed with Transfer-Encoding: chunked, so no Content-Length announces its size."""
    body = reply.body
    pieces = [body[start : start + size] for start in range(0, len(body), size)]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"
    pairs = reply.headers.items() if isinstance(reply.headers, Mapping) else reply.headers
    headers = [(name, value) for name, value in pairs if name.lower() != "content-length"]
    headers.append(("Transfer-Encoding", "chunked"))
    return replace(reply, headers=tuple(headers), body=framed)


def as_reply(item: Scripted) -> Reply:
    """A scripted item as a reply: a document becomes a 200 JSON reply."""
    return item if isinstance(item, Reply) else json_reply(dict(item))


# --- Chat-completions documents ---------------------------------------------------------


def envelope(
    message: Mapping[str, Any],
    *,
    finish_reason: str | None = "stop",
    response_id: str = "chatcmpl-fake",
    model: str = DEFAULT_MODEL,
    usage: Mapping[str, int] | None = DEFAULT_USAGE,
) -> dict[str, Any]:
    """A chat-completions response with one choice; `usage=None` leaves usage out."""
    document: dict[str, Any] = {
        "id": response_id,
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": dict(message)}],
    }
    if usage is not None:
        document["usage"] = dict(usage)
    return document


def tool_call_turn(
    calls: Sequence[tuple[str, str, Mapping[str, Any] | str]],
    *,
    content: str | None = None,
    finish_reason: str | None = "tool_calls",
    response_id: str = "chatcmpl-fake",
    model: str = DEFAULT_MODEL,
    usage: Mapping[str, int] | None = DEFAULT_USAGE,
) -> dict[str, Any]:
    """A turn asking for `(id, name, arguments)` calls; a dict of arguments is JSON-encoded,
    a string is sent as is (to script malformed arguments)."""
    tool_calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {
                "name": name,
                "arguments": arguments
                if isinstance(arguments, str)
                else json.dumps(dict(arguments), separators=(",", ":")),
            },
        }
        for call_id, name, arguments in calls
    ]
    message = {"role": "assistant", "content": content, "tool_calls": tool_calls}
    return envelope(
        message, finish_reason=finish_reason, response_id=response_id, model=model, usage=usage
    )


def stop_turn(
    content: str | Mapping[str, Any] | None,
    *,
    finish_reason: str | None = "stop",
    response_id: str = "chatcmpl-fake",
    model: str = DEFAULT_MODEL,
    usage: Mapping[str, int] | None = DEFAULT_USAGE,
) -> dict[str, Any]:
    """A final turn; a mapping is JSON-encoded into the content (a final review, say)."""
    text = content if content is None or isinstance(content, str) else json.dumps(dict(content))
    message = {"role": "assistant", "content": text}
    return envelope(
        message, finish_reason=finish_reason, response_id=response_id, model=model, usage=usage
    )


def sized_document(size: int) -> bytes:
    """A valid stop-turn envelope of exactly `size` bytes, padded inside its content."""
    base = json.dumps(stop_turn(""), separators=(",", ":")).encode("utf-8")
    if size < len(base):
        raise ValueError(f"a document needs at least {len(base)} bytes")
    # "a" needs no escaping, so each one adds exactly one byte.
    return json.dumps(stop_turn("a" * (size - len(base))), separators=(",", ":")).encode("utf-8")


@functools.lru_cache(maxsize=4)
def gzip_bomb_bytes(inflated: int = GZIP_BOMB_INFLATED_BYTES) -> bytes:
    """A gzip stream of `inflated` spaces: about a thousandth of that on the wire."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = b" " * (1024 * 1024)
    parts = [compressor.compress(block) for _ in range(inflated // len(block))]
    parts.append(compressor.compress(b" " * (inflated % len(block))))
    parts.append(compressor.flush())
    return b"".join(parts)


_PLAIN_TURN = stop_turn('{"summary":"fine","findings":[],"notes":[]}')


class Fault:
    """Builders of misbehaving replies."""

    @staticmethod
    def close() -> Reply:
        """Read the request, then close the connection without answering."""
        return Reply(respond=False, ending="close")

    @staticmethod
    def reset_mid_body(document: Mapping[str, Any] = _PLAIN_TURN, *, after: int = 16) -> Reply:
        """Send the headers and `after` body bytes, then reset the connection (RST)."""
        return replace(json_reply(document), send_body_bytes=after, ending="reset")

    @staticmethod
    def truncated_body(document: Mapping[str, Any] = _PLAIN_TURN, *, after: int = 16) -> Reply:
        """Announce the whole body, send `after` bytes of it, then close cleanly (FIN)."""
        return replace(json_reply(document), send_body_bytes=after, ending="close")

    @staticmethod
    def truncated_json(document: Mapping[str, Any] = _PLAIN_TURN) -> Reply:
        """A complete HTTP message whose JSON stops halfway."""
        body = json.dumps(document).encode("utf-8")
        return body_reply(body[: len(body) // 2])

    @staticmethod
    def oversized(extra: int = 1, *, content_encoding: str | None = None) -> Reply:
        """A valid envelope of exactly 2 MiB + `extra` decoded bytes (extra=0: at the cap)."""
        return body_reply(sized_document(CAP + extra), content_encoding=content_encoding)

    @staticmethod
    def content_length_over_cap() -> Reply:
        """Headers announcing 2 MiB + 1 bytes, then nothing: only a client that refuses at
        once avoids waiting for the deadline."""
        headers = (("Content-Type", "application/json"), ("Content-Length", str(CAP + 1)))
        return Reply(headers=headers, ending="stall")

    @staticmethod
    def gzip_bomb(inflated: int = GZIP_BOMB_INFLATED_BYTES) -> Reply:
        """A small gzip body that inflates to `inflated` bytes."""
        headers = (("Content-Type", "application/json"), ("Content-Encoding", "gzip"))
        return Reply(headers=headers, body=gzip_bomb_bytes(inflated))

    @staticmethod
    def slow_drip(
        document: Mapping[str, Any] = _PLAIN_TURN, *, chunk: int = 1, interval: float = 0.05
    ) -> Reply:
        """The body `chunk` bytes at a time, `interval` seconds apart: always some progress."""
        return replace(json_reply(document), drip_bytes=chunk, drip_interval=interval)

    @staticmethod
    def delay(seconds: float, reply: Scripted = _PLAIN_TURN) -> Reply:
        """`reply`, after waiting `seconds` before the status line."""
        return replace(as_reply(reply), delay=seconds)

    @staticmethod
    def wrong_content_type(
        content_type: str | None = "text/html; charset=utf-8",
        document: Mapping[str, Any] = _PLAIN_TURN,
    ) -> Reply:
        """A valid JSON body labelled as something else (None: no Content-Type at all)."""
        body = json.dumps(document).encode("utf-8")
        return body_reply(body, content_type=content_type)

    @staticmethod
    def status(status: int, *, headers: Headers = (), body: bytes = b"") -> Reply:
        """An arbitrary status with `body` as text/plain: 401, 403, 500, 503, 3xx..."""
        return body_reply(body, status=status, content_type="text/plain", headers=headers)

    @staticmethod
    def rate_limited(retry_after: str | None = "7", *, body: bytes = b"slow down") -> Reply:
        """A 429, with a Retry-After header unless `retry_after` is None."""
        headers = () if retry_after is None else (("Retry-After", retry_after),)
        return Fault.status(429, headers=headers, body=body)


_UNSCRIPTED = Fault.status(500, body=b"scripted provider: no response was scripted")


# --- The server ---------------------------------------------------------------------------


class ScriptedProvider:
    """A scripted OpenAI-compatible server on 127.0.0.1, served from a background thread."""

    def __init__(
        self,
        *,
        responder: Responder | None = None,
        latency: float | tuple[float, float] = 0.0,
        seed: int = 0,
    ) -> None:
        self.responder = responder
        """Answers every request the script does not (load tests)."""
        self.latency = latency
        """Seconds added before every reply: fixed, or uniform in (low, high)."""
        self.gather = 0
        """Hold every reply until this many requests are in flight at once (0: never hold), or
        `GATHER_TIMEOUT_SECONDS` passed. Set it before sending N requests at once: N in flight
        proves they are served concurrently, by count and not by a clock."""
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._in_flight = 0
        self._peak_in_flight = 0
        self._queue: deque[Scripted] = deque()
        self._requests: list[RecordedRequest] = []
        self._problems: list[str] = []
        self._port = 0
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._startup_error: BaseException | None = None

    # --- Scripting and inspection (any thread) ---

    @property
    def base_url(self) -> str:
        """The OPENCODE_BASE_URL to configure: `http://127.0.0.1:PORT/v1`."""
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def peak_in_flight(self) -> int:
        """The most requests that were waiting for their replies at once."""
        with self._lock:
            return self._peak_in_flight

    def script(self, *replies: Scripted) -> None:
        """Queue replies, served one per request in order."""
        with self._lock:
            self._queue.extend(replies)

    def assert_complete(self) -> None:
        """Every scripted reply was consumed, and no request went unanswered."""
        with self._lock:
            left, problems = len(self._queue), list(self._problems)
        assert not problems, f"scripted provider: {problems}"
        assert left == 0, f"scripted provider: {left} scripted replies were never requested"

    # --- Lifecycle ---

    def start(self) -> ScriptedProvider:
        """Start serving; returns once the port is bound."""
        self._thread = threading.Thread(target=self._run, name="scripted-provider", daemon=True)
        self._thread.start()
        if not self._ready.wait(_START_TIMEOUT_SECONDS) or self._startup_error is not None:
            raise RuntimeError("the scripted provider did not start") from self._startup_error
        return self

    def stop(self) -> None:
        """Stop serving: open connections are cut and the thread is joined."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is None or loop is None or stopping is None:
            return
        self._thread = None
        loop.call_soon_threadsafe(stopping.set)
        thread.join(_START_TIMEOUT_SECONDS)

    def __enter__(self) -> ScriptedProvider:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # surfaced by start(), which would otherwise just wait
            self._startup_error = exc
            self._ready.set()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(
            self._connection, "127.0.0.1", 0, limit=_MAX_REQUEST_HEAD_BYTES
        )
        self._port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            # Python 3.12+ waits here for every connection; a stuck one must not hang the suite.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_START_TIMEOUT_SECONDS):
                    await server.wait_closed()

    # --- Serving (the server's loop) ---

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while (request := await _read_request(reader)) is not None:
                if not await self._answer(request, writer):
                    break
        except asyncio.CancelledError:
            writer.transport.abort()
            raise
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # the client went away mid-request: nothing to answer
        except ValueError:
            self._note("a request that is not HTTP/1.1 with a Content-Length")
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer(self, request: RecordedRequest, writer: asyncio.StreamWriter) -> bool:
        with self._lock:
            self._in_flight += 1
            self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
        try:
            await self._gathered()
            return await _send(self._reply_for(request), writer)
        finally:
            with self._lock:
                self._in_flight -= 1

    async def _gathered(self) -> None:
        """Wait until `gather` requests are in flight; once they were, nothing waits again."""
        deadline = asyncio.get_running_loop().time() + GATHER_TIMEOUT_SECONDS
        while self.gather and asyncio.get_running_loop().time() < deadline:
            with self._lock:
                if self._in_flight >= self.gather:
                    self.gather = 0
                    return
            await asyncio.sleep(0.01)

    def _reply_for(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self._requests.append(request)
            item = self._queue.popleft() if self._queue else None
        if item is None and self.responder is not None:
            try:
                item = self.responder(request)
            except Exception as exc:
                self._note(f"the responder raised {exc!r}")
                return _UNSCRIPTED
        if item is None:
            self._note(f"unscripted request {request.method} {request.path}")
            return _UNSCRIPTED
        reply = as_reply(item)
        return replace(reply, delay=reply.delay + self._latency())

    def _latency(self) -> float:
        if isinstance(self.latency, tuple):
            return self._random.uniform(*self.latency)
        return self.latency

    def _note(self, problem: str) -> None:
        with self._lock:
            self._problems.append(problem)


async def _read_request(reader: asyncio.StreamReader) -> RecordedRequest | None:
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None  # the client closed a kept-alive connection between requests
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, path, _version = request_line.split(" ", 2)
    headers: dict[str, str] = {}
    for line in lines:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    try:
        document = json.loads(body) if body else None
    except ValueError:
        document = None
    return RecordedRequest(method, path, headers, body, document)


async def _send(reply: Reply, writer: asyncio.StreamWriter) -> bool:
    """Write one reply; True when the connection may serve another request."""
    if reply.delay > 0:
        await asyncio.sleep(reply.delay)
    if not reply.respond:
        return False
    writer.write(_status_and_headers(reply))
    await _write_body(reply, writer)
    if reply.ending == "reset":
        await _reset(writer)
    elif reply.ending == "stall":
        await asyncio.Event().wait()  # until the server stops and cancels this connection
    return reply.ending == "keep"


def _status_and_headers(reply: Reply) -> bytes:
    try:
        reason = HTTPStatus(reply.status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {reply.status} {reason}"]
    lines += [f"{name}: {value}" for name, value in reply.header_pairs()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


async def _write_body(reply: Reply, writer: asyncio.StreamWriter) -> None:
    body = reply.body if reply.send_body_bytes is None else reply.body[: reply.send_body_bytes]
    if reply.drip_bytes <= 0:
        writer.write(body)
        await writer.drain()
        return
    for start in range(0, len(body), reply.drip_bytes):
        writer.write(body[start : start + reply.drip_bytes])
        await writer.drain()
        await asyncio.sleep(reply.drip_interval)


async def _reset(writer: asyncio.StreamWriter) -> None:
    # Let what was written reach the socket first, so the client sees a body cut, not an
    # empty connection.
    writer.transport.set_write_buffer_limits(high=0)
    await writer.drain()
    sock = writer.get_extra_info("socket")
    # Linger on with a zero timeout makes close() send RST instead of FIN.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def closed_port_url() -> str:
    """A base URL on a loopback port nobody listens on: connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.fixture
def scripted_provider() -> Iterator[ScriptedProvider]:
    """A started `ScriptedProvider`, stopped after the test."""
    with ScriptedProvider() as provider:
        yield provider
