"""The review-job queue: webhook answer latency under load, and jobs per second by workers.

An embedded PostgreSQL (a fresh one in a temporary folder) holds the queue.

- Webhook latency: `--deliveries` signed `pull_request` deliveries over `--pulls` pull
  requests (so most supersede a waiting job), `--parallel` at a time, against the real
  application over an in-process ASGI transport; p50, p95 and the slowest answer.
- Throughput: `--jobs` jobs of distinct pull requests, run by 1, 2 and 4 workers (procrastinate
  workers in this process, one job slot each) whose review is a stand-in that waits
  `--latency` seconds, as a provider with a fixed latency would; jobs per second, and the
  ratio against one worker (4 workers ideally give 4x).

    uv run python -m bench.queue [--quick] [--latency 0.5] [--jobs 40]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import shutil
import statistics
import tempfile
import time
import uuid
import warnings
from pathlib import Path
from typing import Any

import httpx
import psycopg
from pydantic import SecretStr

from pr_review_api.jobs.queue import JobQueue, QueueTuning
from pr_review_api.jobs.records import JobRecord, PullRequestJob
from pr_review_api.service.app import create_app
from pr_review_api.settings import Settings

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from pr_review_api.jobs.embedded import EmbeddedPostgres

SECRET = "bench-secret"
SERVER = "https://github.example"
TUNING = QueueTuning(poll_interval=0.05, heartbeat_interval=1.0, stalled_after=30.0)


def _settings(url: str) -> Settings:
    return Settings(
        opencode_api_key=SecretStr("bench"),
        github_server_url=SERVER,
        github_api_url=SERVER + "/api/v3",
        pr_review_database_url=SecretStr(url),
        pr_review_webhook_secret=SecretStr(SECRET),
    )


def _fresh_database(server: EmbeddedPostgres) -> str:
    name = "b_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server.url(), autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type, unused-ignore]
    return server.url(name)


def _delivery(number: int, head: int) -> tuple[bytes, dict[str, str]]:
    event = {
        "action": "synchronize",
        "pull_request": {
            "number": number,
            "draft": False,
            "state": "open",
            "head": {"sha": f"{head:040x}"},
        },
        "repository": {"name": "widget", "owner": {"login": "acme"}},
        "installation": {"id": 1},
    }
    body = json.dumps(event).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": signature,
    }
    return body, headers


async def webhook_latency(url: str, deliveries: int, pulls: int, parallel: int) -> list[float]:
    app = create_app(_settings(url))
    seconds: list[float] = []
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            limit = asyncio.Semaphore(parallel)

            async def one(index: int) -> None:
                body, headers = _delivery(index % pulls + 1, index + 1)
                async with limit:
                    started = time.perf_counter()
                    answer = await client.post("/v1/webhooks/github", content=body, headers=headers)
                    seconds.append(time.perf_counter() - started)
                assert answer.status_code == 202, answer.text

            await asyncio.gather(*(one(i) for i in range(deliveries)))
    return seconds


async def throughput(url: str, workers: int, jobs: int, latency: float) -> float:
    async def runner(record: JobRecord, settings: Settings) -> dict[str, Any]:
        await asyncio.sleep(latency)
        return {"termination_reason": "final_review", "review": {"findings": []}}

    settings = _settings(url)
    queues = [JobQueue(settings, runner=runner, tuning=TUNING) for _ in range(workers)]
    for queue in queues:
        await queue.migrate()
    async with queues[0].opened() as first:
        for number in range(1, jobs + 1):
            job = PullRequestJob(
                url=f"{SERVER}/acme/widget/pull/{number}",
                owner="acme",
                repo="widget",
                number=number,
            )
            await first.enqueue(job, source="api")
    started = time.perf_counter()
    tasks: list[asyncio.Task[None]] = []
    opened = [queue.opened() for queue in queues]
    for context in opened:
        await context.__aenter__()
    for queue in queues:
        tasks.append(asyncio.create_task(queue.run_worker(1, install_signal_handlers=False)))
    with psycopg.connect(url) as connection:
        while True:
            row = connection.execute(
                "SELECT count(*) FROM review_jobs WHERE status = 'succeeded'"
            ).fetchone()
            if row is not None and row[0] >= jobs:
                break
            await asyncio.sleep(0.02)
    elapsed = time.perf_counter() - started
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    for context in opened:
        await context.__aexit__(None, None, None)
    return jobs / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--deliveries", type=int, default=500)
    parser.add_argument("--pulls", type=int, default=50)
    parser.add_argument("--parallel", type=int, default=20)
    parser.add_argument("--runs", type=int, default=1)
    options = parser.parse_args()
    if options.quick:
        options.jobs, options.deliveries, options.latency = 12, 100, 0.2
    folder = Path(tempfile.mkdtemp(prefix="prr-bench-"))
    server = EmbeddedPostgres(folder).start()
    try:
        seconds = asyncio.run(
            webhook_latency(
                _fresh_database(server), options.deliveries, options.pulls, options.parallel
            )
        )
        seconds.sort()
        rates = {
            n: asyncio.run(throughput(_fresh_database(server), n, options.jobs, options.latency))
            for n in (1, 2, 4)
        }
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)
    p50 = statistics.median(seconds) * 1000
    p95 = seconds[int(len(seconds) * 0.95) - 1] * 1000
    print(
        f"webhook deliveries: {len(seconds)} over {options.pulls} pull requests, "
        f"{options.parallel} at a time; provider stand-in latency {options.latency} s"
    )
    print("| figure | ours | reference | ratio |")
    print("|---|---|---|---|")
    print(f"| webhook answer p50 | {p50:.1f} ms | 1000 ms budget | {p50 / 1000:.3f}x |")
    print(f"| webhook answer p95 | {p95:.1f} ms | 1000 ms budget | {p95 / 1000:.3f}x |")
    print(
        f"| webhook answer max | {seconds[-1] * 1000:.1f} ms | 1000 ms budget | "
        f"{seconds[-1]:.3f}x |"
    )
    for n, rate in rates.items():
        print(
            f"| jobs/s, {n} worker(s) | {rate:.2f} | {rates[1]:.2f} (1 worker) | "
            f"{rate / rates[1]:.2f}x |"
        )


if __name__ == "__main__":
    main()
