"""The jobs' fault test (slow): 200 deliveries over 20 pull requests (duplicates, bursts
of pushes, drafts), two `pr-review worker` processes, one SIGKILLed mid-review and restarted,
the database restarted once, 5% provider faults. Afterwards every pull request's final head
has exactly one published review, no head has two, no job is lost or stuck, and no token is in
the database, the logs or any response.

    uv run pytest -m slow tests/jobs/test_faults.py -s     (prints its figures)
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from pr_review_api.jobs.embedded import EmbeddedPostgres
from pr_review_api.jobs.schema import apply_migrations
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.environment import process_environment, review_variables
from tests.fakes.github_server import FakeGitHub, PullRequestFixture
from tests.fakes.provider_server import (
    Fault,
    RecordedRequest,
    Scripted,
    ScriptedProvider,
    stop_turn,
)
from tests.jobs.test_jobs import SECRET, deliver, pull_request_event, service, settings_for

PULLS = 20
DELIVERIES = 200
REVIEW = {"summary": "Reviewed.", "findings": [], "notes": []}
_HEAD_MARKER = re.compile(r"<!-- pr-review:head=([0-9a-f]{40}) -->")


def _environment(
    provider: ScriptedProvider, fake: FakeGitHub, url: str, cache: Path
) -> dict[str, str]:
    return process_environment(
        review_variables(provider, github=fake, cache=cache, timeout=60, PR_REVIEW_DATABASE_URL=url)
    )


def _start_worker(environment: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    handle = log.open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "pr_review_api.cli", "worker", "--concurrency", "3"],
        env=environment,
        stdout=handle,
        stderr=subprocess.STDOUT,
    )


def _stop_workers(workers: list[subprocess.Popen[bytes]]) -> None:
    """Ask every worker to stop (SIGTERM, as a deployment does), then wait; kill a stuck one."""
    for process in workers:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in workers:
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def _running_jobs(url: str) -> int:
    with psycopg.connect(url) as connection:
        row = connection.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'"
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_fault_run_publishes_each_final_head_exactly_once(  # noqa: C901  (one scripted run, checked step by step)
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    rng = random.Random(12)
    fake_github.users[GITHUB_TOKEN] = "pr-review-bot"
    faults = Counter[str]()

    def responder(request: RecordedRequest) -> Scripted:
        if rng.random() < 0.05:
            faults["provider_500"] += 1
            return Fault.status(500)
        return stop_turn(REVIEW)

    folder = Path(tempfile.mkdtemp(prefix="prr-f-"))
    database = EmbeddedPostgres(folder).start()
    provider = ScriptedProvider(responder=responder, latency=(0.2, 0.6)).start()
    workers: list[subprocess.Popen[bytes]] = []
    logs = tmp_path / "workers.log"
    try:
        url = database.url()
        asyncio.run(apply_migrations(url))
        environment = _environment(provider, fake_github, url, (tmp_path / "cache").resolve())
        pulls: dict[int, PullRequestFixture] = {
            n: fake_github.pull_request("acme", "widget", n, head={f"f{n}.py": "x = 1\n"})
            for n in range(1, PULLS + 1)
        }
        workers = [_start_worker(environment, logs) for _ in range(2)]
        settings = settings_for(
            url,
            github_server_url=fake_github.server_url,
            github_api_url=fake_github.api_url,
            opencode_base_url=provider.base_url,
        )
        answers: list[httpx.Response] = []
        figures: dict[str, Any] = {}

        async def deliveries() -> None:
            async with service(settings) as client:
                sent: list[tuple[dict[str, Any], str]] = []
                index = 0
                while index < DELIVERIES:
                    if index == 60:
                        figures["jobs_running_at_kill"] = await asyncio.to_thread(
                            _running_jobs, url
                        )
                        workers[0].send_signal(signal.SIGKILL)
                        workers[0].wait()
                        workers[0] = _start_worker(environment, logs)
                        figures["killed_at_delivery"] = index
                    if index == 120:
                        await asyncio.to_thread(database.restart)
                        figures["database_restarted_at_delivery"] = index
                    roll = rng.random()
                    if roll < 0.1 and sent:
                        event, delivery = rng.choice(sent)  # a redelivery
                        faults["duplicate"] += 1
                    else:
                        number = rng.randint(1, PULLS)
                        burst = 3 if roll > 0.9 else 1
                        for _ in range(burst - 1):
                            pulls[number] = fake_github.push_head(
                                pulls[number], {"b.py": str(rng.random())}
                            )
                        pulls[number] = fake_github.push_head(
                            pulls[number], {f"f{number}.py": str(index)}
                        )
                        draft = roll < 0.15
                        faults["draft" if draft else "push"] += 1
                        event = pull_request_event(
                            number, pulls[number].head_sha, draft=draft, installation=None
                        )
                        delivery = str(uuid.uuid4())
                        sent.append((event, delivery))
                    for _attempt in range(50):  # GitHub's redeliver, after a 503
                        started = time.perf_counter()
                        answer = await deliver(client, event, delivery=delivery)
                        figures["slowest_answer_s"] = max(
                            figures.get("slowest_answer_s", 0.0), time.perf_counter() - started
                        )
                        answers.append(answer)
                        if answer.status_code != 503:
                            break
                        await asyncio.sleep(0.2)
                    assert answer.status_code in (202, 200), answer.text
                    index += 1
                    await asyncio.sleep(0.02)
                # Drafts got no job: their heads get one when made ready for review.
                for number, fixture in pulls.items():
                    ready = pull_request_event(
                        number, fixture.head_sha, action="ready_for_review", installation=None
                    )
                    answer = await deliver(client, ready)
                    assert answer.status_code == 202

        asyncio.run(deliveries())
        started = time.monotonic()
        deadline = started + 300
        while time.monotonic() < deadline:
            with psycopg.connect(url) as connection:
                row = connection.execute(
                    "SELECT count(*) FROM review_jobs WHERE status IN ('queued', 'running')"
                ).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.5)
        figures["drain_seconds"] = round(time.monotonic() - started, 1)
        with psycopg.connect(url) as connection:
            statuses: dict[str, int] = dict(
                connection.execute(
                    "SELECT status, count(*) FROM review_jobs GROUP BY status"
                ).fetchall()
            )
            dump = json.dumps(
                connection.execute("SELECT row_to_json(r)::text FROM review_jobs r").fetchall()
            )
        figures.update(
            statuses=statuses, faults=dict(faults), provider_requests=len(provider.requests)
        )
        if statuses.get("queued", 0) or statuses.get("running", 0):
            with psycopg.connect(url) as connection:
                stuck = connection.execute(
                    "SELECT r.number, r.status, r.attempts, q.status, q.scheduled_at "
                    "FROM review_jobs r LEFT JOIN procrastinate_jobs q ON q.id = r.queue_job_id "
                    "WHERE r.status IN ('queued', 'running')"
                ).fetchall()
            raise AssertionError(f"stuck jobs: {stuck} {figures}")
        heads_published: Counter[str] = Counter()
        for number, fixture in pulls.items():
            reviews = fake_github.posted("acme", "widget", number)
            # A later head with nothing new is marked in our first review, rewritten: every
            # head's marker in every body counts.
            marked = [sha for r in reviews for sha in _HEAD_MARKER.findall(r["body"])]
            heads_published.update(marked)
            if marked.count(fixture.head_sha) != 1:
                with psycopg.connect(url) as connection:
                    jobs = connection.execute(
                        "SELECT head_sha, status, error_code, publication_status, attempts, "
                        "result->'revisions'->>'head_sha' FROM review_jobs WHERE number = %s "
                        "ORDER BY created_at",
                        (number,),
                    ).fetchall()
                raise AssertionError(f"{number}: {fixture.head_sha} {statuses} {jobs[-4:]}")
        assert all(count == 1 for count in heads_published.values())
        figures["reviews_published"] = sum(heads_published.values())
        for secret in (GITHUB_TOKEN, PROVIDER_KEY, SECRET):
            assert secret not in dump
            assert all(secret not in answer.text for answer in answers)
    finally:
        _stop_workers(workers)
        provider.stop()
        database.stop()
        shutil.rmtree(folder, ignore_errors=True)
    text = logs.read_text(errors="replace")
    for secret in (GITHUB_TOKEN, PROVIDER_KEY, SECRET):
        assert secret not in text
    print("fault test figures:", json.dumps(figures, sort_keys=True))
