"""How `pr-review serve` runs the service: uvicorn, plus a guard against slow clients.

uvicorn bounds neither how long a client may take to send a request head nor how many
connections it holds: `timeout_keep_alive` is armed only after a response, and
`limit_concurrency` answers 503 only once a head is complete, so 400 connections that send
one byte every 10 s keep 400 file descriptors until the process runs out.
The guard is below ASGI, on the connection: `GuardedH11Protocol` is uvicorn's h11 protocol
(selected through the public `http=` setting) with

- a request deadline: a client that owes us bytes (its request head, or the body the app is
  waiting for; h11's client state IDLE or SEND_BODY) for `REQUEST_READ_TIMEOUT_SECONDS` after
  connecting or after our last response is disconnected;
- a connection cap: past `max_connections`, a new connection evicts the connection that
  has owed us bytes the longest (a request already being answered is never evicted); when
  none can be, the new one is closed. A flood of half-open connections so churns through
  itself, while a client that sends its request at once (`/healthz`) gets through;
- quiet resource errors: `accept()` failing with EMFILE or ENFILE is logged once per
  `RESOURCE_LOG_INTERVAL_SECONDS` in one line, with the number of repeats, not as a
  traceback each time (asyncio retries the accept a second later by itself).

The cap is sized from the process's file-descriptor limit, leaving room for what reviews
open (git processes and their pipes, upstream connections, cache files).

Stopping (SECURITY.md): uvicorn catches SIGTERM and SIGINT, shuts down gracefully, then
raises the signal again for the handler that was there before it. With Python's defaults,
SIGTERM then killed `serve` on the spot, before the embedded database and its worker were
stopped. `StopSignals` is that earlier handler: it raises `StopRequested`, so `serve`
unwinds through its cleanup and exits 0 (SIGTERM) or 130 (SIGINT).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import math
import resource
import signal
import socket
import sys
import time
from types import FrameType
from typing import Any, ClassVar, TextIO

import h11
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from pr_review_api.errors import ConfigurationError
from pr_review_api.service.hosts import host_checked
from pr_review_api.settings import Settings

logger = logging.getLogger("pr_review_api.service.server")

# Past the review deadline, a review in flight has already failed with review_timeout; the
# slack lets that answer reach the client before a shutdown gives up on the connection.
SHUTDOWN_SLACK_SECONDS = 10
REQUEST_READ_TIMEOUT_SECONDS = 10.0
KEEP_ALIVE_SECONDS = 5
# File descriptors kept free for the reviews themselves, and the cap's bounds.
RESERVED_FDS = 256
MIN_CONNECTIONS = 16
MAX_CONNECTIONS = 4096
RESOURCE_LOG_INTERVAL_SECONDS = 10.0
_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class StopRequested(Exception):
    """SIGTERM or SIGINT reached `serve`: unwind, running every cleanup on the way."""

    def __init__(self, signal_number: int) -> None:
        super().__init__(signal.Signals(signal_number).name)
        self.signal_number = signal_number


class StopSignals:
    """While entered, SIGTERM and SIGINT raise `StopRequested`, once: a second signal during
    the cleanup is ignored, so it cannot cut the cleanup short (SIGKILL still can). The
    previous handlers come back on exit (`serve` may run inside another program: a test)."""

    HANDLED = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopSignals:
        # Main thread only, like every signal handler.
        self._previous = {number: signal.signal(number, self._on_signal) for number in self.HANDLED}
        return self

    def __exit__(self, *exc: object) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, handler)

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        if self.received is not None:
            logger.warning("already stopping: %s ignored", signal.Signals(number).name)
            return
        self.received = number
        raise StopRequested(number)


def default_max_connections() -> int:
    """A connection cap that leaves `RESERVED_FDS` of the soft fd limit to the reviews."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(MIN_CONNECTIONS, min(MAX_CONNECTIONS, soft - RESERVED_FDS))


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request deadline and a connection cap (see above)."""

    max_connections: ClassVar[int] = MAX_CONNECTIONS
    read_timeout: ClassVar[float] = REQUEST_READ_TIMEOUT_SECONDS

    _owed_since: float = 0.0
    _read_timer: asyncio.TimerHandle | None = None

    @classmethod
    def configured(cls, *, max_connections: int, read_timeout: float) -> type[GuardedH11Protocol]:
        """A protocol class with these bounds."""
        return type(
            cls.__name__,
            (cls,),
            {"max_connections": max_connections, "read_timeout": read_timeout},
        )

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._start_read_deadline()
        if len(self.connections) > self.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_read_deadline()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._start_read_deadline()

    def owes_bytes(self) -> bool:
        """Whether the client is still to send a request head or the body being waited for."""
        return self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and (
            self.cycle is None or not self.cycle.response_started
        )

    def _start_read_deadline(self) -> None:
        self._cancel_read_deadline()
        self._owed_since = time.monotonic()
        self._read_timer = self.loop.call_later(self.read_timeout, self._on_read_deadline)

    def _cancel_read_deadline(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _on_read_deadline(self) -> None:
        self._read_timer = None
        if self.owes_bytes():
            self.drop()

    def drop(self) -> None:
        """Close the connection now (nothing is owed to the client)."""
        if not self.transport.is_closing():
            self.transport.close()

    def _make_room(self) -> None:
        owing = [
            other
            for other in self.connections
            if isinstance(other, GuardedH11Protocol)
            and other is not self
            and not other.transport.is_closing()
            and other.owes_bytes()
        ]
        if owing:
            min(owing, key=lambda other: other._owed_since).drop()
        else:
            self.drop()


class _ResourceErrorLog:
    """An event-loop exception handler that turns repeated EMFILE/ENFILE into one line per
    interval; anything else goes to asyncio's default handler."""

    def __init__(self) -> None:
        self.last = -math.inf
        self.suppressed = 0

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        exc = context.get("exception")
        if not (isinstance(exc, OSError) and exc.errno in _RESOURCE_ERRNOS):
            loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - self.last < RESOURCE_LOG_INTERVAL_SECONDS:
            self.suppressed += 1
            return
        repeats = f" ({self.suppressed} more since the last report)" if self.suppressed else ""
        logger.warning(
            "out of %s: new connections wait until some close%s",
            errno.errorcode.get(exc.errno or 0, "resources"),
            repeats,
        )
        self.last, self.suppressed = now, 0


def guarded_loop() -> asyncio.AbstractEventLoop:
    """uvicorn's loop factory for `serve`: an asyncio loop with quiet resource errors."""
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_ResourceErrorLog())
    return loop


def server_config(
    app: ASGIApp,
    settings: Settings,
    *,
    host: str,
    port: int,
    max_connections: int | None = None,
    read_timeout: float = REQUEST_READ_TIMEOUT_SECONDS,
) -> uvicorn.Config:
    """How `pr-review serve` runs the app: our access log instead of uvicorn's (which would
    log query strings and client addresses), the slow-client guard, a shutdown that
    lets reviews finish, and without service keys the `Host` check (service/hosts.py)."""
    cap = max_connections if max_connections is not None else default_max_connections()
    return uvicorn.Config(
        host_checked(
            app, keys=bool(settings.pr_review_api_keys), allowed=settings.pr_review_allowed_hosts
        ),
        host=host,
        port=port,
        http=GuardedH11Protocol.configured(max_connections=cap, read_timeout=read_timeout),
        loop=f"{__name__}:guarded_loop",
        access_log=False,
        log_config=None,
        proxy_headers=False,
        server_header=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        timeout_graceful_shutdown=math.ceil(settings.review_timeout_seconds)
        + SHUTDOWN_SLACK_SECONDS,
    )


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to `host:port`, or a one-line `ConfigurationError` (a port in use, an
    address this machine does not have) instead of uvicorn's log and exit status 3."""
    address = host.removeprefix("[").removesuffix("]")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigurationError(
                f"Port {port} is already in use on {host}: stop what listens there, "
                "or choose another with --port."
            ) from None
        reason = errno.errorcode.get(exc.errno or 0, "an error")
        raise ConfigurationError(f"Cannot listen on {host} port {port} ({reason}).") from None
    sock.set_inheritable(True)
    return sock


class _OursOrWarnings(logging.Filter):
    """Our own events and the server's at INFO; everyone else's (httpx, httpcore, ...) only
    from WARNING: their INFO lines carry full provider and GitHub URLs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.WARNING:
            return True
        return record.name.startswith(("pr_review_api", "uvicorn.error"))


def configure_service_logging(stream: TextIO | None = None) -> logging.Handler:
    """The log of `pr-review serve`: one line per record on stderr (or `stream`), the access
    log and our events kept, third-party records below WARNING dropped."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    handler.addFilter(_OursOrWarnings())
    root = logging.getLogger()
    for previous in list(root.handlers):  # configured once per process, whoever calls it
        if any(isinstance(f, _OursOrWarnings) for f in previous.filters):
            root.removeHandler(previous)
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    return handler
