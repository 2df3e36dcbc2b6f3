"""The one ASGI middleware: an access log line per request, and the last line of defence.

`AccessLog` writes one structured line per request (method, path, status, duration, error
code; no bodies, headers, query strings or client addresses). An exception nothing else
handled becomes the fixed 500 `internal_error` body here, logged by its type and frames only.
"""

from __future__ import annotations

import logging
import time
import traceback
from pathlib import PurePath

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pr_review_api.service.errors import ERROR_CODE_KEY, InternalError, error_response

logger = logging.getLogger("pr_review_api.service.app")
access_logger = logging.getLogger("pr_review_api.access")

MAX_LOGGED_PATH_CHARS = 200


class AccessLog:
    """One log line per request, and a fixed 500 for anything unexpected."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 0

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        except Exception as exc:
            log_unexpected(scope, exc)
            if status == 0:
                await error_response(InternalError(), scope)(scope, receive, send_and_note)
        finally:
            log_access(scope, status, time.perf_counter() - started)


def loggable_path(scope: Scope) -> str:
    """The request path, escaped so that it cannot forge log lines, and bounded."""
    path = str(scope.get("path", ""))[:MAX_LOGGED_PATH_CHARS]
    return path.encode("unicode_escape").decode("ascii")


def log_access(scope: Scope, status: int, seconds: float) -> None:
    fields = {
        "method": str(scope.get("method", "")),
        "path": loggable_path(scope),
        "status": status,
        "duration_ms": round(seconds * 1000),
        "code": scope.get("state", {}).get(ERROR_CODE_KEY) or "-",
    }
    access_logger.info(
        "method=%(method)s path=%(path)s status=%(status)d duration_ms=%(duration_ms)d "
        "code=%(code)s",
        fields,
        extra={"access": fields},
    )


def log_unexpected(scope: Scope, exc: Exception) -> None:
    # Frames and the exception's type only: its message could quote a key, a body or a path.
    frames = traceback.extract_tb(exc.__traceback__)[-8:]
    where = " <- ".join(
        f"{PurePath(frame.filename).name}:{frame.lineno}:{frame.name}" for frame in reversed(frames)
    )
    logger.error(
        "unexpected %s in %s %s at %s",
        type(exc).__name__,
        scope.get("method", ""),
        loggable_path(scope),
        where,
    )
