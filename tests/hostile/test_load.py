"""Load and soak: many pull-request reviews at once against the real service on loopback.

The service (`create_app`, served by uvicorn as `pr-review serve` would) reviews pull requests
published on the fake GitHub, talking to a scripted provider that answers after a random
latency and, with a 5% chance per request, misbehaves (auth failures, rate limits, 5xx,
resets, truncated or oversized bodies, gzip bombs, invalid tool calls, invalid reviews).
Every review must end either with a validated final review or with exactly the contract
error its fault calls for: the failures by code must match the faults injected by code, and
anything else is an unexpected outcome (target: none).

Resources are measured before the server starts and after it stopped (a warm-up cycle
first fills the cache and the lazy imports): open file descriptors (/proc/self/fd),
threads, entries of the temporary folder and temporary leftovers in the cache, resident and
peak memory. The target is no growth. The default run does 40 reviews 10 at a time; the
`slow` run 240 reviews 20 at a time.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import statistics
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from pr_review_api.service.app import create_app
from pr_review_api.settings import MAX_PROVIDER_RESPONSE_BYTES, Settings
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import (
    Fault,
    RecordedRequest,
    Scripted,
    ScriptedProvider,
    stop_turn,
    tool_call_turn,
)
from tests.hostile.support import (
    FIGURES,
    RESOURCE_NOTES,
    CapturingHandler,
    child_processes,
    live_server,
    open_fds,
    peak_rss_kib,
    rss_kib,
)

FAULT_RATE = 0.05
LATENCY = (0.0, 0.05)
PULLS = (("acme", "widget", 1), ("acme", "widget", 2), ("acme", "gadget", 3), ("acme", "gadget", 4))
REVIEW = {
    "summary": "Looks fine.",
    "findings": [
        {
            "severity": "low",
            "title": "Style",
            "explanation": "A nit.",
            "path": "README.md",
            "line": 1,
            "evidence": "hello",
            "recommendation": "None needed.",
        }
    ],
    "notes": ["Read the change."],
}
# (fault, expected error code, HTTP status of the service's answer)
FAULTS: list[tuple[str, str, int]] = [
    ("401", "opencode_authentication_failed", 502),
    ("403", "opencode_authentication_failed", 502),
    ("429", "opencode_rate_limited", 503),
    ("500", "opencode_unavailable", 502),
    ("503", "opencode_unavailable", 502),
    ("reset", "opencode_unavailable", 502),
    ("close", "opencode_unavailable", 502),
    ("truncated-json", "invalid_model_response", 502),
    ("text/html", "invalid_model_response", 502),
    ("2-MiB-plus-1", "upstream_response_too_large", 502),
    ("gzip-bomb", "upstream_response_too_large", 502),
    ("unknown-tool", "invalid_tool_call", 502),
    ("bad-review", "invalid_model_response", 502),
]
STATUS = {code: status for _, code, status in FAULTS} | {"final_review": 200}


def fault_reply(name: str) -> Scripted:  # noqa: PLR0911  (one return per fault name)
    if name in ("401", "403", "500", "503"):
        return Fault.status(int(name), body=b"upstream says no")
    if name == "429":
        return Fault.rate_limited("2")
    if name == "reset":
        return Fault.reset_mid_body()
    if name == "close":
        return Fault.close()
    if name == "truncated-json":
        return Fault.truncated_json()
    if name == "text/html":
        return Fault.wrong_content_type()
    if name == "2-MiB-plus-1":
        return Fault.oversized(1)
    if name == "gzip-bomb":
        return Fault.gzip_bomb(4 * MAX_PROVIDER_RESPONSE_BYTES)
    if name == "unknown-tool":
        return tool_call_turn([("x1", "run_shell", {"command": "id"})])
    return stop_turn({"summary": "s", "findings": [], "notes": [], "verdict": "ok"})


@dataclass
class LoadProvider:
    """Answers like a model, after a random latency, and misbehaves `FAULT_RATE` of the time."""

    seed: int
    injected: Counter[str] = field(default_factory=Counter)
    answered: int = 0

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self._lock = threading.Lock()

    def __call__(self, request: RecordedRequest) -> Scripted:
        with self._lock:
            self.answered += 1
            if self._random.random() < FAULT_RATE:
                name, code, _ = self._random.choice(FAULTS)
                self.injected[code] += 1
                return fault_reply(name)
        messages = request.json["messages"]
        if any(message["role"] == "tool" for message in messages):
            return stop_turn(REVIEW)
        return tool_call_turn(
            [
                ("c1", "read_repository_file", {"path": "README.md"}),
                ("c2", "search_repository", {"query": "hello"}),
                ("c3", "list_repository_files", {}),
                ("c4", "inspect_git_diff", {"max_bytes": 4096}),
            ]
        )


@dataclass
class Resources:
    fds: int
    threads: int
    children: int
    temp_entries: int
    cache_leftovers: int
    rss_kib: int
    peak_rss_kib: int

    def line(self) -> str:
        return (
            f"fds={self.fds} threads={self.threads} child-processes={self.children} "
            f"temp={self.temp_entries} "
            f"cache-leftovers={self.cache_leftovers} rss={self.rss_kib // 1024} MiB "
            f"peak={self.peak_rss_kib // 1024} MiB"
        )


def _cache_leftovers(cache: Path) -> int:
    """Temporary files git or the cache could leave: packs, objects, quarantines, trash."""
    patterns = ("tmp_*", "incoming-*", "*.lock", "tmp-*")
    found = sum(len(list(cache.rglob(pattern))) for pattern in patterns)
    trash = cache / "trash"
    return found + (len(list(trash.iterdir())) if trash.is_dir() else 0)


def measure(cache: Path, baseline: Resources | None = None, settle: float = 15.0) -> Resources:
    """Resources once closing connections and finishing threads have settled: the counts
    stayed the same for a moment, and (after the load) came back to `baseline`, or
    `settle` seconds passed, whichever is first."""
    deadline = time.monotonic() + settle
    previous = None
    while True:
        gc.collect()
        now = (open_fds(), threading.active_count(), child_processes())
        target = (baseline.fds, baseline.threads, baseline.children) if baseline else now
        back = all(count <= limit for count, limit in zip(now, target, strict=True))
        if (now == previous and back) or time.monotonic() > deadline:
            break
        previous = now
        time.sleep(0.3)
    return Resources(
        fds=now[0],
        threads=now[1],
        children=now[2],
        temp_entries=len(list(Path(tempfile.gettempdir()).iterdir())),
        cache_leftovers=_cache_leftovers(cache),
        rss_kib=rss_kib(),
        peak_rss_kib=peak_rss_kib(),
    )


@dataclass
class LoadReport:
    reviews: int
    concurrency: int
    outcomes: Counter[str] = field(default_factory=Counter)
    unexpected: list[str] = field(default_factory=list)
    durations: list[float] = field(default_factory=list)

    @property
    def completed(self) -> int:
        return self.outcomes["final_review"]

    @property
    def failed_as_expected(self) -> int:
        return sum(n for code, n in self.outcomes.items() if code != "final_review")


def _check_answer(report: LoadReport, response: httpx.Response) -> None:
    try:
        document = response.json()
    except ValueError:
        report.unexpected.append(f"status {response.status_code}: not JSON")
        return
    if response.status_code == 200 and document.get("termination_reason") == "final_review":
        if document["review"] != REVIEW or document["tool_calls"] != 4:
            report.unexpected.append("a review that is not the scripted one")
            return
        report.outcomes["final_review"] += 1
        return
    error = document.get("error") or {}
    code = error.get("code")
    if code not in STATUS or STATUS[code] != response.status_code or document.get("trace"):
        report.unexpected.append(f"status {response.status_code}: {code}")
        return
    if code == "opencode_rate_limited" and response.headers.get("retry-after") != "2":
        report.unexpected.append("429 without its Retry-After")
        return
    report.outcomes[code] += 1


async def drive(base_url: str, urls: list[str], report: LoadReport) -> None:
    """Send every review, at most `report.concurrency` at a time."""
    gate = asyncio.Semaphore(report.concurrency)
    limits = httpx.Limits(max_connections=report.concurrency)
    async with httpx.AsyncClient(base_url=base_url, timeout=120, limits=limits) as client:

        async def one(url: str) -> None:
            async with gate:
                started = time.perf_counter()
                try:
                    response = await client.post("/v1/reviews", json={"pull_request_url": url})
                except httpx.HTTPError as exc:
                    report.unexpected.append(f"client error {type(exc).__name__}")
                    return
                report.durations.append(time.perf_counter() - started)
                _check_answer(report, response)

        await asyncio.gather(*(one(url) for url in urls))
        health = await client.get("/healthz")
        if health.json() != {"status": "ok"}:
            report.unexpected.append("unhealthy after the load")


@pytest.fixture
def world(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FakeGitHub, list[str]]]:
    temp = tmp_path / "tmpdir"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    server = FakeGitHub(tmp_path / "github")
    server.require_token = GITHUB_TOKEN
    try:
        urls = [
            server.pull_request(
                owner, repo, number, base={"README.md": "hello\n"}, head={f"f{number}.py": "x\n"}
            ).url
            for owner, repo, number in PULLS
        ]
        yield server, urls
    finally:
        server.close()


@dataclass
class LoadRun:
    report: LoadReport
    provider: LoadProvider
    before: Resources
    after: Resources
    growth: int | None
    """Growth, in bytes, of live Python memory across the load (tracemalloc)."""


def run_load(
    server: FakeGitHub,
    urls: list[str],
    cache: Path,
    *,
    reviews: int,
    concurrency: int,
    trace_memory: bool = False,
) -> LoadRun:
    """Warm up, measure, run the load, measure."""
    load = LoadProvider(seed=reviews)
    with ScriptedProvider(responder=load, latency=LATENCY, seed=reviews) as provider:
        settings: Settings = server.settings(
            cache,
            token=GITHUB_TOKEN,
            opencode_api_key=PROVIDER_KEY,
            opencode_base_url=provider.base_url,
            pr_review_max_concurrent_reviews=concurrency,
            review_timeout_seconds=120,
            opencode_max_retries=0,  # outcomes must match the faults injected, one each
        )
        # Warm-up: the cache fetches each pull request once; lazy imports happen now.
        warm = LoadReport(len(urls), concurrency)
        with live_server(create_app(settings), settings) as base:
            asyncio.run(drive(base, urls, warm))
        assert not warm.unexpected, warm.unexpected
        before = measure(cache)
        injected_before = load.injected.copy()

        report = LoadReport(reviews, concurrency)
        order = [urls[index % len(urls)] for index in range(reviews)]
        random.Random(7).shuffle(order)
        if trace_memory:
            tracemalloc.start(1)
        try:
            with _pytest_log_capture_paused():
                start = _live_memory(server, provider) if trace_memory else 0
                with live_server(create_app(settings), settings) as base:
                    asyncio.run(drive(base, order, report))
                after = measure(cache, before)
                growth = _live_memory(server, provider) - start if trace_memory else None
        finally:
            if trace_memory:
                tracemalloc.stop()
        load.injected.subtract(injected_before)
    return LoadRun(report, load, before, after, growth)


@contextmanager
def _pytest_log_capture_paused() -> Iterator[None]:
    """Detach pytest's own log capture, which keeps every record for its report; the secret
    guard's handler stays and still scans every record."""
    root = logging.getLogger()
    paused = [h for h in root.handlers if not isinstance(h, CapturingHandler)]
    for handler in paused:
        root.removeHandler(handler)
    try:
        yield
    finally:
        for handler in paused:
            root.addHandler(handler)


def _live_memory(server: FakeGitHub, provider: ScriptedProvider) -> int:
    """Bytes of live Python memory, less the fakes' own records of every request (the
    scripted provider keeps each request body, fake GitHub each request's headers)."""
    server.requests.clear()
    provider._requests.clear()
    gc.collect()
    return tracemalloc.get_traced_memory()[0]


def check_and_report(label: str, run: LoadRun) -> None:
    report, before, after = run.report, run.before, run.after
    injected = +run.provider.injected  # drop the zero counts
    failed = Counter({code: n for code, n in report.outcomes.items() if code != "final_review"})
    mismatch = (failed - injected) + (injected - failed)
    unexpected = len(report.unexpected) + sum(mismatch.values())
    durations = sorted(report.durations)
    p95 = durations[int(0.95 * (len(durations) - 1))] if durations else 0.0
    RESOURCE_NOTES[f"{label} load"] = (
        f"{report.reviews} reviews, {report.concurrency} at a time: "
        f"{report.completed} completed, {report.failed_as_expected} failed as expected "
        f"({dict(sorted(failed.items()))}), {unexpected} unexpected; "
        f"p50 {statistics.median(durations):.2f} s, p95 {p95:.2f} s"
    )
    RESOURCE_NOTES[f"{label} resources before"] = before.line()
    RESOURCE_NOTES[f"{label} resources after"] = after.line()
    if run.growth is not None:
        RESOURCE_NOTES[f"{label} live Python memory (tracemalloc)"] = (
            f"grew {run.growth // 1024} KiB across the load"
        )
    FIGURES["load reviews"] += report.reviews
    FIGURES["load faults injected"] += sum(injected.values())
    FIGURES["faults injected"] += sum(injected.values())
    assert not report.unexpected, report.unexpected[:10]
    assert not mismatch, f"failures {dict(failed)} != faults injected {dict(injected)}"
    assert report.completed + report.failed_as_expected == report.reviews
    assert report.completed > report.reviews // 2
    # No growth: every descriptor, thread and temporary file of the load is gone.
    assert after.fds <= before.fds, (before, after)
    assert after.threads <= before.threads, (before, after)
    assert after.children <= before.children, (before, after)
    assert after.temp_entries <= before.temp_entries, (before, after)
    assert after.cache_leftovers <= before.cache_leftovers, (before, after)
    assert after.rss_kib - before.rss_kib < 256 * 1024, (before, after)
    if run.growth is not None:
        assert run.growth < 2 * 1024 * 1024, f"{run.growth} bytes still held after the load"


def test_load_40_reviews_10_at_a_time(world: tuple[FakeGitHub, list[str]], tmp_path: Path) -> None:
    server, urls = world
    run = run_load(server, urls, tmp_path / "cache", reviews=40, concurrency=10)
    check_and_report("default", run)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_load_240_reviews_20_at_a_time(world: tuple[FakeGitHub, list[str]], tmp_path: Path) -> None:
    server, urls = world
    run = run_load(server, urls, tmp_path / "cache", reviews=240, concurrency=20, trace_memory=True)
    check_and_report("full", run)


# --- slow headers: connections that never finish their request ------------------------

SLOW_CLIENT_SERVER = """
import resource, sys
import uvicorn
from pr_review_api.service.app import create_app
from pr_review_api.service.server import server_config
from pr_review_api.settings import load_settings

resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[2]), int(sys.argv[2])))
settings = load_settings(opencode_api_key="k")
config = server_config(
    create_app(settings), settings, host="127.0.0.1", port=int(sys.argv[1]),
    max_connections=int(sys.argv[3]), read_timeout=float(sys.argv[4]),
)
uvicorn.Server(config).run()
"""
SLOW_CONNECTIONS = 400
SLOW_FD_LIMIT = 256  # fewer descriptors than attacking connections: without the guard, EMFILE
SLOW_CAP = 64
SLOW_READ_TIMEOUT = 3.0
SLOW_ATTACK_SECONDS = 8.0


def _server_fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def _healthz_latency(port: int) -> float:
    started = time.perf_counter()
    response = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    assert response.json() == {"status": "ok"}
    return time.perf_counter() - started


def test_slow_headers_cannot_exhaust_the_services_descriptors(tmp_path: Path) -> None:
    import os
    import socket
    import subprocess
    import sys

    script = tmp_path / "serve.py"
    script.write_text(SLOW_CLIENT_SERVER)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parents[2]
    args = [str(port), str(SLOW_FD_LIMIT), str(SLOW_CAP), str(SLOW_READ_TIMEOUT)]
    log = tmp_path / "server.log"
    with log.open("wb") as log_file:
        server = subprocess.Popen(
            [sys.executable, str(script), *args],
            env={**os.environ, "PYTHONPATH": str(root)},
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )
    sockets: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 20
        while True:
            assert server.poll() is None, log.read_text()
            try:
                _healthz_latency(port)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
        baseline = _server_fds(server.pid)

        # The attack: more half-open requests than the cap (and than the fd limit), each
        # trickling one byte of its head every second and never finishing it.
        peak_fds, latencies, refused = baseline, [], 0
        started = time.monotonic()
        for _ in range(SLOW_CONNECTIONS):
            connection = socket.create_connection(("127.0.0.1", port), timeout=5)
            connection.sendall(b"POST /v1/reviews HTTP/1.1\r\nHost: x\r\n")
            sockets.append(connection)
        tried = len(sockets)
        while time.monotonic() - started < SLOW_ATTACK_SECONDS:
            for connection in sockets:
                try:
                    connection.send(b"X")
                except OSError:
                    refused += 1
            latencies.append(_healthz_latency(port))
            peak_fds = max(peak_fds, _server_fds(server.pid))
            time.sleep(0.5)
        for connection in sockets:
            connection.close()
        sockets.clear()
        deadline = time.monotonic() + SLOW_READ_TIMEOUT + 10
        while _server_fds(server.pid) > baseline and time.monotonic() < deadline:
            time.sleep(0.2)
        after = _server_fds(server.pid)
        after_latency = _healthz_latency(port)
    finally:
        for connection in sockets:
            connection.close()
        server.terminate()
        server.wait(timeout=30)
    text = log.read_text(errors="replace")
    RESOURCE_NOTES["slow headers"] = (
        f"{tried} half-open connections (cap {SLOW_CAP}, fd limit {SLOW_FD_LIMIT}, read "
        f"deadline {SLOW_READ_TIMEOUT:g} s) for {SLOW_ATTACK_SECONDS:g} s: server fds "
        f"{baseline} before, peak {peak_fds}, {after} after; /healthz answered "
        f"{len(latencies)}/{len(latencies)}, median {statistics.median(latencies) * 1000:.0f} ms, "
        f"max {max(latencies) * 1000:.0f} ms; {refused} trickled bytes refused; "
        f"server log {len(text.splitlines())} lines"
    )
    FIGURES["slow-header connections"] += tried
    # Without the guard, /healthz times out once the half-open connections hold every fd.
    assert max(latencies) < 3.0, latencies
    assert statistics.median(latencies) < 0.5, latencies
    assert peak_fds <= baseline + SLOW_CAP + 8, (baseline, peak_fds)
    assert after <= baseline, (baseline, after)
    assert after_latency < 1.0
    assert "Traceback" not in text
    assert len(text.splitlines()) < 20, text[:2000]
