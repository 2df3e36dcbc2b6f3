"""The documented GitHub App deployment end to end, through the signed routes only (specification
§§10, 11, 15; docs/service.md "Running it with a GitHub App").

App credentials (an RSA key made here; the fake GitHub checks every RS256 JWT), the operator's
`GITHUB_TOKEN` set beside them (it must never be used), a signed `pull_request` delivery of
installation 4242 to the real service, a real worker on the embedded PostgreSQL, the token
exchange, the review posted as `<slug>[bot]` with its check run, then a signed `/pr-review
review` comment with its permission lookup: every request the fake GitHub received is checked
for who sent it. A job without an installation is refused, never run as `GITHUB_TOKEN`.
"""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from pr_review_api.jobs.queue import JobQueue
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.forge_server import RecordedRequest
from tests.fakes.github_app import FakeApp, app_key
from tests.fakes.github_server import FakeGitHub, PullRequestFixture
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.jobs.forge_service import running
from tests.jobs.test_comments import FAST, WRITER, issue_comment_event
from tests.jobs.test_jobs import SECRET, deliver, pull, pull_request_event, rows, settings_for

pytestmark = pytest.mark.e2e

APP_ID = 777
INSTALLATION = 4242
SLUG = "pr-review-app"
OPERATOR = "operator-user"  # whom GITHUB_TOKEN speaks as: never seen in an App deployment
REVIEW = {"summary": "Looks fine.", "findings": [], "notes": []}


def app_settings(
    tmp_path: Path, database_url: str, fake: FakeGitHub, provider: ScriptedProvider
) -> tuple[Settings, FakeApp]:
    """The App deployment of docs/service.md on the fake GitHub, with GITHUB_TOKEN set too."""
    key, pem = app_key(tmp_path)
    fake.users[GITHUB_TOKEN] = OPERATOR
    app = fake.install_app(
        key.public_key(), app_id=APP_ID, slug=SLUG, installations={INSTALLATION: "acme"}
    )
    settings = fake.settings(
        tmp_path / "cache",
        token=GITHUB_TOKEN,
        github_app_id=APP_ID,
        github_app_private_key_file=pem,
        opencode_api_key=SecretStr(PROVIDER_KEY),
        opencode_base_url=provider.base_url,
        opencode_max_retries=0,
        pr_review_database_url=SecretStr(database_url),
        pr_review_webhook_secret=SecretStr(SECRET),
        review_timeout_seconds=60,
    )
    return settings, app


def pull_request(fake: FakeGitHub) -> PullRequestFixture:
    return fake.pull_request("acme", "widget", 7, head={"app.py": "print('hi')\n"})


async def ended(queue: JobQueue, job_id: str) -> tuple[str, dict[str, Any]]:
    """The job's final status and result document."""
    for _ in range(2400):  # the test's own bound on a hang: 120 s on a loaded machine
        record = await queue.get(uuid.UUID(job_id))
        assert record is not None
        if record.status in ("succeeded", "failed"):
            assert record.result is not None
            return record.status, record.result
        await asyncio.sleep(0.05)
    raise AssertionError("the job did not end")


def identity(request: RecordedRequest, app: FakeApp) -> str:
    """Who sent a request the fake GitHub received: `jwt`, `installation:<id>`, or what else."""
    value = request.authorization or ""
    bearer = value.removeprefix("Bearer ")
    if value.startswith("Basic "):
        user, _, bearer = base64.b64decode(value[6:]).decode().partition(":")
        assert user == "x-access-token"
    if bearer in app.tokens:
        return f"installation:{app.tokens[bearer]}"
    if app.is_jwt(bearer):  # the fake answered an invalid one 401, which the test refuses
        return "jwt"
    return "operator" if GITHUB_TOKEN in (value + bearer) else f"other:{value[:12]}"


@pytest.fixture
def deployment(
    tmp_path: Path, database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> tuple[Settings, FakeApp, PullRequestFixture]:
    """The App deployment's settings, the App, and pull request 7 where WRITER may write."""
    settings, app = app_settings(tmp_path, database_url, fake_github, scripted_provider)
    fake_github.permissions[("acme", "widget", WRITER)] = "write"
    return settings, app, pull_request(fake_github)


def test_a_signed_delivery_of_an_installation_is_reviewed_as_the_apps_bot(
    deployment: tuple[Settings, FakeApp, PullRequestFixture],
    database_url: str,
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
) -> None:
    settings, app, pr = deployment
    scripted_provider.script(stop_turn(REVIEW), stop_turn(REVIEW))

    async def scenario() -> list[tuple[str, dict[str, Any]]]:
        async with running(settings, FAST) as (client, queue):
            opened = pull_request_event(7, pr.head_sha, action="opened", installation=INSTALLATION)
            answer = await deliver(client, opened)
            assert answer.status_code == 202, answer.text
            first = await ended(queue, answer.json()["job_id"])
            command = issue_comment_event(WRITER, "/pr-review review")
            command["installation"] = {"id": INSTALLATION}
            asked = await deliver(client, command, kind="issue_comment")
            assert asked.status_code == 202, asked.text
            return [first, await ended(queue, asked.json()["job_id"])]

    (status, document), (forced, again) = asyncio.run(scenario())
    assert status == "succeeded", document
    assert document["publication"]["status"] == "published"
    assert forced == "succeeded", again
    assert again["termination_reason"] == "final_review"
    scripted_provider.assert_complete()  # the command reviewed the head again
    # The token exchange, for this installation only, with valid App JWTs.
    assert app.exchanges
    assert set(app.exchanges) == {INSTALLATION}
    assert all(claims["iss"] == str(APP_ID) for claims in app.claims)
    # The review and the check run are the App's bot's.
    (review,) = fake_github.reviews[("acme", "widget", 7)]
    assert review["user"]["login"] == f"{SLUG}[bot]"
    assert fake_github.check_runs, "no check run was created"
    check_posts = [
        r
        for r in fake_github.api_requests()
        if r.path.endswith("/check-runs") and r.method == "POST"
    ]
    assert check_posts
    assert {identity(r, app) for r in check_posts} == {f"installation:{INSTALLATION}"}
    # The comment's permission lookup was asked, as the installation.
    lookups = [r for r in fake_github.api_requests() if r.path.endswith(f"/{WRITER}/permission")]
    assert len(lookups) == 1
    assert identity(lookups[0], app) == f"installation:{INSTALLATION}"
    # Every request the fake GitHub received, API and git alike: the App's JWT on /app only,
    # the installation's token everywhere else; the operator's token never.
    seen: dict[str, int] = {}
    for request in fake_github.requests:
        who = identity(request, app)
        seen[who] = seen.get(who, 0) + 1
        on_app = request.path.startswith("/api/v3/app")
        assert who == ("jwt" if on_app else f"installation:{INSTALLATION}"), (request.path, who)
        assert request.status < 400 or request.status == 404, (request.path, request.status)
    assert seen.get("jwt", 0) >= 2  # GET /app and at least one exchange
    assert fake_github.git_requests("acme", "widget"), "the code was not fetched"
    jobs = rows(database_url, "SELECT installation_id, result::text FROM review_jobs")
    assert [row[0] for row in jobs] == [INSTALLATION, INSTALLATION]  # each job carries it
    dump = json.dumps([str(row[1]) for row in jobs])
    assert "ghs_" not in dump
    assert GITHUB_TOKEN not in dump


def test_with_the_app_a_job_without_an_installation_is_refused_not_run_as_github_token(
    deployment: tuple[Settings, FakeApp, PullRequestFixture],
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
) -> None:
    settings, app, pr = deployment

    async def scenario() -> list[Any]:
        async with running(settings, FAST) as (client, queue):
            delivery = pull_request_event(7, pr.head_sha, action="opened", installation=None)
            answer = await deliver(client, delivery)
            api = await client.post(
                # Another pull request: a job of 7 would supersede the delivery's job.
                "/v1/review-jobs",
                json={"pull_request_url": pr.url.replace("/pull/7", "/pull/8"), "post": True},
            )
            comment = issue_comment_event(WRITER, "/pr-review review")  # no installation
            ignored = await deliver(client, comment, kind="issue_comment")
            return [
                await ended(queue, answer.json()["job_id"]),
                await ended(queue, api.json()["job_id"]),
                ignored.json(),
            ]

    from_webhook, from_api, command = asyncio.run(scenario())
    for status, document in (from_webhook, from_api):
        assert status == "failed"
        assert document["error"]["code"] == "configuration_error"
        assert "installation" in document["error"]["message"]
        assert GITHUB_TOKEN not in json.dumps(document)
    assert command == {"status": "ignored"}
    assert fake_github.requests == []  # nothing asked as GITHUB_TOKEN, nor anonymously
    assert scripted_provider.requests == []
    assert app.exchanges == []


def test_a_waiting_job_without_the_installation_does_not_take_a_delivery_that_names_it(
    database_url: str,
) -> None:
    settings = settings_for(database_url)
    head = "c" * 40

    async def scenario() -> list[Any]:
        queue = JobQueue(settings)
        async with queue.opened():
            without = await queue.enqueue(pull(7, head_sha=head, post=True), source="webhook")
            named = pull(7, head_sha=head, post=True, installation_id=INSTALLATION)
            first = await queue.enqueue(named, source="webhook")
            again = await queue.enqueue(named, source="webhook")  # the same head, reopened
            plain = await queue.enqueue(pull(7, head_sha=head, post=True), source="webhook")
            return [without.job_id, first.job_id, again.job_id, plain.job_id]

    without, first, again, plain = asyncio.run(scenario())
    assert first != without  # a job of its own, with its installation
    assert again == first == plain  # one job for the head, which runs as the installation
    states = dict(rows(database_url, "SELECT id, status FROM review_jobs"))
    assert states[without] == "superseded"
    assert states[first] == "queued"
