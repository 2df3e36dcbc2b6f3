"""What every upstream client (the provider, the forges) shares: the one capped, deadline-bound
body reader, and the TLS context (`tls_context`).

A response body is untrusted: it may be huge, it may announce a size it never sends, and it may
be a gzip bomb (64 KiB on the wire, 64 MiB inflated). `read_capped()` reads the raw stream and
decodes it chunk by chunk with `BoundedDecoder`, which never produces more than the cap plus one
byte, so no body is ever held in memory past its cap whatever its Content-Encoding. httpx's own
decoders inflate a chunk whole, which is why GitHub's metadata reader once peaked at 142 MiB for
a 1 MiB cap.

Failures are this module's own exceptions (`BodyTooLarge`, `BodyCorrupt`,
`UnsupportedEncoding`); each caller maps them to its contract error in one place. They carry no
body text.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import zlib
from collections.abc import Callable

import certifi
import httpx

ACCEPTED_ENCODINGS = "gzip, deflate"

_GZIP_WBITS = 16 + zlib.MAX_WBITS
_ZLIB_WBITS = zlib.MAX_WBITS
_RAW_DEFLATE_WBITS = -zlib.MAX_WBITS
_CODINGS = frozenset({"identity", "gzip", "x-gzip", "deflate"})


@functools.cache
def tls_context() -> ssl.SSLContext:
    """httpx's default verification (certifi's CA bundle), built once for the process: loading
    the bundle costs 20-50 ms of CPU, which a client made per review paid each time."""
    return ssl.create_default_context(cafile=certifi.where())


class BodyError(Exception):
    """A response body that was refused; never carries any of the body."""


class BodyTooLarge(BodyError):
    """The decoded body (or its declared length) passed the cap."""


class BodyCorrupt(BodyError):
    """A compressed body that did not decode, or did not end where the body did."""


class UnsupportedEncoding(BodyError):
    """A Content-Encoding other than identity, gzip or deflate."""


def bounded_decimal(text: str, ceiling: int) -> int | None:
    """A non-negative decimal header value clamped to `ceiling`; None when it is not one."""
    text = text.strip()
    if not (text.isascii() and text.isdigit()):
        return None
    digits = text.lstrip("0") or "0"
    # Compare lengths first: int() of a 5000-digit header raises, and costs time before that.
    if len(digits) > len(str(ceiling)):
        return ceiling
    return min(int(digits), ceiling)


class BoundedDecoder:
    """Decodes a Content-Encoding chunk by chunk, never producing more than `limit` + 1 bytes.

    `decompress(chunk, max_length)` stops at the cap, where httpx's decoders would inflate the
    whole chunk first.
    """

    def __init__(self, content_encoding: str, limit: int) -> None:
        coding = content_encoding.strip().lower() or "identity"
        if coding not in _CODINGS:
            raise UnsupportedEncoding()
        self._coding = coding
        self._limit = limit
        self._head = b""
        self._inflater: zlib._Decompress | None = None
        self.produced = 0

    def feed(self, chunk: bytes) -> bytes:
        """The decoded bytes of `chunk`; raises once the decoded total passes the limit."""
        try:
            out = chunk if self._coding == "identity" else self._inflate(chunk)
        except zlib.error:
            raise BodyCorrupt() from None
        self.produced += len(out)
        if self.produced > self._limit:
            raise BodyTooLarge()
        return out

    def finish(self) -> None:
        """Checks that a compressed stream ended exactly where the body did."""
        if self._coding == "identity":
            return
        inflater = self._inflater
        if inflater is None or not inflater.eof or inflater.unused_data:
            raise BodyCorrupt()

    def _inflate(self, chunk: bytes) -> bytes:
        if self._inflater is None:
            # Two bytes tell a zlib header from raw deflate; a drip may send one at a time.
            self._head += chunk
            if len(self._head) < 2:
                return b""
            chunk, self._head = self._head, b""
            self._inflater = zlib.decompressobj(self._wbits(chunk))
        # Never 0: zlib reads max_length=0 as "no limit". Output below the bound means all of
        # the chunk was consumed, so no unconsumed tail is ever left behind.
        room = self._limit - self.produced + 1
        return self._inflater.decompress(chunk, room)

    def _wbits(self, head: bytes) -> int:
        if self._coding != "deflate":
            return _GZIP_WBITS
        # RFC 9110 says zlib-wrapped, but some servers send raw deflate, as browsers accept.
        cmf, flg = head[0], head[1]
        is_zlib = cmf & 0x0F == 8 and (cmf << 8 | flg) % 31 == 0
        return _ZLIB_WBITS if is_zlib else _RAW_DEFLATE_WBITS


def declared_too_large(headers: httpx.Headers, limit: int) -> bool:
    """Whether Content-Length announces more than `limit` bytes.

    The length counts encoded bytes; a compressed body over the cap could decode to less only
    by compression's few bytes of framing, so no real answer is lost by refusing it at once.
    """
    declared = bounded_decimal(headers.get("content-length", ""), limit + 1)
    return declared is not None and declared > limit


async def read_capped(
    response: httpx.Response,
    limit: int,
    *,
    deadline: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> bytes:
    """The decoded body of a streamed `response`, at most `limit` bytes, by `deadline`.

    `deadline` is a loop.time() value (None: the caller bounds the time). `progress` is told
    the decoded size after each chunk (for a log line). Raises `BodyTooLarge`, `BodyCorrupt`,
    `UnsupportedEncoding`, `TimeoutError` or an `httpx.HTTPError`.
    """
    if declared_too_large(response.headers, limit):
        raise BodyTooLarge()
    if response.is_stream_consumed:
        # Built in memory (a test's mock transport), never off a socket: only the cap applies.
        if len(response.content) > limit:
            raise BodyTooLarge()
        return response.content
    decoder = BoundedDecoder(response.headers.get("content-encoding", ""), limit)
    parts: list[bytes] = []
    async with asyncio.timeout_at(deadline):
        async for chunk in response.aiter_raw():
            parts.append(decoder.feed(chunk))
            if progress is not None:
                progress(decoder.produced)
    decoder.finish()
    return b"".join(parts)
