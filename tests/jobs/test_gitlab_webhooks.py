"""`POST /v1/webhooks/gitlab` (specification §17) on the real application and a real PostgreSQL:
the secret token, every hook kind, drafts, updates that did not move the head, repeated
deliveries, merge-request jobs keyed apart from pull requests, and hostile payloads that are
refused or ignored, never a 500.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any

import httpx
from pydantic import SecretStr

from pr_review_api.jobs.queue import JobQueue
from pr_review_api.jobs.records import PullRequestJob
from pr_review_api.settings import Settings
from tests.conftest import PROVIDER_KEY
from tests.gitlab.payloads import HEAD, OLDREV, PROJECT, merge_request_hook
from tests.jobs.test_jobs import FAST, rows, service
from tests.scrape import label_values, value

TOKEN = "glwhsec-test-GITLAB-WEBHOOK-SECRET-5c1d"
GITLAB = "https://gitlab.example/prefix"
URL = f"{GITLAB}/{PROJECT}/-/merge_requests/7"


def settings_for(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "opencode_api_key": SecretStr(PROVIDER_KEY),
        "gitlab_server_url": GITLAB,
        "pr_review_database_url": SecretStr(database_url),
        "pr_review_gitlab_webhook_secret": SecretStr(TOKEN),
    }
    values.update(overrides)
    return Settings(**values)


async def deliver(
    client: httpx.AsyncClient,
    event: dict[str, Any] | bytes,
    *,
    kind: str = "Merge Request Hook",
    uuid_header: str | None = None,
    token: str | bytes | None = TOKEN,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    body = event if isinstance(event, bytes) else json.dumps(event).encode()
    named: dict[str, str | bytes] = {
        "Content-Type": "application/json",
        "X-Gitlab-Event": kind,
        "X-Gitlab-Event-UUID": uuid_header or str(uuid.uuid4()),
        "X-Gitlab-Instance": "https://evil.example",
    }
    if token is not None:
        named["X-Gitlab-Token"] = token  # bytes: a value that is not ASCII, sent as is
    named.update(headers or {})
    sent = [
        (name.encode(), value if isinstance(value, bytes) else value.encode())
        for name, value in named.items()
    ]
    return await client.post("/v1/webhooks/gitlab", content=body, headers=sent)


def count(database_url: str, table: str = "review_jobs") -> int:
    return int(rows(database_url, f"SELECT count(*) FROM {table}")[0][0])


def test_a_token_that_is_not_the_secret_is_invalid_signature(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            event = merge_request_hook("open")
            wrong: list[str | bytes] = [
                TOKEN[:-1],
                TOKEN + "x",
                "",
                TOKEN.upper(),
                "x" * 4096,
                (TOKEN[:-1] + "é").encode(),
            ]
            for token in wrong:
                answer = await deliver(client, event, token=token)
                assert answer.status_code == 401
                assert answer.json()["error"]["code"] == "invalid_signature"
                assert TOKEN not in answer.text
            missing = await deliver(client, event, token=None)
            assert missing.status_code == 401
            assert missing.json()["error"]["code"] == "invalid_signature"
            twice = await client.post(
                "/v1/webhooks/gitlab",
                content=json.dumps(event).encode(),
                headers=[
                    ("X-Gitlab-Event", "Merge Request Hook"),
                    ("X-Gitlab-Token", TOKEN),
                    ("X-Gitlab-Token", TOKEN),
                ],
            )
            assert twice.status_code == 401
            # GitHub's signature is no way in either.
            github = await deliver(
                client, event, token=None, headers={"X-Hub-Signature-256": "sha256=" + "0" * 64}
            )
            assert github.status_code == 401
            assert count(database_url) == 0
            good = await deliver(client, event)
            assert good.status_code == 202

    asyncio.run(scenario())
    assert count(database_url) == 1


def test_the_token_is_checked_before_the_body_is_read(database_url: str) -> None:
    """A sender without the token cannot make us read, parse or store anything: not even a
    body over the cap or one that is not JSON is looked at."""

    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            for body in (b"not json", b"x" * (6 * 1024 * 1024)):
                answer = await deliver(client, body, token="wrong")
                assert answer.status_code == 401

    asyncio.run(scenario())


def test_open_reopen_and_a_pushed_update_queue_a_published_review(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            events = [
                merge_request_hook("open", iid=1),
                merge_request_hook("reopen", iid=2),
                merge_request_hook("update", iid=3, oldrev=OLDREV),
            ]
            for number, event in enumerate(events, start=1):
                answer = await deliver(client, event)
                assert answer.status_code == 202
                assert answer.json()["status"] == "queued"
                assert set(answer.json()) == {"job_id", "status"}
                job = (await client.get(f"/v1/review-jobs/{answer.json()['job_id']}")).json()
                assert job["pull_request"] == {
                    "url": f"{GITLAB}/{PROJECT}/-/merge_requests/{number}",
                    "owner": "acme/platform",
                    "repo": "widget",
                    "number": number,
                    "forge": "gitlab",
                }
                assert job["head_sha"] == HEAD
                assert job["status"] == "queued"

    asyncio.run(scenario())
    stored = rows(
        database_url, "SELECT bool_and(post), bool_and(source = 'webhook') FROM review_jobs"
    )
    assert stored == [(True, True)]
    keys = rows(database_url, "SELECT pr_key, tenant FROM review_jobs ORDER BY number")
    assert keys == [
        (f"gitlab:{PROJECT}!1", "gitlab:acme"),
        (f"gitlab:{PROJECT}!2", "gitlab:acme"),
        (f"gitlab:{PROJECT}!3", "gitlab:acme"),
    ]


def test_drafts_updates_without_a_new_head_and_other_events_are_ignored(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            answers = [
                await deliver(client, merge_request_hook("open", draft=True)),
                await deliver(client, merge_request_hook("update", oldrev=OLDREV, draft=True)),
                await deliver(client, merge_request_hook("update")),
                await deliver(
                    client,
                    # An assignee is nothing the review or the skip rules read (specification §16).
                    merge_request_hook(
                        "update", changes={"assignees": {"previous": [], "current": []}}
                    ),
                ),
                await deliver(client, merge_request_hook("close")),
                await deliver(client, merge_request_hook("merge", state="merged")),
                await deliver(client, merge_request_hook("approved")),
                await deliver(client, merge_request_hook("open"), kind="Push Hook"),
                await deliver(client, merge_request_hook("open"), kind="Pipeline Hook"),
                await deliver(client, merge_request_hook("open"), kind="merge_request"),
                await deliver(client, b"not json at all", kind="Job Hook"),
            ]
            for answer in answers:
                assert answer.status_code == 202
                assert answer.json() == {"status": "ignored"}

    asyncio.run(scenario())
    assert count(database_url) == 0


def test_a_draft_marked_ready_is_reviewed(database_url: str) -> None:
    ready = merge_request_hook("update", changes={"draft": {"previous": True, "current": False}})

    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            answer = await deliver(client, ready)
            assert answer.status_code == 202
            assert answer.json()["status"] == "queued"

    asyncio.run(scenario())
    assert count(database_url) == 1


def test_a_repeated_event_uuid_answers_the_same_job(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            event = merge_request_hook("open")
            first = await deliver(client, event, uuid_header="9d0f6b5e-0c39-4a3b-8e2a-1f7e5f1d1a11")
            again = await deliver(client, event, uuid_header="9d0f6b5e-0c39-4a3b-8e2a-1f7e5f1d1a11")
            assert first.status_code == again.status_code == 202
            assert first.json()["job_id"] == again.json()["job_id"]
            # Another head, redelivered under the first uuid: still the job the uuid queued.
            moved = merge_request_hook("update", oldrev=HEAD, head=OLDREV)
            third = await deliver(client, moved, uuid_header="9d0f6b5e-0c39-4a3b-8e2a-1f7e5f1d1a11")
            assert third.json()["job_id"] == first.json()["job_id"]

    asyncio.run(scenario())
    assert count(database_url) == 1
    assert count(database_url, "procrastinate_jobs") == 1
    assert rows(database_url, "SELECT delivery_id FROM webhook_deliveries") == [
        ("gitlab:9d0f6b5e-0c39-4a3b-8e2a-1f7e5f1d1a11",)
    ]


def test_the_same_head_delivered_twice_is_one_job_and_a_new_head_supersedes(
    database_url: str,
) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            first = await deliver(client, merge_request_hook("open"))
            same = await deliver(client, merge_request_hook("reopen"))
            assert same.json()["job_id"] == first.json()["job_id"]
            newer = await deliver(client, merge_request_hook("update", oldrev=HEAD, head=OLDREV))
            assert newer.json()["job_id"] != first.json()["job_id"]
            old = (await client.get(f"/v1/review-jobs/{first.json()['job_id']}")).json()
            assert old["status"] == "superseded"

    asyncio.run(scenario())


def test_a_merge_request_and_a_pull_request_of_the_same_path_are_two_jobs(
    database_url: str,
) -> None:
    """One host may serve both forges' names; the keys name the forge, so neither supersedes
    nor blocks the other."""
    settings = settings_for(
        database_url,
        github_server_url="https://code.example",
        gitlab_server_url="https://code.example",
    )

    async def scenario() -> None:
        queue = JobQueue(settings, tuning=FAST)
        async with queue.opened():
            pull = PullRequestJob(
                url="https://code.example/acme/widget/pull/7",
                owner="acme",
                repo="widget",
                number=7,
                head_sha="1" * 40,
            )
            merge = PullRequestJob(
                url="https://code.example/acme/widget/-/merge_requests/7",
                owner="acme",
                repo="widget",
                number=7,
                head_sha="2" * 40,
            )
            first = await queue.enqueue(pull, source="webhook")
            second = await queue.enqueue(merge, source="webhook")
            assert first.job_id != second.job_id
            for job_id in (first.job_id, second.job_id):
                record = await queue.get(job_id)
                assert record is not None
                assert record.status == "queued"

    asyncio.run(scenario())
    assert sorted(rows(database_url, "SELECT pr_key, tenant FROM review_jobs")) == [
        ("acme/widget#7", "owner:acme"),
        ("gitlab:acme/widget!7", "gitlab:acme"),
    ]


def test_hostile_payloads_are_refused_or_ignored_never_a_500(database_url: str) -> None:
    hostile: list[dict[str, Any] | bytes] = [
        b"",
        b"[]",
        b"null",
        b'"text"',
        b"{not json",
        b'{"a": 1, "a": 2}',
        b"[" * 100_000 + b"]" * 100_000,
        json.dumps({"object_attributes": "x"}).encode(),
        merge_request_hook("open", iid="7"),
        merge_request_hook("open", iid=10**400),
        merge_request_hook("open", iid=-1),
        merge_request_hook("open", path="../../etc"),
        merge_request_hook("open", path="acme/widget/-/merge_requests/99"),
        merge_request_hook("open", path={"$ne": 1}),
        merge_request_hook("open", head={"id": 1}),
        merge_request_hook("update", oldrev=[1]),
        {"object_kind": "merge_request", "object_attributes": {"action": "open"}},
    ]

    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            for event in hostile:
                answer = await deliver(client, event)
                assert answer.status_code in (202, 422), answer.text
                if answer.status_code == 422:
                    assert answer.json()["error"]["code"] == "invalid_request"
                else:
                    assert answer.json() == {"status": "ignored"}
                assert TOKEN not in answer.text
            too_big = await deliver(client, b"{" + b" " * (5 * 1024 * 1024) + b"}")
            assert too_big.status_code == 413

    asyncio.run(scenario())
    assert count(database_url) == 0


def test_the_payloads_urls_never_become_the_jobs(database_url: str) -> None:
    """The payload's `url`, `web_url` and repository all name evil.example; the job reviews
    the merge request on our server, by the project's path and the iid."""

    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            answer = await deliver(client, merge_request_hook("open"))
            job = (await client.get(f"/v1/review-jobs/{answer.json()['job_id']}")).json()
            assert job["pull_request"]["url"] == URL

    asyncio.run(scenario())
    assert rows(database_url, "SELECT pull_request_url FROM review_jobs") == [(URL,)]


def test_the_endpoint_exists_only_with_its_secret(database_url: str) -> None:
    settings = settings_for(
        database_url,
        pr_review_gitlab_webhook_secret=None,
        pr_review_webhook_secret=SecretStr("github-secret"),
    )

    async def scenario() -> None:
        async with service(settings) as client:
            answer = await deliver(client, merge_request_hook("open"))
            assert answer.status_code == 404
            github = await client.post("/v1/webhooks/github", content=b"{}")
            assert github.status_code == 401  # GitHub's route is its own secret's

    asyncio.run(scenario())


def test_the_webhook_needs_no_service_key(database_url: str) -> None:
    settings = settings_for(database_url, pr_review_api_keys=(SecretStr("svc-key"),))

    async def scenario() -> None:
        async with service(settings) as client:
            answer = await deliver(client, merge_request_hook("open"))
            assert answer.status_code == 202
            refused = await client.get(f"/v1/review-jobs/{answer.json()['job_id']}")
            assert refused.status_code == 401

    asyncio.run(scenario())


def test_the_answer_comes_in_time_whatever_the_queue_holds(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            slowest = 0.0
            for number in range(1, 61):
                started = time.perf_counter()
                answer = await deliver(client, merge_request_hook("open", iid=number))
                slowest = max(slowest, time.perf_counter() - started)
                assert answer.status_code == 202
            assert slowest < 10.0  # GitLab's own deadline for a delivery: generous, not a speed

    asyncio.run(scenario())
    assert count(database_url) == 60


def test_review_jobs_accept_merge_request_urls(database_url: str) -> None:
    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            created = await client.post(
                "/v1/review-jobs", json={"pull_request_url": URL + "/diffs?view=inline#x"}
            )
            assert created.status_code == 202
            job = (await client.get(f"/v1/review-jobs/{created.json()['job_id']}")).json()
            assert job["pull_request"]["url"] == URL
            assert job["pull_request"]["forge"] == "gitlab"
            elsewhere = await client.post(
                "/v1/review-jobs",
                json={"pull_request_url": "https://evil.example/acme/widget/-/merge_requests/7"},
            )
            assert elsewhere.status_code == 422
            assert elsewhere.json()["error"]["code"] == "invalid_pull_request_url"

    asyncio.run(scenario())


def test_deliveries_are_counted_by_gitlab_event_and_outcome(database_url: str) -> None:
    async def scenario() -> str:
        async with service(settings_for(database_url)) as client:
            assert (await deliver(client, merge_request_hook("open"))).status_code == 202
            assert (await deliver(client, merge_request_hook("close"))).status_code == 202
            assert (await deliver(client, merge_request_hook("open"), token="x")).status_code == 401
            assert (await deliver(client, b"[1]")).status_code == 422
            assert (await deliver(client, b"[1]", kind="Note Hook")).status_code == 422
            assert (await deliver(client, b"{}", kind="Push Hook<b>")).status_code == 202
            return (await client.get("/metrics")).text

    text = asyncio.run(scenario())
    name = "pr_review_webhook_deliveries_total"
    assert value(text, name, event="merge_request", outcome="queued") == 1
    assert value(text, name, event="merge_request", outcome="ignored") == 1
    assert value(text, name, event="merge_request", outcome="invalid_signature") == 1
    assert value(text, name, event="merge_request", outcome="invalid_request") == 1
    assert value(text, name, event="note", outcome="invalid_request") == 1
    assert value(text, name, event="other", outcome="ignored") == 1
    assert label_values(text, "event") == {"merge_request", "note", "other"}
    assert TOKEN not in text
