"""Findings dismissed on a merge request (gitlab/dismissals.py) against the fake GitLab: a
Developer's `thumbsdown` on our finding's first note dismisses it, a Guest's, a blocked
Maintainer's, a bot's and our own do not; outside the service an `ignore` reply by a Developer
does too; awards are read only for our findings, within the request budget, a few at a time,
and an award listing GitLab refuses dismisses nothing.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pr_review_api.gitlab import dismissals
from pr_review_api.gitlab.comments import AccessLevels
from pr_review_api.gitlab.discussions import MAX_DISCUSSION_PAGES, finding_discussions
from pr_review_api.gitlab.dismissals import dismissed_on_merge_request, thumbs_down
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.gitlab_threads import FakeThreads
from tests.gitlab.discussions import BOT, BOT_ID, IID, PROJECT, client_of, ref_of, started

FINGERPRINTS = [f"{n:x}" * 16 for n in range(1, 10)]


@pytest.fixture
def threads(fake_gitlab: FakeGitLab, fake_gitlab_threads: FakeThreads) -> FakeThreads:
    fake_gitlab.merge_request(PROJECT, IID)
    members = fake_gitlab_threads.members
    members.add(PROJECT, user_id=BOT_ID, username=BOT, level=30)
    members.add(PROJECT, user_id=51, username="dev", level=30)
    members.add(PROJECT, user_id=52, username="maintainer", level=40)
    members.add(PROJECT, user_id=53, username="guest", level=10)
    members.add(PROJECT, user_id=54, username="reporter", level=20)
    members.add(PROJECT, user_id=55, username="gone", level=40, state="blocked")
    members.add(PROJECT, user_id=56, username="renovate-bot", level=40)
    return fake_gitlab_threads


def found_by_thumbs_down(fake: FakeGitLab, tmp_path: Path) -> list[tuple[str, str]]:
    async def scenario() -> list[tuple[str, str]]:
        async with client_of(fake, tmp_path) as client:
            ref = ref_of(fake)
            listed = await finding_discussions(client, ref)
            found = await thumbs_down(client, ref, listed, AccessLevels())
            return [(discussion.fingerprint, user) for discussion, user in found]

    return asyncio.run(scenario())


def test_only_a_developers_thumbsdown_on_our_finding_dismisses_it(
    fake_gitlab: FakeGitLab, threads: FakeThreads, tmp_path: Path
) -> None:
    notes = threads.notes
    given = [
        ("thumbsdown", "dev"),  # a Developer: dismissed
        ("thumbsdown", "guest"),
        ("thumbsdown", "gone"),  # a blocked Maintainer
        ("thumbsdown", "renovate-bot"),  # a bot, whatever its access
        ("thumbsdown", BOT),  # our own
        ("thumbsup", "maintainer"),  # not the dismissing emoji
        ("thumbsdown", "stranger"),  # not a member (404)
    ]
    ours = []
    for fingerprint, (name, user) in zip(FINGERPRINTS, given, strict=False):
        ours.append(started(notes, fingerprint))
        threads.award(ours[-1].id, name, user)
    reply = notes.reply(PROJECT, IID, ours[1].discussion_id or "", "I disagree", "dev")
    threads.award(reply.id, "thumbsdown", "maintainer")  # on a reply, not our finding's note
    theirs = started(notes, FINGERPRINTS[8], author="alice")
    threads.award(theirs.id, "thumbsdown", "maintainer")  # not one of our discussions
    assert found_by_thumbs_down(fake_gitlab, tmp_path) == [(FINGERPRINTS[0], "dev")]
    assert sorted(threads.award_reads) == [note.id for note in ours]  # ours, first notes only
    assert BOT_ID not in {user for _, user in threads.members.asked}


def test_outside_the_service_an_ignore_reply_dismisses_too(
    fake_gitlab: FakeGitLab, threads: FakeThreads, tmp_path: Path
) -> None:
    notes = threads.notes
    replies = [
        ("/pr-review ignore", "dev"),  # dismissed
        (f"@{BOT.upper()}   Ignore", "maintainer"),  # dismissed
        ("/pr-review ignore this one", "dev"),  # not the command
        ("/pr-review ignore", "reporter"),  # not a Developer
        ("/pr-review ignore", "renovate-bot"),
        ("/pr-review ignore", BOT),
        ("@someone-else ignore", "dev"),
    ]
    ours = [started(notes, fingerprint) for fingerprint in FINGERPRINTS[:8]]
    for note, (text, user) in zip(ours, replies, strict=False):
        notes.reply(PROJECT, IID, note.discussion_id or "", text, user)
    threads.award(ours[7].id, "thumbsdown", "maintainer")  # and an award, read as well
    theirs = started(notes, FINGERPRINTS[8], author="alice")
    notes.reply(PROJECT, IID, theirs.discussion_id or "", "/pr-review ignore", "dev")

    async def scenario() -> set[str]:
        async with client_of(fake_gitlab, tmp_path) as client:
            return await dismissed_on_merge_request(client, ref_of(fake_gitlab), AccessLevels())

    found = asyncio.run(scenario())
    assert found == {FINGERPRINTS[0], FINGERPRINTS[1], FINGERPRINTS[7]}
    # Each user's access asked once (the cache), and never ours nor a bot's.
    asked = [user for _, user in threads.members.asked]
    assert sorted(asked) == sorted(set(asked))
    assert not {BOT_ID, 56} & set(asked)
    # The discussions already dismissed by a reply cost no award read.
    assert ours[0].id not in threads.award_reads
    assert ours[1].id not in threads.award_reads


def test_award_reads_keep_to_the_budget_newest_first_a_few_at_a_time(
    fake_gitlab: FakeGitLab,
    threads: FakeThreads,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dismissals, "MAX_AWARD_READS", 3)
    monkeypatch.setattr(dismissals, "AWARD_READ_CONCURRENCY", 2)
    threads.award_delay = 0.05  # so that reads not bounded would overlap
    ours = [started(threads.notes, fingerprint) for fingerprint in FINGERPRINTS[:6]]
    threads.award(ours[0].id, "thumbsdown", "dev")  # outside the budget: not read
    threads.award(ours[5].id, "thumbsdown", "dev")
    assert found_by_thumbs_down(fake_gitlab, tmp_path) == [(FINGERPRINTS[5], "dev")]
    assert sorted(threads.award_reads) == [note.id for note in ours[3:]]
    award_requests = [r for r in fake_gitlab.api_requests() if r.path.endswith("/award_emoji")]
    assert len(award_requests) == 3
    assert 1 <= threads.most_awards_in_flight <= 2


@pytest.mark.parametrize("status", [404, 500])
def test_an_award_listing_gitlab_does_not_give_dismisses_nothing(
    fake_gitlab: FakeGitLab, threads: FakeThreads, tmp_path: Path, status: int
) -> None:
    def refuse(fake: FakeGitLab, handler: object, record: object, *rest: object) -> bool:
        if not str(getattr(record, "path", "")).endswith("/award_emoji"):
            return False
        handler.send_json(record, status, {"message": "no"})  # type: ignore[attr-defined]
        return True

    note = started(threads.notes, FINGERPRINTS[0])
    threads.award(note.id, "thumbsdown", "dev")
    fake_gitlab.routes.insert(0, refuse)
    assert found_by_thumbs_down(fake_gitlab, tmp_path) == []
    assert threads.award_reads == []


def test_a_flood_of_discussions_before_or_after_ours_hides_none_of_them(
    fake_gitlab: FakeGitLab, threads: FakeThreads, tmp_path: Path
) -> None:
    # GitLab lists discussions oldest first, 100 a page, with no order to ask for: 1,050 of
    # someone else's between our first finding and our last are more than the pages read.
    first = started(threads.notes, FINGERPRINTS[0])
    for n in range(1050):
        started(threads.notes, f"{n:032x}", author="alice")
    last = started(threads.notes, FINGERPRINTS[1])
    for note in (first, last):
        threads.award(note.id, "thumbsdown", "dev")
    found = found_by_thumbs_down(fake_gitlab, tmp_path)
    assert sorted(found) == [(FINGERPRINTS[0], "dev"), (FINGERPRINTS[1], "dev")]
    listings = [r for r in fake_gitlab.api_requests() if r.path.endswith("/discussions")]
    assert len(listings) == MAX_DISCUSSION_PAGES  # the first page and the newest, no more


def test_a_flood_of_awards_hides_no_developers_thumbsdown(
    fake_gitlab: FakeGitLab, threads: FakeThreads, tmp_path: Path
) -> None:
    # GitLab lists a note's awards oldest first, 100 a page, with no filter by name.
    before, after = started(threads.notes, FINGERPRINTS[0]), started(threads.notes, FINGERPRINTS[1])
    threads.award(before.id, "thumbsdown", "dev")
    for n in range(250):
        for note in (before, after):
            threads.award(note.id, "thumbsup", f"fan-{n}")
    threads.award(after.id, "thumbsdown", "maintainer")
    found = found_by_thumbs_down(fake_gitlab, tmp_path)
    assert sorted(found) == [(FINGERPRINTS[0], "dev"), (FINGERPRINTS[1], "maintainer")]
    award_requests = [r for r in fake_gitlab.api_requests() if r.path.endswith("/award_emoji")]
    assert len(award_requests) == 2 * dismissals.MAX_AWARD_PAGES
