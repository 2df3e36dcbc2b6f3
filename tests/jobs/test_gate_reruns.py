"""The merge gate run again through signed webhooks and a real worker (specification §16, the gate
that fails closed): a check that failed closed re-run by its button (`check_run` `rerequested`), a
skip by the title answered `action_required` and evaluated again when the title changes, on
GitHub (the fake's check runs) and on GitLab (the fake's commit statuses).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from pr_review_api.jobs.queue import JobQueue
from pr_review_api.settings import Settings
from tests.builders import final_turn
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub, PullRequestFixture
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.fakes.gitlab_statuses import FakeStatuses
from tests.fakes.provider_server import ScriptedProvider
from tests.gitlab.payloads import merge_request_hook
from tests.jobs import test_gitlab_webhooks as gitlab_hooks
from tests.jobs.gitlab_service import GitLabService
from tests.jobs.test_jobs import deliver, pull_request_event, rows, service, settings_for, worker
from tests.loop.test_gate import INJECTED, TEN, finding, obeying_model

pytestmark = pytest.mark.e2e

PROJECT = "acme/platform/widget"
GATED = 'fail_on = "high"\nskip_title = ["[wip]"]\n'
HEAD_FILES = {"a.py": TEN.replace("line 5\n", "line five\n")}


def github_settings(database_url: str, fake: FakeGitHub, provider: ScriptedProvider) -> Settings:
    fake.users.setdefault(GITHUB_TOKEN, "pr-review-bot")
    github = fake.settings(Path("cache"), token=GITHUB_TOKEN)
    return settings_for(
        database_url,
        github_server_url=github.github_server_url,
        github_api_url=github.github_api_url,
        github_token=github.github_token,
        pr_review_cache_dir=Path("cache").resolve(),
        opencode_base_url=provider.base_url,
        opencode_max_retries=0,
        pr_review_job_max_attempts=1,
        review_max_tool_calls=6,
    )


def gated_pull(fake: FakeGitHub, number: int, config: str, **fields: Any) -> PullRequestFixture:
    """acme/widget#number: `config` as the base's .pr-review.toml, one changed line."""
    base = {"a.py": TEN, ".pr-review.toml": config}
    return fake.pull_request("acme", "widget", number, base=base, head=HEAD_FILES, **fields)


def pull_event(pr: PullRequestFixture, action: str, **extra: Any) -> dict[str, Any]:
    return {
        "action": action,
        "number": pr.number,
        "pull_request": {"number": pr.number, "draft": False, "state": "open"}
        | {"head": {"sha": pr.head_sha}},
        "repository": {"name": "widget", "owner": {"login": "acme"}},
        **extra,
    }


def rerequested(number: int, head_sha: str, name: str = "pr-review") -> dict[str, Any]:
    """GitHub's `check_run` `rerequested` delivery (the fields we read, and a few more)."""
    run = {
        "id": 4,
        "name": name,
        "head_sha": head_sha,
        "status": "completed",
        "conclusion": "failure",
        "external_id": f"pr-review:pull/{number}",
        "app": {"id": 77, "slug": "pr-review"},
        "pull_requests": [{"number": number, "head": {"sha": head_sha, "ref": "feature"}}],
    }
    return {
        "action": "rerequested",
        "check_run": run,
        "repository": {"name": "widget", "owner": {"login": "acme"}},
        "sender": {"login": "maintainer"},
        "installation": {"id": 42},
    }


async def settled(queue: JobQueue, answer: httpx.Response) -> dict[str, Any]:
    """The job a delivery queued, once it has ended (the test's own bound: 60 s)."""
    assert answer.status_code == 202, answer.text
    job_id = uuid.UUID(answer.json()["job_id"])
    for _ in range(1200):
        record = await queue.get(job_id)
        assert record is not None
        if record.status in ("succeeded", "failed"):
            return {"status": record.status, "result": record.result}
        await asyncio.sleep(0.05)
    raise AssertionError("the job did not end")


def conclusions(fake: FakeGitHub, pr: PullRequestFixture) -> list[str | None]:
    return [run.get("conclusion") for run in fake.runs_on(pr.head_sha)]


def test_a_check_failed_closed_is_failure_and_its_rerun_button_reviews_again(
    database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    pr = gated_pull(fake_github, 7, 'fail_on = "high"\n', body=INJECTED)
    settings = github_settings(database_url, fake_github, scripted_provider)
    scripted_provider.responder = obeying_model

    async def scenario() -> list[dict[str, Any]]:
        async with service(settings) as client, worker(settings, None) as queue:
            opened = await settled(queue, await deliver(client, pull_event(pr, "opened")))
            # Another app's check of the same name, or another action: nothing to run.
            other = rerequested(pr.number, pr.head_sha, name="ci")
            assert (await deliver(client, other, kind="check_run")).json() == {"status": "ignored"}
            # The author mends the description; a maintainer presses the check's re-run button.
            fake_github.set_pull(
                "acme", "widget", 7, base_sha=pr.base_sha, head_sha=pr.head_sha, body="Fixed."
            )
            answer = await deliver(client, rerequested(pr.number, pr.head_sha), kind="check_run")
            return [opened, await settled(queue, answer)]

    opened, rerun = asyncio.run(scenario())
    assert opened["status"] == "failed"
    assert opened["result"]["error"]["code"] == "max_tool_calls"
    first, second = fake_github.runs_on(pr.head_sha)
    assert first["conclusion"] == "failure"  # neutral would count as passing on GitHub
    assert "max_tool_calls" in first["output"]["title"]
    assert rerun["status"] == "succeeded"
    assert rerun["result"]["publication"]["status"] == "published"
    assert second["conclusion"] == "failure"
    assert second["output"]["title"].startswith("Findings at or above high: 1 high")
    assert len(fake_github.posted("acme", "widget", 7)) == 1


def test_every_gate_delivery_queues_its_job_with_the_installation_as_an_opened_one_does(
    database_url: str,
) -> None:
    """The re-run and the skip rules' deliveries are jobs like the others: their pull request,
    the head and the delivery's App installation (specification §11), whatever that is."""
    opened = pull_request_event(1, "a" * 40, action="opened", installation=42)
    rerun = rerequested(2, "c" * 40)
    labeled = pull_request_event(3, "d" * 40, action="labeled", installation=42)

    async def scenario() -> None:
        async with service(settings_for(database_url)) as client:
            assert (await deliver(client, opened)).status_code == 202
            assert (await deliver(client, rerun, kind="check_run")).status_code == 202
            assert (await deliver(client, labeled)).status_code == 202

    asyncio.run(scenario())
    found = rows(
        database_url,
        "SELECT number, head_sha, installation_id, source FROM review_jobs ORDER BY number",
    )
    assert [(n, sha) for n, sha, _, _ in found] == [(1, "a" * 40), (2, "c" * 40), (3, "d" * 40)]
    assert len({(installation, source) for _, _, installation, source in found}) == 1


def test_a_skip_by_the_title_requires_action_until_the_title_changes_then_the_head_is_gated(
    database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    pr = gated_pull(fake_github, 8, GATED, title="[WIP] speed it up")
    settings = github_settings(database_url, fake_github, scripted_provider)
    scripted_provider.script(
        final_turn(finding(path="a.py", line=5, severity="high"))
    )  # one review is paid for

    async def scenario() -> list[dict[str, Any]]:
        async with service(settings) as client, worker(settings, None) as queue:
            skipped = await settled(queue, await deliver(client, pull_event(pr, "opened")))
            assert conclusions(fake_github, pr) == ["action_required"]
            body_only = pull_event(pr, "edited", changes={"body": {"from": "x"}})
            assert (await deliver(client, body_only)).json() == {"status": "ignored"}
            fake_github.set_pull(
                "acme", "widget", 8, base_sha=pr.base_sha, head_sha=pr.head_sha, title="Speed up"
            )
            edited = pull_event(pr, "edited", changes={"title": {"from": "[WIP] speed it up"}})
            reviewed = await settled(queue, await deliver(client, edited))
            # A label after that: the rules are evaluated again, the head is not reviewed again.
            labeled = pull_event(pr, "labeled", label={"name": "perf"})
            again = await settled(queue, await deliver(client, labeled))
            return [skipped, reviewed, again]

    skipped, reviewed, again = asyncio.run(scenario())
    assert skipped["result"]["termination_reason"] == "skipped"
    assert reviewed["result"]["termination_reason"] == "final_review"
    assert reviewed["result"]["publication"]["status"] == "published"
    assert again["result"]["publication"]["status"] == "already_published"
    scripted_provider.assert_complete()
    assert len(scripted_provider.requests) == 1
    assert conclusions(fake_github, pr) == ["action_required", "failure", "failure"]
    assert len(fake_github.posted("acme", "widget", 8)) == 1


@dataclass
class GitLabWorld:
    """The fake GitLab with its notes and statuses, the provider, and the service beside them."""

    fake: FakeGitLab
    notes: FakeNotes
    statuses: FakeStatuses
    provider: ScriptedProvider
    service: GitLabService

    def merge_request(self, iid: int, config: str, **fields: Any) -> MergeRequestFixture:
        base = {".pr-review.toml": config, "a.py": TEN}
        return self.fake.merge_request(PROJECT, iid, base=base, head=HEAD_FILES, **fields)

    def run(
        self, *deliveries: dict[str, Any], between: Callable[[], object] | None = None
    ) -> list[dict[str, Any]]:
        """Each delivery through the signed route, each job awaited, then `between()`
        (a change on the fake GitLab)."""
        settings = self.service.settings(
            opencode_base_url=self.provider.base_url,
            opencode_max_retries=0,
            pr_review_job_max_attempts=1,
            review_max_tool_calls=6,
        )

        async def scenario() -> list[dict[str, Any]]:
            jobs = []
            async with self.service.running(settings) as (client, queue):
                for event in deliveries:
                    jobs.append(await settled(queue, await gitlab_hooks.deliver(client, event)))
                    if between is not None:
                        between()
            return jobs

        return asyncio.run(scenario())


@pytest.fixture
def gitlab(
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    fake_gitlab_statuses: FakeStatuses,
    scripted_provider: ScriptedProvider,
    gitlab_service: GitLabService,
) -> GitLabWorld:
    return GitLabWorld(
        fake_gitlab, fake_gitlab_notes, fake_gitlab_statuses, scripted_provider, gitlab_service
    )


def test_on_gitlab_a_skip_by_the_title_fails_the_status_until_the_title_changes(
    gitlab: GitLabWorld,
) -> None:
    fixture = gitlab.merge_request(9, GATED, title="[WIP] try something")
    gitlab.provider.script(final_turn(finding(path="a.py", line=5, severity="high")))
    opened = merge_request_hook("open", path=PROJECT, iid=9, head=fixture.head_sha)
    retitled = merge_request_hook(
        "update",
        path=PROJECT,
        iid=9,
        head=fixture.head_sha,
        changes={"title": {"previous": "[WIP] try something", "current": "Try something"}},
    )
    document = gitlab.fake.documents[(gitlab.fake.project(PROJECT).id, 9)]
    skipped, reviewed = gitlab.run(
        opened, retitled, between=lambda: document.update(title="Try something")
    )
    assert skipped["result"]["termination_reason"] == "skipped"
    assert reviewed["result"]["publication"]["status"] == "published"
    gitlab.provider.assert_complete()
    posted = [a.payload["state"] for a in gitlab.statuses.attempts if a.answer == 201]
    assert posted == ["failed", "running", "failed"]
    skip, review = gitlab.statuses.on(fixture.head_sha)
    assert skip.status == review.status == "failed"
    assert (skip.description or "").startswith("Action required (failing), skipped")
    assert (review.description or "").startswith("Findings at or above high: 1 high")
    assert len(gitlab.notes.plain_notes(PROJECT, 9)) == 1


def test_on_gitlab_a_review_the_description_ends_early_fails_the_status_closed(
    gitlab: GitLabWorld,
) -> None:
    fixture = gitlab.merge_request(10, 'fail_on = "high"\n', description=INJECTED)
    gitlab.provider.responder = obeying_model
    (job,) = gitlab.run(merge_request_hook("open", path=PROJECT, iid=10, head=fixture.head_sha))
    assert job["status"] == "failed"
    assert job["result"]["error"]["code"] == "max_tool_calls"
    assert gitlab.notes.plain_notes(PROJECT, 10) == []
    (status,) = gitlab.statuses.on(fixture.head_sha)
    assert status.status == "failed"  # "success" (neutral) would let the merge request merge
    assert (status.description or "").startswith("Failed closed: no validated review")
    assert "max_tool_calls" in (status.description or "")
