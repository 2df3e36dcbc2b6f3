"""Helpers shared by the hostile suite: an audit of what the process touches, and figures.

`audit()` records, through a Python audit hook (PEP 578), every file the process opens and
every process it starts while the block runs, in any thread. The hook is installed once and
costs one flag test when no audit is active.

`FIGURES` counts what the suite tried (repositories, paths, tool calls, envelopes, faults,
reviews); `tests/hostile/conftest.py` prints them at the end of the run.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sys
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

FIGURES: Counter[str] = Counter()
RESOURCE_NOTES: dict[str, str] = {}


@dataclass
class AuditLog:
    """What the process did while an audit was active."""

    opened: list[str] = field(default_factory=list)
    processes: list[tuple[list[str], str | None]] = field(default_factory=list)
    """(argument vector, working directory) of each process started."""
    changes: list[tuple[str, str]] = field(default_factory=list)
    """(event, path) of each file-system change: remove, rename, mkdir, symlink..."""


_CHANGE_EVENTS = frozenset(
    {"os.remove", "os.rename", "os.mkdir", "os.symlink", "os.link", "os.rmdir", "shutil.rmtree"}
)
_lock = threading.Lock()
_active: list[AuditLog] = []
_installed: list[bool] = []  # one entry once the hook is in: hooks cannot be removed


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "surrogateescape")
    return str(value)


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if not _active:
        return
    if event == "open":
        path = args[0]
        if isinstance(path, int):
            return
        record: tuple[str, Any] = ("open", _text(path))
    elif event == "subprocess.Popen":
        argv = (
            [_text(a) for a in args[1]] if isinstance(args[1], list | tuple) else [_text(args[1])]
        )
        record = ("process", (argv, None if args[2] is None else _text(args[2])))
    elif event in _CHANGE_EVENTS:
        record = ("change", (event, _text(args[0])))
    else:
        return
    with _lock:
        for log in _active:
            kind, value = record
            if kind == "open":
                log.opened.append(value)
            elif kind == "process":
                log.processes.append(value)
            else:
                log.changes.append(value)


@contextmanager
def audit() -> Iterator[AuditLog]:
    """Record every open, process start and file-system change until the block ends."""
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed.append(True)
    log = AuditLog()
    with _lock:
        _active.append(log)
    try:
        yield log
    finally:
        with _lock:
            _active.remove(log)


READ_ONLY_GIT = frozenset({"cat-file", "ls-tree", "grep", "diff", "merge-base", "rev-parse"})


def git_subcommand(argv: list[str]) -> str | None:
    """The subcommand of a git argument vector, skipping global options and `-c k=v`."""
    index = 1
    while index < len(argv):
        arg = argv[index]
        if arg == "-c":
            index += 2
            continue
        if arg.startswith("-"):
            index += 1
            continue
        return arg
    return None


def assert_confined(log: AuditLog, git_dir: Path) -> None:
    """Only read-only git on `git_dir` ran, and Python opened and changed nothing."""
    allowed_opens = {os.devnull}
    stray = [path for path in log.opened if path not in allowed_opens]
    assert not stray, f"files opened while tools ran: {stray[:5]}"
    assert not log.changes, f"file-system changes while tools ran: {log.changes[:5]}"
    for argv, cwd in log.processes:
        assert argv[0] == "git", argv[:3]
        assert argv[1] == f"--git-dir={git_dir}", argv[:3]
        assert git_subcommand(argv) in READ_ONLY_GIT, argv[:6]
        assert cwd is not None, argv[:3]
        assert Path(cwd) == git_dir, cwd


def open_fds() -> int:
    """Open file descriptors of this process."""
    return len(os.listdir("/proc/self/fd"))


def child_processes() -> int:
    """Live child processes of this process (long-lived git helpers included)."""
    me, count = str(os.getpid()), 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces) start at ") ".
        if stat.rsplit(") ", 1)[-1].split()[1] == me:
            count += 1
    return count


def rss_kib() -> int:
    """Resident memory of this process now, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def peak_rss_kib() -> int:
    """The process's peak resident memory so far, in KiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


# --- Secrets ------------------------------------------------------------------------------

SERVICE_KEY = "svc-test-SERVICE-SECRET-90d1e5"


def secret_forms() -> dict[str, str]:
    """Every spelling of the suite's secrets a leak could take: as is, in a git Basic
    credential, base64-encoded, URL-encoded."""
    from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY

    forms: dict[str, str] = {}
    for name, secret in (
        ("provider key", PROVIDER_KEY),
        ("GitHub token", GITHUB_TOKEN),
        ("service key", SERVICE_KEY),
    ):
        forms[name] = secret
        forms[f"{name} (base64)"] = base64.b64encode(secret.encode()).decode()
        forms[f"{name} (url-encoded)"] = quote(secret, safe="")
    basic = base64.b64encode(f"x-access-token:{GITHUB_TOKEN}".encode()).decode()
    forms["GitHub token (git Basic credential)"] = basic
    return forms


def leaks(text: str | bytes) -> list[str]:
    """The names of the secret forms found in `text`."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return [name for name, form in secret_forms().items() if form in text]


def scan_tree(root: Path) -> list[tuple[str, list[str]]]:
    """(file, leaks) for every regular file under `root` that holds a secret."""
    found = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if hits := leaks(data):
            found.append((str(path), hits))
    return found


class CapturingHandler(logging.Handler):
    """Sees every record, fully formatted (message, arguments, exception, stack, extras),
    scans it for secrets as it arrives, and keeps the latest few thousand texts."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: deque[str] = deque(maxlen=5000)
        self.count = 0
        self.leaked: list[tuple[str, list[str]]] = []
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        extra = {k: v for k, v in vars(record).items() if k not in _STANDARD_RECORD_FIELDS}
        if extra:
            text = f"{text} {extra!r}"
        self.count += 1
        if found := leaks(text):
            self.leaked.append((text[:200], found))
        self.texts.append(text)


_STANDARD_RECORD_FIELDS = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


@contextmanager
def capture_all_logging() -> Iterator[CapturingHandler]:
    """Every log record of every logger, at DEBUG, for the length of the block."""
    root = logging.getLogger()
    handler = CapturingHandler()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def exception_text(exc: BaseException) -> str:
    """All a handler could print of an exception: message, repr, body, formatted chain."""
    parts = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    to_body = getattr(exc, "to_body", None)
    if callable(to_body):
        parts.append(json.dumps(to_body()))
    return "\n".join(parts)


# --- A real server ------------------------------------------------------------------------


@contextmanager
def live_server(app: Any, settings: Any) -> Iterator[str]:
    """Serve `app` as `pr-review serve` would (its uvicorn config) on an ephemeral loopback
    port, from a background thread; yield the base URL. Leaving stops it and waits."""
    import socket

    import uvicorn

    from pr_review_api.service.server import server_config

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = server_config(app, settings, host="127.0.0.1", port=port)
    config.timeout_graceful_shutdown = 5
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    try:
        while not server.started:
            assert thread.is_alive(), "uvicorn failed to start"
            assert time.monotonic() < deadline, "uvicorn did not start in time"
            time.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        sock.close()


# --- The whole suite's log records ----------------------------------------------------------


@dataclass
class SuiteLogScanner:
    """Scans every log record the whole test session creates, at every level, for secrets,
    without changing which records any handler receives.

    Loggers are made to create every record (`isEnabledFor` answers yes); `callHandlers`
    scans each one, then passes on only those the logger would have passed on anyway. The
    test a record came from is read from `PYTEST_CURRENT_TEST`.
    """

    scanned: int = 0
    leaked: list[tuple[str, str, list[str]]] = field(default_factory=list)
    _saved: tuple[Any, Any] | None = None

    def install(self) -> None:
        if self._saved is not None:
            return
        enabled, call = logging.Logger.isEnabledFor, logging.Logger.callHandlers
        self._saved = (enabled, call)
        formatter = logging.Formatter("%(levelname)s %(name)s %(message)s")
        scanner = self

        def every_level(logger: logging.Logger, level: int) -> bool:
            return True

        def scan_then_call(logger: logging.Logger, record: logging.LogRecord) -> None:
            scanner.scanned += 1
            try:
                text = formatter.format(record)
            except Exception:  # a malformed record is the caller's bug, not a leak
                text = str(record.msg)
            if found := leaks(text):
                test = os.environ.get("PYTEST_CURRENT_TEST", "outside a test")
                scanner.leaked.append((test, text[:200], found))
            if enabled(logger, record.levelno):
                call(logger, record)

        logging.Logger.isEnabledFor = every_level  # type: ignore[method-assign,assignment]
        logging.Logger.callHandlers = scan_then_call  # type: ignore[method-assign,assignment]

    def uninstall(self) -> None:
        if self._saved is None:
            return
        logging.Logger.isEnabledFor, logging.Logger.callHandlers = self._saved  # type: ignore[method-assign]
        self._saved = None


SUITE_SCANNER = SuiteLogScanner()
