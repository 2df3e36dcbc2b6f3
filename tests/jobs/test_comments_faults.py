"""The comment commands' fault test (specification §15, slow): 100 comment deliveries over 10 pull
requests (questions from a writer, from a reader and from a bot, `help`, `ignore` from a reader,
comments addressed to no one, redeliveries of one delivery id) to the real service, two
`pr-review worker` processes, one SIGKILLed while answers run and restarted. Afterwards every
permitted question has exactly one answer in its thread, nothing else was answered, and no
command of a user without permission had any effect (no reply, reaction or dismissal).

    uv run pytest -m slow tests/jobs/test_comments_faults.py -s     (prints its figures)
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import signal
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from pydantic import SecretStr

from pr_review_api.jobs.schema import apply_migrations
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget
from tests.builders import final_turn
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import RecordedRequest, Scripted, ScriptedProvider, stop_turn
from tests.jobs.conftest import database_url, embedded_postgres
from tests.jobs.test_comments import (
    BOT,
    FINDING,
    READER,
    WRITER,
    fake_github,
    pull,
    review_comment_event,
)
from tests.jobs.test_faults import _environment, _start_worker, _stop_workers
from tests.jobs.test_jobs import SECRET, deliver, service

__all__ = ["database_url", "embedded_postgres", "fake_github"]

PULLS = 10
DELIVERIES = 100
KILL_AT = 40
_ANSWER = re.compile(r"<!-- pr-review:answer=([0-9]+) -->")
ANSWER = {"text": "Because the loop stops one short.", "severity": None, "finding_stands": True}


def responder(request: RecordedRequest) -> Scripted:
    messages = (request.json or {}).get("messages") or [{}, {}]
    if "<untrusted_thread_data>" in str(messages[1].get("content")):
        return stop_turn(json.dumps(ANSWER))
    return final_turn(FINDING, summary="S")


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_permitted_question_is_answered_exactly_once_through_a_killed_worker(  # noqa: C901  (one scripted run, checked step by step)
    database_url: str, fake_github: FakeGitHub, tmp_path: Path
) -> None:
    rng = random.Random(25)
    fake_github.users[GITHUB_TOKEN] = BOT
    fake_github.permissions[("acme", "widget", WRITER)] = "write"
    provider = ScriptedProvider(responder=responder, latency=(0.2, 0.6)).start()
    asyncio.run(apply_migrations(database_url))
    environment = {
        **_environment(provider, fake_github, database_url, (tmp_path / "cache").resolve()),
        "PR_REVIEW_MAX_ANSWERS_PER_HOUR": "1000",
        "PR_REVIEW_CHECK_RUNS": "false",
    }
    settings = fake_github.settings(
        (tmp_path / "cache").resolve(),
        token=GITHUB_TOKEN,
        opencode_api_key=SecretStr(PROVIDER_KEY),
        opencode_base_url=provider.base_url,
        pr_review_database_url=SecretStr(database_url),
        pr_review_webhook_secret=SecretStr(SECRET),
        pr_review_check_runs=False,
    )
    findings: dict[int, dict[str, Any]] = {}
    for number in range(1, PULLS + 1):
        fixture = pull(fake_github, number)
        asyncio.run(run_review(ChangeTarget(fixture.url), settings, ReviewOptions(post=True)))
        (ours,) = [
            c for c in fake_github.review_comments[("acme", "widget", number)] if "path" in c
        ]
        findings[number] = ours
    logs = tmp_path / "workers.log"
    workers = [_start_worker(environment, logs) for _ in range(2)]
    permitted: set[int] = set()
    unpermitted: set[int] = set()
    kinds = Counter[str]()
    answers: list[httpx.Response] = []
    try:

        async def deliveries() -> None:
            async with service(settings) as client:
                sent: list[tuple[dict[str, Any], str]] = []
                for index in range(DELIVERIES):
                    if index == KILL_AT:
                        workers[0].send_signal(signal.SIGKILL)
                        workers[0].wait()
                        workers[0] = _start_worker(environment, logs)
                    roll = rng.random()
                    if roll < 0.1 and sent:
                        event, delivery = rng.choice(sent)
                        kinds["redelivery"] += 1
                    else:
                        number = rng.randint(1, PULLS)
                        author, body, kind = _comment(roll)
                        kinds[kind] += 1
                        comment = fake_github.add_review_comment(
                            "acme", "widget", number, author, body, findings[number]["id"]
                        )
                        (permitted if kind == "question" else unpermitted).add(comment["id"])
                        event = review_comment_event(comment, number)
                        delivery = str(uuid.uuid4())
                        sent.append((event, delivery))
                    answer = await deliver(
                        client, event, kind="pull_request_review_comment", delivery=delivery
                    )
                    answers.append(answer)
                    assert answer.status_code == 202, answer.text
                    await asyncio.sleep(0.05)

        asyncio.run(deliveries())
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with psycopg.connect(database_url) as connection:
                row = connection.execute(
                    "SELECT count(*) FROM review_jobs WHERE status IN ('queued', 'running')"
                ).fetchone()
            if row is not None and row[0] == 0:
                break
            time.sleep(0.5)
        with psycopg.connect(database_url) as connection:
            statuses: dict[str, int] = dict(
                connection.execute(
                    "SELECT status, count(*) FROM review_jobs GROUP BY status"
                ).fetchall()
            )
            dismissed = connection.execute("SELECT count(*) FROM dismissals").fetchone()
        answered: Counter[int] = Counter()
        other_replies = 0
        for ours in findings.values():
            for reply in fake_github.replies_to(ours["id"]):
                if reply["user"]["login"] != BOT:
                    continue
                marked = _ANSWER.findall(reply["body"])
                answered.update(int(m) for m in marked)
                other_replies += 0 if marked else 1
        figures = {
            "kinds": dict(kinds),
            "statuses": statuses,
            "permitted_questions": len(permitted),
            "answers": sum(answered.values()),
            "provider_requests": len(provider.requests),
        }
        print(figures)
        assert statuses.get("queued", 0) == statuses.get("running", 0) == 0, figures
        assert set(answered) == permitted, figures
        assert all(count == 1 for count in answered.values()), figures
        assert other_replies == 0  # no help or other text to anyone without permission
        assert fake_github.reactions == []
        assert dismissed == (0,)
        assert fake_github.reply_refusals == 0
    finally:
        _stop_workers(workers)
        provider.stop()


def _comment(roll: float) -> tuple[str, str, str]:
    """(author, body, kind) of a new comment in a finding's thread."""
    if roll < 0.55:
        return WRITER, f"@{BOT} why is this a bug?", "question"
    if roll < 0.65:
        return READER, f"@{BOT} why is this a bug?", "reader_question"
    if roll < 0.75:
        return "dependabot[bot]", "/pr-review help", "bot"
    if roll < 0.85:
        return READER, "/pr-review ignore", "reader_ignore"
    return WRITER, "why is this a bug?", "unaddressed"
