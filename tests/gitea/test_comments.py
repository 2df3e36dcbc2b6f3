"""The conversation's Gitea requests (gitea/comments.py) against the fake Gitea: the thread
of a reply is found among our reviews' comments on its path and line (our answers, posted as
reviews of their own, included; other people's reviews never read as ours), an answer on a
line is a one-comment review at the head, and a reaction given twice is one."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.comments import (
    LineThread,
    find_thread,
    post_line_reply,
    react,
)
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.gitea.support import PATH, REVIEWER, client_for, pull_ref

MARKER = "<!-- pr-review:finding=" + "ab" * 16 + " -->"
HEAD = {"a.py": "one\ntwo\nthree\n"}


def review(fake: FakeGitea, pull: PullFixture, token: str, line: int, body: str) -> dict[str, Any]:
    """A review with one comment on `a.py` at `line`, posted through the API."""

    options = {
        "event": "COMMENT",
        "commit_id": pull.head_sha,
        "body": "",
        "comments": [{"path": "a.py", "body": body, "new_position": line, "old_position": 0}],
    }
    answer = httpx.post(
        f"{fake.api_url}/repos/{PATH}/pulls/{pull.index}/reviews",
        json=options,
        headers={"Authorization": f"token {token}"},
    )
    assert answer.status_code == 200, answer.text
    document: dict[str, Any] = answer.json()
    return document


def run(client: GiteaClient, step: Any) -> Any:
    async def go() -> Any:
        async with client:
            return await step(client)

    return asyncio.run(go())


def test_a_replys_thread_is_our_reviews_comments_on_its_line(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    client = client_for(fake_gitea)
    fake_gitea.add_token("m-token", "mallory")
    fake_gitea.grant(PATH, "mallory", "write")
    pull = fake_gitea.pull_request(PATH, 3, base={"a.py": "one\n"}, head=HEAD)
    ours = review(fake_gitea, pull, GITEA_TOKEN, 2, f"**high** · Two\n\n{MARKER}")
    elsewhere = review(fake_gitea, pull, GITEA_TOKEN, 3, f"**low** · Three\n\n{MARKER}")
    theirs = review(fake_gitea, pull, "m-token", 2, MARKER)
    first = fake_gitea_writes.review_comments[ours["id"]][0]
    question = fake_gitea_writes.reply(ours["id"], first["id"], fake_gitea.user("wendy"), "why?")
    answer = review(fake_gitea, pull, GITEA_TOKEN, 2, "Because.<!-- pr-review:answer=1 -->")
    in_theirs = fake_gitea_writes.reply(
        theirs["id"],
        fake_gitea_writes.review_comments[theirs["id"]][0]["id"],
        fake_gitea.user("wendy"),
        "and this?",
    )
    ref = pull_ref(fake_gitea)

    async def threads(gitea: GiteaClient) -> list[LineThread | None]:
        return [
            await find_thread(gitea, ref, comment_id, REVIEWER)
            for comment_id in (question["id"], in_theirs["id"], 999_999)
        ]

    found, not_ours, unknown = run(client, threads)
    assert found is not None
    assert (found.path, found.line, found.head) == ("a.py", 2, pull.head_sha)
    answer_comment = fake_gitea_writes.review_comments[answer["id"]][0]
    assert [c.id for c in found.comments] == [first["id"], question["id"], answer_comment["id"]]
    assert found.finding(REVIEWER) == "ab" * 16
    assert found.answers(REVIEWER) == {1}
    assert elsewhere["id"] not in {c.id for c in found.comments}
    assert not_ours is None  # a reply in someone else's review is in no thread of ours
    assert unknown is None


def test_a_line_reply_is_one_comment_review_at_the_head_and_reactions_are_idempotent(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    client = client_for(fake_gitea)
    pull = fake_gitea.pull_request(PATH, 3, base={"a.py": "one\n"}, head=HEAD)
    ours = review(fake_gitea, pull, GITEA_TOKEN, 2, MARKER)
    first = fake_gitea_writes.review_comments[ours["id"]][0]
    thread = LineThread("a.py", 2, [], pull.head_sha)
    ref = pull_ref(fake_gitea)

    async def steps(gitea: GiteaClient) -> int | None:
        reply_id = await post_line_reply(gitea, ref, pull.head_sha, thread, "Because.")
        await react(gitea, ref, first["id"], "+1")
        await react(gitea, ref, first["id"], "+1")  # a job run again
        return reply_id

    reply_id = run(client, steps)
    reviews = fake_gitea_writes.reviews[(pull.repo.id, 3)]
    assert reply_id == reviews[-1]["id"]
    assert reviews[-1]["commit_id"] == pull.head_sha
    (comment,) = fake_gitea_writes.review_comments[reply_id]
    assert (comment["path"], comment["position"], comment["body"]) == ("a.py", 2, "Because.")
    assert fake_gitea_writes.misplaced == []
    assert [r["content"] for r in fake_gitea_writes.reactions[first["id"]]] == ["+1"]
