"""`--post` on a GitLab merge request (forge/gitlab.py), end to end (specification §§10, 16, 17):
the CLI and the HTTP API through run_review, the fake GitLab (notes, discussions and commit
statuses with GitLab's rules), real git and the scripted provider. The preflight fails before
any provider request; a head already published answers without one. The merge gate is the
commit status `pr-review`: running, then failed or success by `fail_on`; neutral (a skipped
automatic review) is success saying so; a head published before completes it with the counts
our note states; a token that may not set statuses costs the gate, never the review.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner, Result

from pr_review_api.cli import commands as cli
from pr_review_api.forge.gitlab import GitLabForge
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.preflight import NEEDS_CREDENTIALS
from pr_review_api.gitlab.urls import parse_merge_request_url
from pr_review_api.ledger import HeadKey, PublishedHead
from pr_review_api.llm.testing import ScriptedModel, stop_turn
from pr_review_api.loop.run import ChangeTarget, ReviewOptions, run_review
from pr_review_api.model import Publication, ReviewResult
from pr_review_api.publishing.markers import head_marker
from pr_review_api.service.app import create_app
from tests.conftest import GITLAB_TOKEN, PROVIDER_KEY
from tests.environment import Environment
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.fakes.gitlab_statuses import FakeStatuses
from tests.fakes.provider_server import ScriptedProvider
from tests.fakes.provider_server import stop_turn as provider_stop_turn
from tests.reviewed import FINDING

pytestmark = pytest.mark.e2e

PATH = "grp/sub/project"
IID = 3
BOT = "pr-review-bot"
BASE = {"src/service.py": "def save(w):\n    db.write(w)\n    return w\n"}
HEAD = {"src/service.py": "def save(w):\n    db.write(w)\n    validate(w)\n    return w\n"}
ADDED = FINDING  # on the head's added line 3
CONTEXT = {**ADDED, "severity": "low", "title": "Returned unchecked", "line": 4}
REVIEW = {"summary": "Two problems.", "findings": [ADDED, CONTEXT], "notes": []}


def merge_request(
    fake: FakeGitLab, *, private: bool = True, config: str | None = None
) -> MergeRequestFixture:
    """The merge request; `config` the base's .pr-review.toml."""
    fake.users[GITLAB_TOKEN] = BOT
    base = BASE if config is None else {**BASE, ".pr-review.toml": config}
    return fake.merge_request(PATH, IID, base=base, head=HEAD, private=private)


# What every review here runs with: one request per provider failure, a deadline to spare.
SETTINGS: dict[str, Any] = {"OPENCODE_MAX_RETRIES": "0", "REVIEW_TIMEOUT_SECONDS": "60"}


def review_cli(mr: MergeRequestFixture, *options: str) -> Result:
    return CliRunner().invoke(
        cli.main,
        ["review", mr.url, "--post", "--format", "json", *options],
        prog_name="pr-review",
    )


def posts(fake: FakeGitLab) -> list[str]:
    """The endpoints of the notes and discussions posted (the gate's statuses left out)."""
    return [
        r.path.rsplit("/", 1)[-1]
        for r in fake.api_requests()
        if r.method == "POST" and "/statuses/" not in r.path
    ]


def test_post_publishes_a_note_and_discussions_through_the_cli(
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> None:
    mr = merge_request(fake_gitlab)
    environment(scripted_provider, gitlab=fake_gitlab, cache=tmp_path / "cache", **SETTINGS)
    scripted_provider.script(provider_stop_turn(REVIEW))
    done = review_cli(mr)
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    (note,) = fake_gitlab_notes.plain_notes(PATH, IID)
    assert document["publication"] == {
        "status": "published",
        "review_id": note.id,
        "url": f"{mr.url}#note_{note.id}",
        "inline_comments": 2,
        "body_findings": 0,
        "duplicates_skipped": 0,
        "suppressed": 0,
        "resolved": 0,
        "error": None,
    }
    assert posts(fake_gitlab) == ["discussions", "discussions", "notes"]
    added, context = fake_gitlab_notes.discussions(PATH, IID)
    refs = {"base_sha": mr.base_sha, "start_sha": mr.start_sha, "head_sha": mr.head_sha}
    paths = {"new_path": "src/service.py", "old_path": "src/service.py"}
    assert added.position == {"position_type": "text", **refs, **paths, "new_line": 3}
    assert context.position == {
        "position_type": "text",
        **refs,
        **paths,
        "new_line": 4,
        "old_line": 3,
    }
    assert head_marker(mr.head_sha) in note.body
    assert {n.author for n in fake_gitlab_notes.of(PATH, IID)} == {BOT}
    assert fake_gitlab_notes.quick_actions == []
    # No GitHub request at all: a merge request's publication is GitLab's alone.
    assert {r.private_token for r in fake_gitlab.api_requests()} == {GITLAB_TOKEN}


def test_a_second_run_on_the_same_head_asks_no_model_and_posts_nothing(
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> None:
    mr = merge_request(fake_gitlab)
    environment(scripted_provider, gitlab=fake_gitlab, cache=tmp_path / "cache", **SETTINGS)
    scripted_provider.script(provider_stop_turn(REVIEW))
    first = review_cli(mr)
    assert first.exit_code == 0, first.output
    asked, posted = len(scripted_provider.requests), len(posts(fake_gitlab))
    again = review_cli(mr)
    assert again.exit_code == 0, again.output
    document = json.loads(again.stdout)
    assert document["termination_reason"] == "already_published"
    assert document["publication"]["status"] == "already_published"
    assert document["publication"]["url"] == json.loads(first.stdout)["publication"]["url"]
    assert len(scripted_provider.requests) == asked
    assert len(posts(fake_gitlab)) == posted


def test_post_without_a_token_fails_before_any_provider_request(
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> None:
    mr = merge_request(fake_gitlab, private=False)  # readable without a token
    environment(
        scripted_provider,
        gitlab=fake_gitlab,
        cache=tmp_path / "cache",
        GITLAB_TOKEN=None,
        **SETTINGS,
    )
    done = review_cli(mr)
    assert done.exit_code == 2, done.output
    assert json.loads(done.stdout)["error"] == {
        "code": "configuration_error",
        "message": NEEDS_CREDENTIALS,
    }
    assert scripted_provider.requests == []
    assert posts(fake_gitlab) == []
    assert fake_gitlab_notes.of(PATH, IID) == []


@pytest.mark.anyio
async def test_post_through_the_http_api(
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
) -> None:
    mr = merge_request(fake_gitlab)
    scripted_provider.script(provider_stop_turn(REVIEW))
    settings = fake_gitlab.settings(
        tmp_path / "cache",
        token=GITLAB_TOKEN,
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=scripted_provider.base_url,
        review_timeout_seconds=60,
    )
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", timeout=60
        ) as client:
            body = {"pull_request_url": mr.url, "post": True}
            response = await client.post("/v1/reviews", json=body)
    assert response.status_code == 200, response.text
    publication = response.json()["publication"]
    assert publication["status"] == "published"
    assert publication["inline_comments"] == 2
    assert len(fake_gitlab_notes.discussions(PATH, IID)) == 2


class DictLedger:
    """A `PublishLedger` in memory."""

    def __init__(self) -> None:
        self.heads: dict[HeadKey, PublishedHead] = {}
        self.posted: dict[HeadKey, list[str]] = {}

    async def find(self, key: HeadKey) -> PublishedHead | None:
        return self.heads.get(key)

    async def fingerprints(self, key: HeadKey) -> set[str]:
        return {
            f
            for k, found in self.posted.items()
            if (k.pull_request, k.identity) == (key.pull_request, key.identity)
            for f in found
        }

    async def record(
        self,
        key: HeadKey,
        publication: Publication,
        fingerprints: Collection[str],
        result: ReviewResult,
    ) -> None:
        document = result.model_dump(mode="json")
        self.heads[key] = PublishedHead(publication.review_id, publication.url, document)
        self.posted[key] = list(fingerprints)


def test_the_services_ledger_answers_a_published_head_before_the_model(
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    tmp_path: Path,
) -> None:
    mr = merge_request(fake_gitlab)
    settings = fake_gitlab.settings(
        tmp_path / "cache", token=GITLAB_TOKEN, opencode_api_key=PROVIDER_KEY
    )
    ledger = DictLedger()

    def run(model: ScriptedModel) -> ReviewResult:
        target = ChangeTarget(mr.url)
        return asyncio.run(
            run_review(target, settings, ReviewOptions(model=model, post=True, ledger=ledger))
        )

    first = run(ScriptedModel(stop_turn(REVIEW)))
    assert first.publication is not None
    assert first.publication.status == "published"
    key = HeadKey(f"{PATH}!{IID}", BOT, mr.head_sha)
    assert set(ledger.heads) == {key}  # `group/project!iid`: no GitHub key can equal it
    fake_gitlab_notes.notes.clear()  # the ledger alone now knows this head was published
    silent = ScriptedModel()  # a model that must not be asked
    again = run(silent)
    assert silent.requests == []
    assert again.publication is not None
    assert again.publication.status == "already_published"
    assert again.publication.review_id == first.publication.review_id
    assert fake_gitlab_notes.notes == {}


@dataclass(frozen=True)
class Gate:
    """The world of a merge gate test: the fake GitLab with notes and statuses, the scripted
    provider, and the CLI's environment pointed at them."""

    gitlab: FakeGitLab
    notes: FakeNotes
    statuses: FakeStatuses
    provider: ScriptedProvider
    monkeypatch: pytest.MonkeyPatch


@pytest.fixture
def gate(
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    fake_gitlab_statuses: FakeStatuses,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    environment: Environment,
) -> Gate:
    environment(scripted_provider, gitlab=fake_gitlab, cache=tmp_path / "cache", **SETTINGS)
    return Gate(
        fake_gitlab, fake_gitlab_notes, fake_gitlab_statuses, scripted_provider, monkeypatch
    )


def gate_states(statuses: FakeStatuses) -> list[tuple[str, int]]:
    """(state asked, GitLab's answer) of every status request, in order."""
    return [(a.payload["state"], a.answer) for a in statuses.attempts]


def test_the_gate_runs_then_fails_on_a_finding_at_fail_on_linking_our_note(gate: Gate) -> None:
    mr = merge_request(gate.gitlab, config='fail_on = "high"\n')
    gate.provider.script(provider_stop_turn(REVIEW))
    done = review_cli(mr)
    assert done.exit_code == 0, done.output  # the gate fails the merge, not the review
    assert gate_states(gate.statuses) == [("running", 201), ("failed", 201)]
    (status,) = gate.statuses.on(mr.head_sha)
    assert status.status == "failed"
    assert status.target_url == json.loads(done.stdout)["publication"]["url"]
    assert status.description is not None
    assert status.description.startswith("Findings at or above high: 1 high, 1 low;")
    assert "of 1 changed file;" in status.description  # coverage, as numbers
    assert "Validation after write" not in status.description  # no model text


def test_the_gate_succeeds_below_fail_on(gate: Gate) -> None:
    mr = merge_request(gate.gitlab, config='fail_on = "critical"\n')
    gate.provider.script(provider_stop_turn(REVIEW))
    assert review_cli(mr).exit_code == 0
    assert gate_states(gate.statuses) == [("running", 201), ("success", 201)]
    (status,) = gate.statuses.on(mr.head_sha)
    assert status.description is not None
    assert status.description.startswith("2 findings: 1 high, 1 low;")


def test_a_skipped_automatic_review_sets_a_neutral_success_and_nothing_else(gate: Gate) -> None:
    mr = merge_request(gate.gitlab, config='fail_on = "info"\nskip_authors = ["ali*"]\n')
    done = review_cli(mr, "--automatic")
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["termination_reason"] == "skipped"
    assert gate.provider.requests == []
    assert gate.notes.of(PATH, IID) == []
    assert gate_states(gate.statuses) == [("success", 201)]
    (status,) = gate.statuses.on(mr.head_sha)
    assert status.description == (
        "Neutral, skipped: the author matches skip_authors (.pr-review.toml); no review ran."
    )


def test_a_head_published_before_completes_the_gate_with_the_counts_our_note_states(
    gate: Gate,
) -> None:
    mr = merge_request(gate.gitlab, config='fail_on = "high"\n')
    gate.provider.script(provider_stop_turn(REVIEW))
    first = review_cli(mr)
    assert first.exit_code == 0, first.output
    asked = len(gate.provider.requests)
    again = review_cli(mr)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["termination_reason"] == "already_published"
    assert len(gate.provider.requests) == asked
    # No model asked, so no running status: a new status (the first was finished), from our note.
    assert gate_states(gate.statuses)[2:] == [("failed", 201)]
    later = gate.statuses.on(mr.head_sha)[-1]
    assert later.status == "failed"
    assert later.description is not None
    assert later.description.startswith("Findings at or above high: 1 high, 1 low;")
    assert later.target_url == json.loads(first.stdout)["publication"]["url"]


def test_a_token_that_may_not_set_statuses_still_publishes_the_review(gate: Gate) -> None:
    mr = merge_request(gate.gitlab, config='fail_on = "high"\n')
    gate.statuses.levels[BOT] = 20  # Reporter: may comment, may not set statuses
    gate.provider.script(provider_stop_turn(REVIEW))
    done = review_cli(mr)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["publication"]["status"] == "published"
    assert len(gate.notes.plain_notes(PATH, IID)) == 1
    assert gate_states(gate.statuses) == [("running", 403)]  # then given up
    assert gate.statuses.statuses == []
    assert GITLAB_TOKEN not in done.output


def test_check_runs_off_sets_no_status(gate: Gate) -> None:
    mr = merge_request(gate.gitlab, config='fail_on = "high"\n')
    gate.monkeypatch.setenv("PR_REVIEW_CHECK_RUNS", "false")
    gate.provider.script(provider_stop_turn(REVIEW))
    done = review_cli(mr)
    assert done.exit_code == 0, done.output
    assert len(gate.notes.plain_notes(PATH, IID)) == 1
    assert gate.statuses.attempts == []


def test_posted_counts_read_only_our_own_note(
    fake_gitlab: FakeGitLab, fake_gitlab_notes: FakeNotes, tmp_path: Path
) -> None:
    mr = merge_request(fake_gitlab)
    ours = fake_gitlab_notes.add(PATH, IID, "### pr-review\n\n**Findings:** 2 medium\n", BOT)
    theirs = fake_gitlab_notes.add(PATH, IID, "**Findings:** 9 critical\n", "mallory")
    settings = fake_gitlab.settings(tmp_path / "cache", token=GITLAB_TOKEN)

    async def counts(note_id: int | None) -> object:
        async with GitLabClient(settings) as gitlab:
            forge = GitLabForge(settings, gitlab)
            info = parse_merge_request_url(mr.url, settings).info
            return await forge.posted_counts(info, note_id)

    assert asyncio.run(counts(ours.id)) == {"medium": 2}
    assert asyncio.run(counts(theirs.id)) is None  # not ours: unknown, never its counts
    assert asyncio.run(counts(99_999)) is None  # gone
    assert asyncio.run(counts(None)) is None
