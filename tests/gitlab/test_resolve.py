"""Fixed findings' discussions resolved on a merge request (gitlab/resolve.py) against the fake
GitLab and the real commits it serves: only our unresolved discussion whose line changed since
the head it was posted on, and whose finding the new review does not report (nor reports again
near its line), with no question waiting, is resolved; a bot GitLab does not let resolve (a
Reporter) resolves nothing and does not fail.
"""

from __future__ import annotations

import asyncio
from functools import partial
from pathlib import Path

import pytest

from pr_review_api.gitlab.resolve import resolve_fixed
from pr_review_api.model import Finding
from pr_review_api.publishing.threads import NewHead
from tests import builders
from tests.fakes.gitlab_server import FakeGitLab, MergeRequestFixture
from tests.fakes.gitlab_threads import FakeThreads
from tests.gitlab.discussions import BOT, BOT_ID, IID, PROJECT, client_of, ref_of, started

BASE = {"a.py": "one\ntwo\nthree\nfour\nfive\n"}
HEAD = {"a.py": "one\ntwo\nTHREE\nfour\nfive\nsix\n"}
FIXED = {"a.py": "one\ntwo\nthree, fixed\nfour\nfive\nsix\n"}  # line 3 changed, 6 did not
FINGERPRINTS = [f"{n:x}" * 16 for n in range(1, 10)]


finding = partial(builders.finding_model, severity="medium", path="a.py", **builders.TERSE)


@pytest.fixture
def mr(fake_gitlab: FakeGitLab, fake_gitlab_threads: FakeThreads) -> MergeRequestFixture:
    return fake_gitlab.merge_request(PROJECT, IID, base=BASE, head=HEAD)


def resolved_count(
    fake: FakeGitLab,
    mr: MergeRequestFixture,
    tmp_path: Path,
    reported: set[str],
    findings: list[Finding],
) -> tuple[str, int]:
    fixed = mr.project.commit(FIXED, mr.head_sha, "fix")
    mr.project.set_merge_request_head(IID, fixed)  # pushed: the served repository has it

    async def scenario() -> int:
        async with client_of(fake, tmp_path) as client:
            new_head = NewHead(mr.project.bare, fixed, reported, findings)
            return await resolve_fixed(client, ref_of(fake), new_head)

    return fixed, asyncio.run(scenario())


def test_only_our_fixed_discussions_are_resolved(
    fake_gitlab: FakeGitLab,
    fake_gitlab_threads: FakeThreads,
    mr: MergeRequestFixture,
    tmp_path: Path,
) -> None:
    threads, notes = fake_gitlab_threads, fake_gitlab_threads.notes
    threads.members.add(PROJECT, user_id=BOT_ID, username=BOT, level=30)

    def on(line: int, n: int, **fields: str) -> str:
        note = started(notes, FINGERPRINTS[n], head=mr.head_sha, line=line, **fields)
        assert note.discussion_id is not None
        return note.discussion_id

    fixed_one = on(3, 0)  # its line changed, its finding gone: resolved
    on(6, 1)  # its line did not change
    on(3, 2)  # still reported
    asked = on(3, 3)  # a question waits for an answer
    notes.reply(PROJECT, IID, asked, "Is this really fixed?", "dev")
    answered = on(3, 4)  # a question we answered: nothing waits
    notes.reply(PROJECT, IID, answered, "Why?", "dev")
    notes.reply(PROJECT, IID, answered, "Because.", BOT)
    on(3, 5, author="alice")  # not ours
    on(3, 6, title="Shadowed value")  # reported again one line below, its text changed
    done = on(3, 7)
    for note in notes.discussions(PROJECT, IID):
        if note.discussion_id == done:
            note.resolved_by = (BOT_ID, BOT)  # resolved before: not asked again
    findings = [finding(title="Shadowed value", line=4), finding(title="Another thing", line=1)]
    _, count = resolved_count(fake_gitlab, mr, tmp_path, {FINGERPRINTS[2]}, findings)
    assert count == 2
    assert threads.resolutions == [(fixed_one, BOT, True), (answered, BOT, True)]
    puts = [r for r in fake_gitlab.api_requests() if r.method == "PUT"]
    assert [(r.query, r.status) for r in puts] == [("resolved=true", 200)] * 2
    assert puts[0].path.endswith(f"/merge_requests/{IID}/discussions/{fixed_one}")


def test_a_discussion_gitlab_does_not_let_us_resolve_is_left_as_it_is(
    fake_gitlab: FakeGitLab,
    fake_gitlab_threads: FakeThreads,
    mr: MergeRequestFixture,
    tmp_path: Path,
) -> None:
    threads = fake_gitlab_threads
    threads.members.add(PROJECT, user_id=BOT_ID, username=BOT, level=20)  # a Reporter
    started(threads.notes, FINGERPRINTS[0], head=mr.head_sha, line=3)
    _, count = resolved_count(fake_gitlab, mr, tmp_path, set(), [])
    assert count == 0
    assert [r.status for r in fake_gitlab.api_requests() if r.method == "PUT"] == [403]
    assert threads.resolutions == []
    assert all(n.resolved_by is None for n in threads.notes.of(PROJECT, IID))


def test_a_head_the_cache_does_not_have_resolves_nothing(
    fake_gitlab: FakeGitLab,
    fake_gitlab_threads: FakeThreads,
    mr: MergeRequestFixture,
    tmp_path: Path,
) -> None:
    threads = fake_gitlab_threads
    threads.members.add(PROJECT, user_id=BOT_ID, username=BOT, level=40)
    started(threads.notes, FINGERPRINTS[0], head="e" * 40, line=3)  # never fetched
    _, count = resolved_count(fake_gitlab, mr, tmp_path, set(), [])
    assert count == 0
    assert [r for r in fake_gitlab.api_requests() if r.method == "PUT"] == []
