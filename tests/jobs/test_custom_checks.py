"""Custom checks gate a merge (specification §20) end to end: signed `pull_request` deliveries to
the real service, a real worker on an embedded PostgreSQL, the fake GitHub's check runs and the
scripted provider.

The same change three times under a base whose `.pr-review.toml` holds an `error` check (and
`fail_on = "none"`): the check failing with quoted evidence completes the check run `failure`
with the evidence in its summary and the published body; passing, `success`; inconclusive,
`failure`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.settings import Settings
from tests.builders import final_turn
from tests.fakes.github_server import FakeGitHub, PullRequestFixture
from tests.fakes.provider_server import ScriptedProvider, tool_call_turn
from tests.jobs.forge_service import running
from tests.jobs.test_comments import FAST, fake_github, finished, settings_for
from tests.jobs.test_jobs import deliver, pull_request_event

__all__ = ["fake_github"]  # the fixture, registered for this module

CONFIG = """
[[checks]]
name = "Migrations have a downgrade"
instructions = "Every migration under migrations/ defines downgrade()."
paths = ["migrations/**"]
mode = "error"
"""
MIGRATION = "def upgrade():\n    op.add_column('users', sa.Column('email'))\n"
EVIDENCE = "op.add_column('users', sa.Column('email'))"


def _with_check_runs(
    database_url: str, fake: FakeGitHub, provider: ScriptedProvider, tmp: Path
) -> Settings:
    settings = settings_for(database_url, fake, provider, tmp)
    return settings.model_copy(update={"pr_review_check_runs": True})


def _pull(fake: FakeGitHub, number: int) -> PullRequestFixture:
    return fake.pull_request(
        "acme",
        "widget",
        number,
        base={".pr-review.toml": CONFIG, "README.md": "# widget\n"},
        head={"migrations/0003_email.py": MIGRATION},
    )


def _downgrade_check(result: str, evidence: str) -> dict[str, str]:
    return {
        "name": "Migrations have a downgrade",
        "result": result,
        "explanation": "upgrade() adds a column and nothing removes it.",
        "evidence": evidence,
    }


@pytest.mark.parametrize(
    ("result", "conclusion"),
    [("fail", "failure"), ("pass", "success"), ("inconclusive", "failure")],
)
def test_an_error_check_decides_the_check_run_whatever_fail_on_says(
    database_url: str,
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    result: str,
    conclusion: str,
) -> None:
    settings = _with_check_runs(database_url, fake_github, scripted_provider, tmp_path)
    pr = _pull(fake_github, 7)
    read = ("c1", "read_repository_file", {"path": "migrations/0003_email.py"})
    scripted_provider.script(
        tool_call_turn([read]), final_turn(checks=[_downgrade_check(result, EVIDENCE)])
    )

    async def scenario() -> dict[str, Any]:
        async with running(settings, FAST) as (client, queue):
            event = pull_request_event(7, pr.head_sha, installation=None)
            answer = await deliver(client, event)
            assert answer.status_code == 202, answer.text
            return await finished(queue, answer.json()["job_id"])

    document = asyncio.run(scenario())
    assert document["review"]["checks"][0]["result"] == result
    (run,) = fake_github.runs_on(pr.head_sha)
    assert run["conclusion"] == conclusion
    summary = run["output"]["summary"]
    assert "| Migrations have a downgrade | error |" in summary
    body = fake_github.review_posts[-1]["body"]
    assert "#### Checks" in body
    if result == "pass":
        assert run["output"]["title"] == "0 findings"
        return
    assert run["output"]["title"].startswith("1 error check not passed")
    escaped = "**Evidence:** op\\.add\\_column\\("  # the evidence, inert Markdown
    assert escaped in summary
    assert escaped in body
    assert "An error check that fails or is inconclusive fails the gate" in summary


def test_a_fail_without_quoted_code_is_inconclusive_and_still_blocks(
    database_url: str, fake_github: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    settings = _with_check_runs(database_url, fake_github, scripted_provider, tmp_path)
    pr = _pull(fake_github, 7)
    scripted_provider.script(
        final_turn(checks=[_downgrade_check("fail", "trust me, there is no downgrade")])
    )

    async def scenario() -> dict[str, Any]:
        async with running(settings, FAST) as (client, queue):
            answer = await deliver(client, pull_request_event(7, pr.head_sha, installation=None))
            return await finished(queue, answer.json()["job_id"])

    document = asyncio.run(scenario())
    assert document["review"]["checks"][0]["result"] == "inconclusive"
    assert "made inconclusive" in document["review"]["notes"][-1]
    (run,) = fake_github.runs_on(pr.head_sha)
    assert run["conclusion"] == "failure"


@pytest.mark.parametrize(("result", "conclusion"), [("fail", "failure"), ("pass", "success")])
def test_a_head_published_before_completes_the_gate_again_from_the_checks_it_showed(
    database_url: str,
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    result: str,
    conclusion: str,
) -> None:
    """A delivery of a head already published asks no model; the gate is completed from what
    our published review shows, its checks' table included: never a pass it did not show."""
    settings = _with_check_runs(database_url, fake_github, scripted_provider, tmp_path)
    pr = _pull(fake_github, 7)
    read = ("c1", "read_repository_file", {"path": "migrations/0003_email.py"})
    scripted_provider.script(
        tool_call_turn([read]), final_turn(checks=[_downgrade_check(result, EVIDENCE)])
    )

    async def scenario() -> list[dict[str, Any]]:
        async with running(settings, FAST) as (client, queue):
            documents = []
            for action in ("opened", "reopened"):
                event = pull_request_event(7, pr.head_sha, action=action, installation=None)
                answer = await deliver(client, event)
                documents.append(await finished(queue, answer.json()["job_id"]))
            return documents

    first, again = asyncio.run(scenario())
    assert first["termination_reason"] == "final_review"
    assert again["termination_reason"] == "already_published"
    runs = fake_github.runs_on(pr.head_sha)
    assert [run["conclusion"] for run in runs][-1] == conclusion
    assert again["review"]["checks"][0]["result"] == result
