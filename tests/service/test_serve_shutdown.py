"""Stopping `pr-review serve` stops its worker and its embedded database (SECURITY.md).

A real `serve` process (embedded PostgreSQL, worker process, uvicorn) is signalled as systemd,
Docker and Kubernetes do (SIGTERM) and as a terminal does (SIGINT); afterwards no process of
its tree may be left: not `serve`, not the worker, not the postmaster nor any of its backends.
When `serve` is SIGKILLed (no cleanup can run), the worker must notice, stop the database
and exit by itself.
The database server's environment holds none of the secrets `serve` was given.

The tests share one data folder: the first `serve` initialises it, the others start on a data
folder left by a previous run, as a restarted service does.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from pr_review_api.jobs.embedded import EmbeddedPostgres
from pr_review_api.service.server import StopRequested, StopSignals
from tests.service.support import serve_data_dir

# Real `pr-review serve` processes with PostgreSQL: the default run, not --fast.
pytestmark = pytest.mark.e2e


PROVIDER_SECRET = "sk-provider-secret-5e0c17"
GITHUB_SECRET = "ghp_github-secret-a93b21"
START_DEADLINE_SECONDS = 120.0
EXIT_DEADLINE_SECONDS = 60.0


@pytest.fixture(scope="module")
def data_dir() -> Iterator[Path]:
    # Short, under /tmp: the socket lives in the data folder.
    folder = Path(tempfile.mkdtemp(prefix="prr-serve-"))
    try:
        yield folder
    finally:
        EmbeddedPostgres(folder).stop()
        shutil.rmtree(folder, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _parent_of(pid: int) -> int | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return int(fields[1])


def _is_alive(pid: int) -> bool:
    """Running (a zombie waiting for a reaper is dead: it holds nothing and runs nothing)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _descendants(root: int) -> set[int]:
    parents = {
        int(entry.name): _parent_of(int(entry.name))
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
    }
    found: set[int] = set()
    frontier = {root}
    while frontier:
        children = {pid for pid, parent in parents.items() if parent in frontier}
        frontier = children - found
        found |= children
    return found


def _command_line(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except (FileNotFoundError, ProcessLookupError):
        return ""


class Serving:
    """A `pr-review serve` process on an embedded database, and the processes it runs."""

    def __init__(self, data_dir: Path, log: Path) -> None:
        self.data_dir = data_dir
        self.port = _free_port()
        environment = {
            **os.environ,
            "OPENCODE_API_KEY": PROVIDER_SECRET,
            "GITHUB_TOKEN": GITHUB_SECRET,
            "PR_REVIEW_DATA_DIR": str(data_dir),
        }
        environment.pop("PR_REVIEW_DATABASE_URL", None)
        # As on a server or in a container: no runtime folder of a login session.
        environment.pop("XDG_RUNTIME_DIR", None)
        self.log = log
        with log.open("wb") as output:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pr_review_api.cli", "serve", "--port", str(self.port)],
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                start_new_session=True,  # its own process group, as a terminal's job is
            )

    def interrupt(self) -> None:
        """Ctrl-C in a terminal: SIGINT to every process of the job's group."""
        os.killpg(self.process.pid, signal.SIGINT)

    def wait_until_ready(self) -> tuple[int, int]:
        """(worker pid, postmaster pid) once /healthz answers and the worker runs."""
        deadline = time.monotonic() + START_DEADLINE_SECONDS
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text(errors="replace")
            workers = [
                pid for pid in _descendants(self.process.pid) if " worker " in _command_line(pid)
            ]
            postmaster = EmbeddedPostgres(self.data_dir).server_pid()
            if workers and postmaster is not None and self._healthy():
                return workers[0], postmaster
            time.sleep(0.2)
        raise AssertionError("serve did not become ready: " + self.log.read_text(errors="replace"))

    def _healthy(self) -> bool:
        try:
            answer = httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=2)
        except httpx.TransportError:
            return False
        return answer.status_code == 200

    def tree(self, postmaster: int) -> set[int]:
        """serve, its descendants, the postmaster and its backends (the postmaster is pg_ctl's
        daemon: not a descendant of serve)."""
        return {self.process.pid} | _descendants(self.process.pid) | {postmaster}

    def kill_if_running(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _survivors(pids: set[int]) -> set[int]:
    """The pids still alive once the deadline passes (or none, as soon as none is)."""
    deadline = time.monotonic() + EXIT_DEADLINE_SECONDS
    alive = {pid for pid in pids if _is_alive(pid)}
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = {pid for pid in alive if _is_alive(pid)}
    return alive


@pytest.mark.parametrize(
    ("stop_signal", "exit_status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)]
)
def test_a_stop_signal_stops_the_worker_and_the_database_which_has_no_secret(
    stop_signal: signal.Signals, exit_status: int, data_dir: Path, tmp_path: Path
) -> None:
    serving = Serving(data_dir, tmp_path / "serve.log")
    try:
        worker, postmaster = serving.wait_until_ready()
        tree = serving.tree(postmaster) | _descendants(postmaster)
        assert worker in tree
        assert len(tree) >= 4  # serve, worker, postmaster, at least one backend
        server_environment = Path(f"/proc/{postmaster}/environ").read_bytes()
        worker_environment = Path(f"/proc/{worker}/environ").read_bytes()
        serving.process.send_signal(stop_signal)
        assert serving.process.wait(timeout=EXIT_DEADLINE_SECONDS) == exit_status
    finally:
        serving.kill_if_running()
    assert _survivors(tree) == set(), serving.log.read_text(errors="replace")
    assert not EmbeddedPostgres(data_dir).is_running()
    assert "Traceback" not in serving.log.read_text(errors="replace")
    # The database server inherits none of our secrets; the worker (the control) needs them.
    assert PROVIDER_SECRET.encode() in worker_environment
    for secret in (PROVIDER_SECRET, GITHUB_SECRET):
        assert secret.encode() not in server_environment


def _wait_for(what: str, ready: Callable[[], bool], serving: Serving) -> None:
    deadline = time.monotonic() + START_DEADLINE_SECONDS
    while not ready():
        assert serving.process.poll() is None, serving.log.read_text(errors="replace")
        assert time.monotonic() < deadline, f"never {what}: " + serving.log.read_text()
        time.sleep(0.02)


@pytest.mark.parametrize("moment", ["listening", "initialising the database"])
def test_a_ctrl_c_during_start_up_exits_130_without_a_traceback(
    moment: str, tmp_path: Path
) -> None:
    """Wherever start-up is when Ctrl-C comes (the socket bound, initdb under
    way), `serve` exits 130 quietly and leaves a data folder the next `serve` starts on (a
    Ctrl-C while the command line loads: tests/cli/test_main.py)."""
    with serve_data_dir() as data:
        serving = Serving(data, tmp_path / "serve.log")
        try:
            if moment == "listening":
                _wait_for("listening", lambda: "serving on" in serving.log.read_text(), serving)
            elif moment == "initialising the database":
                _wait_for("initdb", (data / "postgres" / "base").exists, serving)
            serving.interrupt()
            assert serving.process.wait(timeout=EXIT_DEADLINE_SECONDS) == 130
        finally:
            serving.kill_if_running()
        text = serving.log.read_text(errors="replace")
        assert "Traceback" not in text
        assert "Aborted" not in text
        assert "RuntimeDirWarning" not in text
        again = Serving(data, tmp_path / "again.log")
        try:
            again.wait_until_ready()
            again.process.send_signal(signal.SIGTERM)
            assert again.process.wait(timeout=EXIT_DEADLINE_SECONDS) == 0
        finally:
            again.kill_if_running()
        assert "RuntimeDirWarning" not in again.log.read_text(errors="replace")


def test_when_serve_is_killed_its_worker_stops_the_database_and_exits(
    data_dir: Path, tmp_path: Path
) -> None:
    serving = Serving(data_dir, tmp_path / "serve.log")
    try:
        worker, postmaster = serving.wait_until_ready()
        tree = serving.tree(postmaster) | _descendants(postmaster)
        assert worker in tree
        serving.process.kill()  # SIGKILL: no cleanup of serve's runs
        serving.process.wait(timeout=EXIT_DEADLINE_SECONDS)
        # The worker notices (PR_SET_PDEATHSIG), stops the database, and exits.
        assert _survivors(tree) == set(), serving.log.read_text(errors="replace")
        assert not EmbeddedPostgres(data_dir).is_running()
    finally:
        serving.kill_if_running()
        EmbeddedPostgres(data_dir).stop()


def test_stop_signals_raise_once_then_give_the_handlers_back() -> None:
    before = {number: signal.getsignal(number) for number in StopSignals.HANDLED}
    stops: list[int] = []
    with StopSignals() as stop_signals:
        try:
            signal.raise_signal(signal.SIGTERM)  # what uvicorn does once it has shut down
        except StopRequested as stop:
            stops.append(stop.signal_number)
        signal.raise_signal(signal.SIGINT)  # during the cleanup: ignored, not raised
    assert stops == [signal.SIGTERM]
    assert stop_signals.received == signal.SIGTERM
    assert {number: signal.getsignal(number) for number in StopSignals.HANDLED} == before
