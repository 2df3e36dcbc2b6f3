"""Dismissals outside service mode (specification §15, github/comments.py): `pr-review review
--post` through the CLI, with no database, reads the pull request itself: an `ignore` reply or a
`-1` reaction by a user with write permission on our finding's comment keeps that finding off
the next review (`publication.suppressed`); a reader's changes nothing. GitHub's answers of who
may write are kept, briefly, by whoever holds a `PermissionCache`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from pr_review_api.github.client import GitHubClient
from pr_review_api.github.comments import MAX_THREAD_PAGES, Repository, may_write, thread
from pr_review_api.permissions import PermissionCache
from pr_review_api.publishing.markers import answer_marker
from tests.builders import final_turn
from tests.conftest import BOT, GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider
from tests.github.test_preflight import finding, pull, review


@pytest.mark.parametrize("how", ["ignore", "minus_one"])
def test_a_writers_dismissal_on_the_pull_request_suppresses_the_finding_next_time(
    env: FakeGitHub, scripted_provider: ScriptedProvider, how: str
) -> None:
    pr = pull(env)
    env.permissions[("acme", "widget", "alice")] = "write"
    scripted_provider.script(final_turn(finding(title="Two is loud", line=2)))
    assert review(pr).exit_code == 0
    (ours,) = env.review_comments[("acme", "widget", 7)]
    if how == "ignore":
        env.add_review_comment("acme", "widget", 7, "mallory", "/pr-review ignore", ours["id"])
        env.add_review_comment("acme", "widget", 7, "alice", "/pr-review ignore", ours["id"])
    else:
        for user in ("mallory", "alice"):
            env.reactions.append(
                {"on": "pulls", "comment_id": ours["id"], "content": "-1", "user": user}
            )
    pushed = env.push_head(pr, {"b.py": "x = 1\n"})
    scripted_provider.script(final_turn(finding(title="Two is loud", line=2)))
    again = review(pushed)
    assert again.exit_code == 0, again.output
    publication = json.loads(again.stdout)["publication"]
    assert (publication["suppressed"], publication["duplicates_skipped"]) == (1, 0)


def test_a_readers_ignore_changes_nothing(
    env: FakeGitHub, scripted_provider: ScriptedProvider
) -> None:
    pr = pull(env)
    scripted_provider.script(final_turn(finding(title="Two is loud", line=2)))
    assert review(pr).exit_code == 0
    (ours,) = env.review_comments[("acme", "widget", 7)]
    env.add_review_comment("acme", "widget", 7, "mallory", "/pr-review ignore", ours["id"])
    pushed = env.push_head(pr, {"b.py": "x = 1\n"})
    scripted_provider.script(final_turn(finding(title="Two is loud", line=2)))
    publication = json.loads(review(pushed).stdout)["publication"]
    assert (publication["suppressed"], publication["duplicates_skipped"]) == (0, 1)


def test_who_may_write_is_kept_by_its_holder_for_its_ttl_only(
    env: FakeGitHub, tmp_path: Path
) -> None:
    env.permissions[("acme", "widget", "alice")] = "maintain"
    settings = env.settings(tmp_path / "cache", token=GITHUB_TOKEN)
    repository = Repository("acme", "widget")

    async def ask(cache: PermissionCache, *users: str) -> list[bool]:
        async with GitHubClient(settings) as github:
            return [await may_write(github, repository, user, cache) for user in users]

    held = PermissionCache()
    answers = asyncio.run(ask(held, "alice", "Alice", "mallory", "alice"))
    assert answers == [True, True, False, True]
    assert env.permission_requests == 2  # once per user, whatever the case of the login
    assert asyncio.run(ask(PermissionCache(), "alice")) == [True]
    assert env.permission_requests == 3  # another holder asks for itself
    expired = PermissionCache(ttl=0)
    asyncio.run(ask(expired, "alice", "alice"))
    assert env.permission_requests == 5


def test_a_thread_past_a_flood_of_review_comments_is_read_newest_first(
    env: FakeGitHub, tmp_path: Path
) -> None:
    # GitHub lists 100 review comments a page; 600 others' after our finding are more than the
    # pages read, and our answer to the question comes after them all.
    pull(env)
    key = ("acme", "widget", 7)
    ours = env.add_review_comment(*key, BOT, "a finding")
    for n in range(600):
        env.add_review_comment(*key, "someone", f"comment {n}")
    question = env.add_review_comment(*key, "alice", f"@{BOT} why?", ours["id"])
    answer = answer_marker(question["id"])
    ours_answer = env.add_review_comment(*key, BOT, f"Because.\n\n{answer}", ours["id"])
    settings = env.settings(tmp_path / "cache", token=GITHUB_TOKEN)
    repository = Repository("acme", "widget")

    async def replies(top_id: int) -> list[int]:
        async with GitHubClient(settings) as github:
            return [c.id for c in await thread(github, repository, 7, top_id)]

    assert asyncio.run(replies(ours["id"])) == [question["id"], ours_answer["id"]]
    listings = [r for r in env.api_requests() if r.path.endswith("/pulls/7/comments")]
    assert len(listings) == MAX_THREAD_PAGES  # bounded: our finding itself is further back
    assert all("sort=created&direction=desc" in r.query for r in listings)
    # A thread that starts after the flood is read up to its first comment: one page.
    late = env.add_review_comment(*key, BOT, "a later finding")
    reply = env.add_review_comment(*key, "alice", "ok", late["id"])
    assert asyncio.run(replies(late["id"])) == [reply["id"]]
    assert len([r for r in env.api_requests() if r.path.endswith("/pulls/7/comments")]) == 6
