"""Publishing with a ledger of published heads (ledger.py), through the fake GitHub.

The ledger here keeps its records in a dict (the PostgreSQL one is tested in
tests/jobs/test_published_heads.py): what is tested is how publishing uses it. A head in the
ledger lists nothing on GitHub; a flood past the listing budget does not stop the service, whose
ledger knows every head it published; a ledger that cannot be read leaves the markers' rules.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path

from pr_review_api.errors import ServerBusy
from pr_review_api.github.history import MAX_LIST_PAGES
from pr_review_api.ledger import HeadKey, PublishedHead
from pr_review_api.llm.testing import ScriptedModel, stop_turn
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.model import Publication, ReviewResult
from pr_review_api.settings import Settings
from tests.builders import final_review
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub, PullRequestFixture

BOT = "pr-review-bot"
FINDING = {
    "severity": "medium",
    "title": "T",
    "explanation": "Explained.",
    "path": "a.py",
    "line": 2,
    "evidence": "e",
    "recommendation": "r",
}


class DictLedger:
    """A `PublishLedger` in memory; after `reads` reads, every read fails as a database that
    went down would (None: never)."""

    def __init__(self, *, reads: int | None = None) -> None:
        self.heads: dict[HeadKey, PublishedHead] = {}
        self.posted: dict[HeadKey, list[str]] = {}
        self.reads = reads

    def _read(self) -> None:
        if self.reads is not None:
            if self.reads <= 0:
                raise ServerBusy()
            self.reads -= 1

    async def find(self, key: HeadKey) -> PublishedHead | None:
        self._read()
        return self.heads.get(key)

    async def fingerprints(self, key: HeadKey) -> set[str]:
        self._read()
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


def settings_for(fake: FakeGitHub, tmp_path: Path) -> Settings:
    fake.users.setdefault(GITHUB_TOKEN, BOT)
    return fake.settings(
        tmp_path / "cache", token=GITHUB_TOKEN, opencode_api_key=PROVIDER_KEY
    ).model_copy(update={"review_timeout_seconds": 120})


def pull_request(fake: FakeGitHub) -> PullRequestFixture:
    return fake.pull_request(
        "acme", "widget", 7, base={"a.py": "one\ntwo\n"}, head={"a.py": "one\nTWO\n"}
    )


def publish_once(
    url: str, settings: Settings, ledger: DictLedger, model: ScriptedModel
) -> Publication:
    result = asyncio.run(
        run_review(
            ChangeTarget(url), settings, ReviewOptions(model=model, post=True, ledger=ledger)
        )
    )
    assert result.publication is not None
    return result.publication


def one_turn() -> ScriptedModel:
    return ScriptedModel(stop_turn(final_review(FINDING, summary="S.")))


def listings(fake: FakeGitHub) -> int:
    return sum(
        1
        for r in fake.api_requests()
        if r.method == "GET" and r.path.endswith(("/reviews", "/comments"))
    )


def test_a_head_in_the_ledger_lists_nothing_and_asks_no_model(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    ledger = DictLedger()
    first = publish_once(pull.url, settings, ledger, one_turn())
    before = listings(fake_github)
    unused = ScriptedModel()  # no turn scripted: a request to it would fail the review
    again = publish_once(pull.url, settings, ledger, unused)
    assert first.status == "published"
    assert again.status == "already_published"
    assert again.review_id == first.review_id
    assert listings(fake_github) == before
    assert unused.requests == []
    assert [len(found) for found in ledger.posted.values()] == [1]  # the finding's fingerprint


def test_the_service_publishes_a_new_head_past_the_listing_budget(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    for _ in range(100 * MAX_LIST_PAGES + 100):
        fake_github.add_review("acme", "widget", 7, "flooder", "LGTM")
    # The CLI, without a ledger, cannot tell whether our review is in the pages not read.
    cli = asyncio.run(
        run_review(ChangeTarget(pull.url), settings, ReviewOptions(model=one_turn(), post=True))
    )
    assert cli.publication is not None
    assert cli.publication.status == "failed"
    # The service's ledger knows every head it published: this one is new.
    published = publish_once(pull.url, settings, DictLedger(), one_turn())
    assert published.status == "published"
    assert len(fake_github.review_posts) == 1


def test_a_ledger_that_cannot_be_read_is_never_taken_as_empty(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    first = publish_once(pull.url, settings, DictLedger(), one_turn())
    assert first.status == "published"
    # Before the model: the job is tried again later (ServerBusy), nothing is paid.
    model = one_turn()
    try:
        publish_once(pull.url, settings, DictLedger(reads=0), model)
    except ServerBusy:
        pass
    else:
        raise AssertionError("a ledger that cannot be read must not be taken as empty")
    assert model.requests == []
    # After the model (the database went down meanwhile): the markers on GitHub decide.
    late = publish_once(pull.url, settings, DictLedger(reads=1), one_turn())
    assert late.status == "already_published"
    assert late.review_id == first.review_id
    assert len(fake_github.review_posts) == 1


def test_a_quiet_head_is_in_the_ledger_with_our_first_review(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    ledger = DictLedger()
    first = publish_once(pull.url, settings, ledger, one_turn())
    pushed = fake_github.push_head(pull, {"b.py": "x\n"})
    quiet = publish_once(pushed.url, settings, ledger, one_turn())  # the same finding again
    assert (quiet.status, quiet.review_id, quiet.duplicates_skipped) == (
        "published",
        first.review_id,
        1,
    )
    assert len(fake_github.review_posts) == 1
    before = listings(fake_github)
    unused = ScriptedModel()
    again = publish_once(pushed.url, settings, ledger, unused)
    assert (again.status, again.review_id) == ("already_published", first.review_id)
    assert listings(fake_github) == before
    assert unused.requests == []
