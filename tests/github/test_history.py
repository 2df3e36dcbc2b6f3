"""Our own earlier posts read newest first, within a budget others cannot stretch
(specification §10).

The fake GitHub paginates as GitHub does (at most 100 a page, `Link` with next/last/prev/first)
and holds a real flood: thousands of reviews by another user. Reviews run through
`run_review(..., post=True)` with a scripted model; every listing request is counted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pr_review_api.github.client import GitHubClient
from pr_review_api.github.history import MAX_LIST_PAGES, prior_state
from pr_review_api.github.urls import PullRequestRef
from pr_review_api.llm.testing import ScriptedModel, stop_turn
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.model import Publication, ReviewResult
from pr_review_api.publishing.markers import head_marker
from pr_review_api.settings import Settings
from tests.builders import final_review
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub, PullRequestFixture

BOT = "pr-review-bot"
FLOOD = 3_000  # thirty full pages of someone else's reviews
FINDING = {
    "severity": "medium",
    "title": "T",
    "explanation": "Explained.",
    "path": "a.py",
    "line": 2,
    "evidence": "e",
    "recommendation": "r",
}


def settings_for(fake: FakeGitHub, tmp_path: Path) -> Settings:
    fake.users.setdefault(GITHUB_TOKEN, BOT)
    return fake.settings(
        tmp_path / "cache", token=GITHUB_TOKEN, opencode_api_key=PROVIDER_KEY
    ).model_copy(update={"review_timeout_seconds": 120})


def pull_request(fake: FakeGitHub) -> PullRequestFixture:
    return fake.pull_request(
        "acme", "widget", 7, base={"a.py": "one\ntwo\n"}, head={"a.py": "one\nTWO\n"}
    )


def flood(fake: FakeGitHub, count: int, body: str = "LGTM") -> None:
    for _ in range(count):
        fake.add_review("acme", "widget", 7, "flooder", body)


def publish_once(url: str, settings: Settings) -> Publication:
    model = ScriptedModel(stop_turn(final_review(FINDING, summary="Summary.")))
    result: ReviewResult = asyncio.run(
        run_review(ChangeTarget(url), settings, ReviewOptions(model=model, post=True))
    )
    assert result.publication is not None
    return result.publication


def listings(fake: FakeGitHub) -> int:
    """GET requests for our reviews or review comments so far."""
    return sum(
        1
        for r in fake.api_requests()
        if r.method == "GET" and r.path.endswith(("/reviews", "/comments"))
    )


def ours(fake: FakeGitHub) -> list[dict[str, Any]]:
    return [r for r in fake.posted("acme", "widget", 7) if r["user"]["login"] == BOT]


def test_a_flood_before_ours_three_runs_on_one_head_publish_one_review(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    flood(fake_github, FLOOD)
    first = publish_once(pull.url, settings)
    after_first = listings(fake_github)
    second = publish_once(pull.url, settings)
    after_second = listings(fake_github)
    third = publish_once(pull.url, settings)
    assert first.status == "published"
    assert [second.status, third.status] == ["already_published", "already_published"]
    assert second.review_id == third.review_id == first.review_id
    assert len(ours(fake_github)) == 1
    assert len(fake_github.review_posts) == 1
    # The first run reads every page once per look (two looks: the re-review's, the
    # publication's); each later run finds our marker on the last page: page 1, the last
    # page and the comments' one page, once: that look tells the head is published, and the
    # run ends there, asking no model (specification §15).
    assert after_first <= 2 * (MAX_LIST_PAGES + 1)
    assert after_second - after_first == 3
    assert listings(fake_github) - after_second == 3


def test_a_flood_after_ours_never_publishes_a_second_review_of_the_head(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    assert publish_once(pull.url, settings).status == "published"
    flood(fake_github, FLOOD + 100)  # our review is now past the budget, on page 1
    before = listings(fake_github)
    again = publish_once(pull.url, settings)
    # Page 1 holds our review: read first, it ends the walk (and the run) at once.
    assert again.status == "already_published"
    assert listings(fake_github) - before == 2
    assert len(ours(fake_github)) == 1


def test_our_review_buried_past_the_budget_makes_the_cli_publish_nothing(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    flood(fake_github, 200)  # pages 1 and 2: others'
    assert publish_once(pull.url, settings).status == "published"  # page 3
    flood(fake_github, FLOOD + 100)  # 31 pages more: page 3 is past the 30 read
    before = listings(fake_github)
    again = publish_once(pull.url, settings)
    assert again.status == "failed"
    assert again.error is not None
    assert "nothing was published" in again.error.message
    assert len(ours(fake_github)) == 1
    assert len(fake_github.review_posts) == 1
    # Bounded by the budget, whatever the flood: per look, the reviews' pages and the
    # comments' one page.
    assert listings(fake_github) - before <= 2 * (MAX_LIST_PAGES + 1)


def test_others_markers_never_count_however_new(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    flood(fake_github, 250)
    # The newest review carries this head's marker, written by someone else: it is not ours.
    fake_github.add_review("acme", "widget", 7, "flooder", head_marker(pull.head_sha))
    assert publish_once(pull.url, settings).status == "published"
    assert len(ours(fake_github)) == 1


def test_markers_are_read_in_order_across_pages_read_newest_first(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = pull_request(fake_github)
    settings = settings_for(fake_github, tmp_path)
    heads = ["1" * 40, "2" * 40, "3" * 40]
    fake_github.page_size = 3
    for number, sha in enumerate(heads):
        fake_github.add_review("acme", "widget", 7, BOT, head_marker(sha))
        flood(fake_github, 4 + number)
    ref = PullRequestRef("acme", "widget", 7, pull.url)

    async def read(head: str | None) -> tuple[list[str], bool]:
        async with GitHubClient(settings) as github:
            state = await prior_state(github, ref, head_sha=head)
        return [sha for sha, _, _ in state.heads], state.complete

    # Without a head to stop at, everything is read and kept oldest first.
    assert asyncio.run(read(None)) == (heads, True)
    # Stopping at the newest: nothing older than its page is read, and it is the last head.
    # Page 1 is always read (it names the last page); page 2, with the middle head, is not.
    assert asyncio.run(read(heads[2])) == ([heads[0], heads[2]], True)
