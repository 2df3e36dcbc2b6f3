"""No second payment (specification §§10, 15): `pr-review review --post` through the CLI against the
fake GitHub and the scripted provider, counting the provider requests.

A `--post` without a token, with a token GitHub refuses, or with one that may not write fails
before any provider request; a head already published answers `already_published` with no
findings, no rounds and no usage, asking no model; `run_review(force=True)` (the `review`
command) reviews and publishes it again without repeating a finding already posted.
"""

from __future__ import annotations

import asyncio
import json
from functools import partial
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from pydantic import SecretStr

from pr_review_api.cli import commands as cli
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget
from tests import builders
from tests.builders import BRIEF, final_turn
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub, PullRequestFixture
from tests.fakes.provider_server import ScriptedProvider

finding = partial(builders.finding, severity="medium", path="a.py", **BRIEF)


def pull(fake: FakeGitHub) -> PullRequestFixture:
    return fake.pull_request(
        "acme", "widget", 7, base={"a.py": "one\ntwo\nthree\n"}, head={"a.py": "one\nTWO\n3\n"}
    )


def review(pr: PullRequestFixture) -> Result:
    return CliRunner().invoke(cli.main, ["review", pr.url, "--post", "--format", "json"])


def test_post_without_a_token_fails_before_any_provider_request(
    env: FakeGitHub, scripted_provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    pr = pull(env)
    monkeypatch.delenv("GITHUB_TOKEN")
    done = review(pr)
    assert done.exit_code == 2, done.output
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "configuration_error"
    assert "GITHUB_TOKEN" in error["message"]
    assert scripted_provider.requests == []
    assert env.review_posts == []


def test_post_with_a_token_github_refuses_fails_before_any_provider_request(
    env: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    pr = pull(env)
    env.refused_tokens.add(GITHUB_TOKEN)
    done = review(pr)
    assert done.exit_code == 1, done.output
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "github_publish_failed"
    assert "refused" in error["message"]
    assert GITHUB_TOKEN not in done.output
    assert scripted_provider.requests == []


def test_post_with_a_read_only_token_fails_before_any_provider_request(
    env: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    pr = pull(env)
    env.repo_permissions[GITHUB_TOKEN] = {"admin": False, "push": False, "pull": True}
    done = review(pr)
    assert done.exit_code == 1, done.output
    assert json.loads(done.stdout)["error"]["code"] == "github_publish_failed"
    assert scripted_provider.requests == []


def test_a_workflow_token_without_permissions_in_the_answer_still_reviews(
    env: FakeGitHub, scripted_provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    pr = pull(env)
    env.workflow_tokens.add("workflow-token")
    monkeypatch.setenv("GITHUB_TOKEN", "workflow-token")
    scripted_provider.script(final_turn())
    done = review(pr)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["publication"]["status"] == "published"


def test_a_head_already_published_asks_no_model_and_answers_the_contracts_document(
    env: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    pr = pull(env)
    scripted_provider.script(final_turn(finding(title="Two is loud", line=2)))
    first = review(pr)
    assert first.exit_code == 0, first.output
    asked = len(scripted_provider.requests)
    again = review(pr)
    assert again.exit_code == 0, again.output
    assert len(scripted_provider.requests) == asked
    document = json.loads(again.stdout)
    assert document["termination_reason"] == "already_published"
    assert document["review"]["findings"] == []
    assert document["rounds"] == 0
    assert document["usage"]["total_tokens"] == 0
    assert document["publication"]["status"] == "already_published"
    published = json.loads(first.stdout)["publication"]
    assert document["publication"]["review_id"] == published["review_id"]
    assert len(env.review_posts) == 1


def test_a_forced_review_of_a_published_head_asks_again_and_repeats_no_finding(
    env: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    pr = pull(env)
    scripted_provider.script(final_turn(finding(title="Two is loud", line=2)))
    assert review(pr).exit_code == 0
    scripted_provider.script(
        final_turn(finding(title="Two is loud", line=2), finding(title="Three is a digit", line=3))
    )
    settings = env.settings(
        tmp_path / "cache",
        token=GITHUB_TOKEN,
        opencode_api_key=SecretStr(PROVIDER_KEY),
        opencode_base_url=scripted_provider.base_url,
        pr_review_check_runs=False,
    )
    result = asyncio.run(
        run_review(ChangeTarget(pr.url), settings, ReviewOptions(post=True, force=True))
    )
    assert result.termination_reason == "final_review"
    assert result.publication is not None
    assert result.publication.status == "published"
    assert result.publication.duplicates_skipped == 1
    assert result.publication.inline_comments == 1
    assert len(env.review_posts) == 2
    assert [c["line"] for c in env.review_posts[1]["comments"]] == [3]
