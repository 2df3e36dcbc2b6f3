"""Git smart-HTTP as the fake forges serve it: git's own `git-http-backend` run as a CGI over
the fake's bare repositories, and the loopback plumbing both fake servers share.

`GitHandler` is the base of a fake's request handler: HTTP/1.1 without Nagle's delay, quiet,
it reads a request's body (plain or chunked, as git sends a large fetch), writes an answer with
an exact Content-Length, and runs the backend for a git request (`serve_git`); who may fetch,
where a redirect sends git, and which methods a fake answers are the fake's own rules.
Every request a fake answers goes one way (`GitHandler.dispatch`): the methods it answers
(`methods`; any other gets the standard library's 501), its record made and kept (`record`),
the body read, then the fake's own routing (`route`).
`LoopbackServer` is the threading server under it, started by `serve_in_thread` and stopped by
`stop`.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from abc import abstractmethod
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import SplitResult, urlsplit

GIT_EXEC_PATH = Path(
    subprocess.run(
        ["git", "--exec-path"], capture_output=True, check=True, text=True
    ).stdout.strip()
)
HTTP_BACKEND = GIT_EXEC_PATH / "git-http-backend"


class LoopbackServer(ThreadingHTTPServer):
    """A fake's threading server on 127.0.0.1."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 128  # socketserver's 5 drops connections when many reviews start at once

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return  # a client that hung up (a timeout, a capped read) is not an error here
        super().handle_error(request, client_address)


def serve_in_thread(server: LoopbackServer) -> threading.Thread:
    """`server` served by a daemon thread, started."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    return thread


def stop(server: LoopbackServer, thread: threading.Thread) -> None:
    """Stop serving, close the socket, and wait a little for the thread."""
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


Recorded = TypeVar("Recorded")


class GitHandler(BaseHTTPRequestHandler, Generic[Recorded]):
    """A fake forge's request handler: one dispatcher, body reading, answers, and git over
    smart HTTP. The fake says which methods it answers, how a request is recorded and where
    it goes."""

    protocol_version = "HTTP/1.1"
    methods: ClassVar[frozenset[str]] = frozenset()

    def do_GET(self) -> None:
        self.dispatch()

    def do_POST(self) -> None:
        self.dispatch()

    def do_PUT(self) -> None:
        self.dispatch()

    def do_PATCH(self) -> None:
        self.dispatch()

    def do_DELETE(self) -> None:
        self.dispatch()

    def dispatch(self) -> None:
        """Record the request, read its body and route it; a method the fake does not answer
        is refused as `BaseHTTPRequestHandler` refuses a method it has no `do_` for."""
        if self.command not in self.methods:
            self.send_error(HTTPStatus.NOT_IMPLEMENTED, f"Unsupported method ({self.command!r})")
            return
        parts = urlsplit(self.path)
        record = self.record(parts)
        self.route(record, parts, self._read_body())

    @abstractmethod
    def record(self, parts: SplitResult) -> Recorded:
        """The request's record, kept by the fake."""

    @abstractmethod
    def route(self, record: Recorded, parts: SplitResult, body: bytes) -> None:
        """Answer the request."""

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes; without this, Nagle's algorithm and the
        # client's delayed acknowledgement add tens of milliseconds to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:
        return  # keep test output quiet

    def serve_git(
        self, git_root: Path, path: str, query: str, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        """The backend's answer to this git request (`path` under `git_root`): its status,
        headers and payload, for the caller to send."""
        env = {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_PROJECT_ROOT": str(git_root),
            "GIT_HTTP_EXPORT_ALL": "1",
            "GATEWAY_INTERFACE": "CGI/1.1",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REQUEST_METHOD": self.command,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_TYPE": self.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
        }
        for header, variable in (
            ("Git-Protocol", "HTTP_GIT_PROTOCOL"),
            ("Content-Encoding", "HTTP_CONTENT_ENCODING"),
        ):
            if header in self.headers:
                env[variable] = self.headers[header]
        done = subprocess.run(
            [str(HTTP_BACKEND)], input=body, capture_output=True, env=env, check=False
        )
        head, _, payload = done.stdout.partition(b"\r\n\r\n")
        status = 200
        headers: dict[str, str] = {}
        for line in head.decode("latin-1").split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.split()[0])
            elif name:
                headers[name] = value.strip()
        return status, headers, payload

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _write(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
        """The answer, with its own Content-Length whatever `headers` said of its framing."""
        self.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
