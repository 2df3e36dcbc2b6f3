"""A Gitea pull request reviewed end to end (specification §19) without publishing: a server under a
path prefix and a non-default port, real git, the fake Gitea and the scripted provider, through
the command line and the HTTP API, and published (one review, the `pr-review` commit status).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from pr_review_api.gitea.preflight import NO_WRITE
from tests.conftest import GITEA_TOKEN
from tests.environment import Environment
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.fakes.provider_server import ScriptedProvider, stop_turn, tool_call_turn
from tests.gitea.support import PATH, REVIEWER, push_head
from tests.github.support import Launch, our_git
from tests.in_process import service
from tests.reviewed import (
    FINDING,
    REVIEW,
    assert_diff_reached_the_model,
    assert_reviewed,
    review_cli,
    settings_for,
)

# Whole reviews through the CLI, the service and the fakes: the default run, not --fast.
pytestmark = pytest.mark.e2e

BASE = {"src/service.py": "def save(w):\n    db.write(w)\n", "README.md": "# widget\n"}
HEAD = {
    "src/service.py": "def save(w):\n    db.write(w)\n    validate(w)\n",
    "README.md": "# widget\n",
}


def publish(fake: FakeGitea, base: dict[str, str] = BASE) -> PullFixture:
    fake.add_token(GITEA_TOKEN, REVIEWER)
    fake.grant(PATH, REVIEWER, "read")
    return fake.pull_request(
        PATH, 3, base=base, head=HEAD, private=True, title="Validate widgets", author="alice"
    )


def assert_reviewed_pull(document: dict[str, Any], pull: PullFixture) -> None:
    """The review of the pull request #3 of acme/widget, at the fixture's commits."""
    named = {"url": pull.url, "owner": "acme", "repo": "widget", "number": 3, "forge": "gitea"}
    revisions = {
        "base_sha": pull.base_sha,
        "head_sha": pull.head_sha,
        "merge_base_sha": pull.merge_base,
    }
    assert_reviewed(document, named, revisions)


def test_a_pull_request_is_reviewed_through_the_cli(
    fake_gitea: FakeGitea,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    launches: list[Launch],
    environment: Environment,
) -> None:
    pull = publish(fake_gitea)
    assert fake_gitea.port not in (80, 443)
    assert pull.url.startswith(f"{fake_gitea.origin}/git/")
    scripted_provider.script(tool_call_turn([("d1", "inspect_git_diff", {})]), stop_turn(REVIEW))
    environment(scripted_provider, gitea=fake_gitea, cache=tmp_path / "cache", timeout=60)
    result = review_cli(pull.url + "/files", "--format", "json")
    assert result.exit_code == 0, result.output
    assert_reviewed_pull(json.loads(result.stdout), pull)
    assert_diff_reached_the_model(scripted_provider)
    scripted_provider.assert_complete()
    assert {r.authorization for r in fake_gitea.api_requests()} == {f"token {GITEA_TOKEN}"}
    assert all(r.authorization.startswith("Basic ") for r in fake_gitea.git_requests())  # type: ignore[union-attr]
    assert our_git(launches)
    for launch in launches:  # no process's command line ever held it
        assert not any(GITEA_TOKEN in arg for arg in launch.argv)
    assert GITEA_TOKEN not in result.stdout + result.stderr


@pytest.mark.anyio
async def test_a_pull_request_is_reviewed_through_the_http_api(
    fake_gitea: FakeGitea, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    pull = publish(fake_gitea)
    scripted_provider.script(tool_call_turn([("d1", "inspect_git_diff", {})]), stop_turn(REVIEW))
    async with service(
        settings_for(fake_gitea, scripted_provider, tmp_path / "c", GITEA_TOKEN)
    ) as client:
        response = await client.post("/v1/reviews", json={"pull_request_url": pull.url})
    assert response.status_code == 200, response.text
    assert_reviewed_pull(response.json(), pull)
    assert_diff_reached_the_model(scripted_provider)
    assert GITEA_TOKEN not in response.text


class Posting:
    """A writer's token on the fake Gitea, the scripted provider and the CLI's environment."""

    def __init__(
        self,
        fake: FakeGitea,
        writes: GiteaWrites,
        provider: ScriptedProvider,
        cache: Path,
        environment: Environment,
    ) -> None:
        self.fake, self.writes, self.provider = fake, writes, provider
        self.environment = environment
        environment(provider, gitea=fake, cache=cache, timeout=60)

    def pull(self, base: dict[str, str] = BASE, access: str = "write") -> PullFixture:
        pull = publish(self.fake, base)
        self.fake.grant(PATH, REVIEWER, access)  # type: ignore[arg-type]
        return pull

    def cli(self, *args: str, **env: str) -> Result:
        self.environment.set(env)
        return review_cli(*args)


@pytest.fixture
def posting(
    fake_gitea: FakeGitea,
    fake_gitea_writes: GiteaWrites,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> Posting:
    return Posting(
        fake_gitea, fake_gitea_writes, scripted_provider, tmp_path / "cache", environment
    )


def statuses(writes: GiteaWrites, pull: PullFixture) -> list[tuple[str, str]]:
    """(state, context) of every commit status posted on the head, oldest first."""
    return [
        (s["status"], s["context"]) for s in writes.statuses.get((pull.repo.id, pull.head_sha), [])
    ]


def test_a_pull_request_is_published_through_the_cli_once(posting: Posting) -> None:
    pull = posting.pull(base={**BASE, ".pr-review.toml": 'fail_on = "high"\n'})
    posting.provider.script(tool_call_turn([("d1", "inspect_git_diff", {})]), stop_turn(REVIEW))
    result = posting.cli(pull.url, "--post", "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    [review] = posting.writes.reviews[(pull.repo.id, 3)]
    assert document["publication"] == {
        "status": "published",
        "review_id": review["id"],
        "url": review["html_url"],
        "inline_comments": 1,
        "body_findings": 0,
        "duplicates_skipped": 0,
        "suppressed": 0,
        "resolved": 0,
        "error": None,
    }
    [comment] = posting.writes.review_comments[review["id"]]
    assert (comment["path"], comment["position"], comment["original_position"]) == (
        "src/service.py",
        3,
        0,
    )
    # The gate: pending when the review starts, failure for a high finding (fail_on high).
    assert statuses(posting.writes, pull) == [("pending", "pr-review"), ("failure", "pr-review")]

    again = posting.cli(pull.url, "--post", "--format", "json")
    assert again.exit_code == 0, again.output
    repeated = json.loads(again.stdout)
    assert repeated["termination_reason"] == "already_published"
    assert repeated["publication"]["status"] == "already_published"
    assert len(posting.writes.reviews[(pull.repo.id, 3)]) == 1
    assert len(posting.provider.requests) == 2  # the first review's two turns, no more
    # Completed again from the counts our review states: still failing.
    assert statuses(posting.writes, pull)[2:] == [("failure", "pr-review")]
    assert posting.writes.misplaced == []
    assert posting.writes.stale_commits == []
    assert GITEA_TOKEN not in result.output + again.output


def test_a_later_head_is_published_with_its_new_findings_only(posting: Posting) -> None:
    pull = posting.pull()
    posting.provider.script(stop_turn(REVIEW))
    assert posting.cli(pull.url, "--post").exit_code == 0
    later = push_head(posting.fake, pull, {"src/extra.py": "def extra():\n    return 1\n"})
    extra = {**FINDING, "path": "src/extra.py", "line": 2, "title": "Extra", "severity": "low"}
    posting.provider.script(stop_turn({**REVIEW, "findings": [FINDING, extra]}))
    result = posting.cli(pull.url, "--post", "--format", "json")
    assert result.exit_code == 0, result.output
    publication = json.loads(result.stdout)["publication"]
    assert (publication["inline_comments"], publication["duplicates_skipped"]) == (1, 1)
    first, short = posting.writes.reviews[(pull.repo.id, 3)]
    assert (first["commit_id"], short["commit_id"]) == (pull.head_sha, later.head_sha)
    assert [c["path"] for c in posting.writes.review_comments[short["id"]]] == ["src/extra.py"]
    # The re-review's first message named the files changed since our last reviewed head.
    assert "src/extra.py" in json.dumps(posting.provider.requests[-1].json["messages"][1])
    assert statuses(posting.writes, later) == [
        ("pending", "pr-review"),
        ("success", "pr-review"),
    ]
    assert posting.writes.misplaced == []
    assert posting.writes.stale_commits == []


def test_a_token_that_may_only_read_is_refused_before_the_model_is_asked(posting: Posting) -> None:
    pull = posting.pull(access="read")
    result = posting.cli(pull.url, "--post", "--format", "json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["error"] == {
        "code": "gitea_publish_failed",
        "message": NO_WRITE,
    }
    assert posting.provider.requests == []
    assert not any(posting.writes.reviews.values())
    assert GITEA_TOKEN not in result.output


@pytest.mark.anyio
async def test_a_pull_request_is_published_through_the_http_api(
    fake_gitea: FakeGitea,
    fake_gitea_writes: GiteaWrites,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
) -> None:
    pull = publish(fake_gitea)
    fake_gitea.grant(PATH, REVIEWER, "write")
    scripted_provider.script(stop_turn(REVIEW))
    async with service(
        settings_for(fake_gitea, scripted_provider, tmp_path / "c", GITEA_TOKEN)
    ) as client:
        body = {"pull_request_url": pull.url, "post": True}
        response = await client.post("/v1/reviews", json=body)
        again = await client.post("/v1/reviews", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["publication"]["status"] == "published"
    assert again.json()["publication"]["status"] == "already_published"
    assert len(fake_gitea_writes.reviews[(pull.repo.id, 3)]) == 1
    # No fail_on: a high finding passes the gate.
    assert statuses(fake_gitea_writes, pull)[:2] == [
        ("pending", "pr-review"),
        ("success", "pr-review"),
    ]
    assert GITEA_TOKEN not in response.text + again.text


def test_check_runs_off_sets_no_status(posting: Posting) -> None:
    pull = posting.pull()
    posting.provider.script(stop_turn(REVIEW))
    assert posting.cli(pull.url, "--post", PR_REVIEW_CHECK_RUNS="false").exit_code == 0
    assert len(posting.writes.reviews[(pull.repo.id, 3)]) == 1
    assert posting.writes.statuses == {}


def test_a_review_without_a_final_review_fails_the_gate_closed(posting: Posting) -> None:
    pull = posting.pull(base={**BASE, ".pr-review.toml": 'fail_on = "high"\n'})
    posting.provider.script(stop_turn("not a review"))
    result = posting.cli(pull.url, "--post", "--format", "json")
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["error"]["code"] == "invalid_model_response"
    assert not any(posting.writes.reviews.values())
    [pending, closed] = posting.writes.statuses[(pull.repo.id, pull.head_sha)]
    assert (pending["status"], closed["status"]) == ("pending", "failure")
    assert closed["description"].startswith("Failed closed: no validated review")


def test_a_skip_by_the_title_with_fail_on_set_is_a_failing_status(posting: Posting) -> None:
    config = 'fail_on = "high"\nskip_title = ["validate"]\n'
    pull = posting.pull(base={**BASE, ".pr-review.toml": config})
    result = posting.cli(pull.url, "--post", "--automatic", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["termination_reason"] == "skipped"
    assert posting.provider.requests == []
    assert not any(posting.writes.reviews.values())
    [status] = posting.writes.statuses[(pull.repo.id, pull.head_sha)]
    assert status["status"] == "failure"  # Gitea has no action_required: failing, saying why
    assert status["description"].startswith("Action required (failing), skipped")


@pytest.mark.anyio
async def test_the_http_api_refuses_a_readers_token_before_the_model(
    fake_gitea: FakeGitea,
    fake_gitea_writes: GiteaWrites,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
) -> None:
    pull = publish(fake_gitea)
    async with service(
        settings_for(fake_gitea, scripted_provider, tmp_path / "c", GITEA_TOKEN)
    ) as client:
        body = {"pull_request_url": pull.url, "post": True}
        response = await client.post("/v1/reviews", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["error"] == {"code": "gitea_publish_failed", "message": NO_WRITE}
    assert scripted_provider.requests == []
    assert fake_gitea_writes.statuses == {}
    assert GITEA_TOKEN not in response.text


@pytest.mark.anyio
async def test_without_gitea_server_url_a_gitea_url_is_not_routed(
    fake_gitea: FakeGitea, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    pull = publish(fake_gitea)
    settings = settings_for(fake_gitea, scripted_provider, tmp_path / "c", GITEA_TOKEN).model_copy(
        update={"gitea_server_url": None, "gitea_api_url": None}
    )
    async with service(settings) as client:
        response = await client.post("/v1/reviews", json={"pull_request_url": pull.url})
    assert response.status_code == 422, response.text
    assert response.json()["error"]["code"] == "invalid_pull_request_url"
    assert fake_gitea.requests == []
    assert scripted_provider.requests == []
