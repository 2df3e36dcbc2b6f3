"""Publishing a review on a Gitea pull request (specification §§10, 14, 19), through the fake Gitea.

The fake stores a comment whose `new_position` is off the diff, or a review whose `commit_id` is
not the head, as Gitea does (it shows them out of place), and records both: every test here
asserts we never send one. The git directory read for hunks and line texts is the fake
repository's own: the commits the pull request names, as the cache would hold them.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.publish import publish
from pr_review_api.gitea.urls import PullRequestRef, parse_pull_request_url
from pr_review_api.model import Finding, Publication, ReviewResult, Suggestion
from pr_review_api.publishing.markers import SUMMARY_HEADING, finding_marker, head_marker
from pr_review_api.publishing.placement import fingerprint_of, line_texts
from pr_review_api.settings import Settings
from tests.conftest import GITEA_TOKEN
from tests.fakes.forge_server import RecordedRequest
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea, Repository
from tests.gitea.support import PATH, REVIEWER, active_parts, finding, push_head, result_of

TEN = "".join(f"line {n}\n" for n in range(1, 11))
FIFTY = "".join(f"row {n}\n" for n in range(1, 51))
# a.py: a line inserted after line 5, so the head's line 6 is added; 3-5 and 7-9 are context.
HEAD_A = TEN.replace("line 5\n", "line 5\ninserted\n")


class Setup:
    def __init__(self, fake: FakeGitea, writes: GiteaWrites, tmp_path: Path) -> None:
        self.fake, self.writes = fake, writes
        fake.add_token(GITEA_TOKEN, REVIEWER)
        fake.grant(PATH, REVIEWER, "write")
        self.pull = fake.pull_request(
            PATH, 3, base={"a.py": TEN, "other.py": FIFTY}, head={"a.py": HEAD_A}
        )
        self.settings = fake.settings(tmp_path / "cache", token=GITEA_TOKEN)
        self.ref = parse_pull_request_url(self.pull.url, self.settings)

    def result(self, findings: list[Finding], **review: Any) -> ReviewResult:
        return result_of(self.pull, self.ref, findings, **review)

    def publish(self, result: ReviewResult, **options: Any) -> Publication:
        return run_publish(self.settings, self.ref, self.pull.repo, result, **options)

    def reviews(self) -> list[dict[str, Any]]:
        return self.writes.reviews.get((self.pull.repo.id, 3), [])

    def review_posts(self) -> list[RecordedRequest]:
        return [
            r
            for r in self.fake.api_requests()
            if r.method == "POST" and r.path.endswith("/pulls/3/reviews")
        ]

    def assert_never_misplaced(self) -> None:
        assert self.writes.misplaced == []
        assert self.writes.stale_commits == []


def run_publish(
    settings: Settings,
    ref: PullRequestRef,
    repo: Repository,
    result: ReviewResult,
    *,
    max_inline: int = 30,
) -> Publication:
    async def go() -> Publication:
        deadline = asyncio.get_running_loop().time() + 60
        async with GiteaClient(settings) as gitea:
            return await publish(
                result, ref, gitea, repo.bare, deadline=deadline, max_inline=max_inline
            )

    return asyncio.run(go())


@pytest.fixture
def setup(fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites, tmp_path: Path) -> Setup:
    return Setup(fake_gitea, fake_gitea_writes, tmp_path)


FINDINGS = [
    finding("a.py", 6, "high", "Added line"),
    finding("a.py", 8, "medium", "Context line"),
    finding("other.py", 20, "low", "Outside every hunk"),
    finding("a.py", None, "info", "No line"),
]


def test_one_review_with_inline_comments_on_new_positions(setup: Setup) -> None:
    publication = setup.publish(setup.result(FINDINGS))

    assert publication.status == "published"
    assert (publication.inline_comments, publication.body_findings) == (2, 2)
    [post] = setup.review_posts()
    sent = post.json()
    assert sent["event"] == "COMMENT"
    assert sent["commit_id"] == setup.pull.head_sha
    assert [(c["path"], c["new_position"], c["old_position"]) for c in sent["comments"]] == [
        ("a.py", 6, 0),
        ("a.py", 8, 0),
    ]
    [review] = setup.reviews()
    assert (publication.review_id, publication.url) == (review["id"], review["html_url"])
    body = sent["body"]
    assert body.startswith(SUMMARY_HEADING + "\n")
    assert head_marker(setup.pull.head_sha) in body
    assert "**Findings:** 1 high, 1 medium, 1 low, 1 info" in body
    texts = line_texts(setup.pull.repo.bare, setup.pull.head_sha, FINDINGS)
    every = body + "".join(c["body"] for c in sent["comments"])
    for f in FINDINGS:
        assert every.count(finding_marker(fingerprint_of(f, texts))) == 1
    setup.assert_never_misplaced()


def test_publishing_twice_posts_once(setup: Setup) -> None:
    first = setup.publish(setup.result(FINDINGS))
    again = setup.publish(setup.result(FINDINGS))

    assert again.status == "already_published"
    assert (again.review_id, again.url) == (first.review_id, first.url)
    assert len(setup.review_posts()) == 1
    setup.assert_never_misplaced()


def test_a_later_head_gets_a_short_review_of_its_new_findings_only(setup: Setup) -> None:
    setup.publish(setup.result(FINDINGS[:2]))
    setup.pull = push_head(setup.fake, setup.pull, {"b.py": "new\nfile\n"})
    new = finding("b.py", 2, "critical", "New file problem")

    publication = setup.publish(setup.result([*FINDINGS[:2], new]))

    assert publication.status == "published"
    assert (publication.inline_comments, publication.duplicates_skipped) == (1, 2)
    first, later = setup.reviews()
    assert publication.review_id == later["id"] != first["id"]
    sent = setup.review_posts()[-1].json()
    assert sent["commit_id"] == setup.pull.head_sha
    assert [(c["path"], c["new_position"]) for c in sent["comments"]] == [("b.py", 2)]
    body = sent["body"]
    assert not body.startswith(SUMMARY_HEADING)
    assert body.startswith(
        f"**Findings:** 1 critical, 1 high, 1 medium at `{setup.pull.head_sha[:7]}`"
    )
    assert head_marker(setup.pull.head_sha) in body
    assert "Added line" not in body + sent["comments"][0]["body"]
    setup.assert_never_misplaced()


def test_a_later_head_with_nothing_new_posts_nothing(setup: Setup) -> None:
    first = setup.publish(setup.result(FINDINGS[:1]))
    setup.pull = push_head(setup.fake, setup.pull, {"b.py": "new\n"})

    publication = setup.publish(setup.result(FINDINGS[:1]))

    assert publication.status == "published"
    assert (publication.review_id, publication.url) == (first.review_id, first.url)
    assert publication.duplicates_skipped == 1
    assert len(setup.review_posts()) == 1


def test_a_finding_an_open_comment_of_ours_stands_for_is_not_posted_again(setup: Setup) -> None:
    setup.publish(setup.result(FINDINGS[:1]))  # "Added line" on a.py line 6
    # The line's text changes, so its fingerprint does: the same title near it is the same.
    setup.pull = push_head(setup.fake, setup.pull, {"a.py": HEAD_A.replace("inserted", "edited")})

    publication = setup.publish(setup.result(FINDINGS[:1]))

    assert (publication.inline_comments, publication.duplicates_skipped) == (0, 1)
    assert len(setup.review_posts()) == 1  # nothing new: no review for this head
    setup.writes.review_comments[setup.reviews()[0]["id"]][0]["resolver"] = {"login": "x"}
    setup.pull = push_head(setup.fake, setup.pull, {"a.py": HEAD_A.replace("inserted", "again")})
    reported = setup.publish(setup.result(FINDINGS[:1]))
    assert reported.inline_comments == 1  # its comment was resolved: reported anew


def test_markers_of_anyone_else_count_for_nothing(setup: Setup) -> None:
    setup.fake.add_token("other-token", "mallory")
    setup.fake.grant(PATH, "mallory", "write")
    texts = line_texts(setup.pull.repo.bare, setup.pull.head_sha, FINDINGS)
    forged = head_marker(setup.pull.head_sha) + finding_marker(fingerprint_of(FINDINGS[0], texts))
    asyncio.run(_post_as(setup, "other-token", {"event": "COMMENT", "body": forged}))

    publication = setup.publish(setup.result(FINDINGS))

    assert publication.status == "published"
    assert publication.duplicates_skipped == 0
    assert len(setup.reviews()) == 2


async def _post_as(setup: Setup, token: str, payload: dict[str, Any]) -> None:
    settings = setup.fake.settings(Path("unused"), token=token)
    async with GiteaClient(settings) as gitea:
        response = await gitea.request("POST", setup.ref.api_url("/reviews"), json=payload)
    assert response.status == 200


def test_a_refused_review_is_posted_again_with_every_finding_in_the_body(setup: Setup) -> None:
    def refuse_comments(
        fake: FakeGitea, handler: Any, record: RecordedRequest, repo: Any, tail: Any, body: bytes
    ) -> bool:
        if record.method == "POST" and tail[-1:] == ["reviews"] and record.json()["comments"]:
            handler.send_json(record, 500, {"message": "CreateCodeComment failed"})
            return True
        return False

    setup.fake.routes.insert(0, refuse_comments)
    publication = setup.publish(setup.result(FINDINGS))

    assert publication.status == "published"
    assert (publication.inline_comments, publication.body_findings) == (0, 4)
    first, second = (r.json() for r in setup.review_posts())
    assert len(first["comments"]) == 2
    assert second["comments"] == []
    assert "Added line" in second["body"]


def test_a_token_that_may_only_read_fails_cleanly(setup: Setup) -> None:
    setup.fake.grant(PATH, REVIEWER, "read")

    publication = setup.publish(setup.result(FINDINGS))

    assert publication.status == "failed"
    assert publication.error is not None
    assert publication.error.code == "gitea_publish_failed"
    assert "(status 403)" in publication.error.message
    assert GITEA_TOKEN not in publication.model_dump_json()
    assert setup.reviews() == []


def test_a_suggestion_is_a_diff_block_never_a_committable_one(setup: Setup) -> None:
    suggested = finding(
        "a.py",
        6,
        "high",
        "Rename",
        suggestion=Suggestion(start_line=6, end_line=6, replacement="renamed"),
    )
    setup.publish(setup.result([suggested]))

    [comment] = setup.review_posts()[0].json()["comments"]
    assert "```diff\n" in comment["body"]
    assert "-inserted\n+renamed" in comment["body"]
    assert "```suggestion" not in comment["body"]


HOSTILE = (
    "@admin see #1, !2 and acme/widget#3, acme/widget@0123456789abcdef, deadbeefcafe :tada: "
    "[[Wiki]] JIRA-12 https://evil.example www.evil.example mail@evil.example "
    "<img src=x onerror=alert(1)> ![i](https://evil.example/i.png) [l](javascript:x) $x$ \\(y\\)"
)


def test_hostile_model_text_posts_nothing_active(setup: Setup) -> None:
    hostile = Finding.model_validate(
        {
            "severity": "high",
            "title": HOSTILE,
            "explanation": HOSTILE,
            "path": "a.py",
            "line": 6,
            "evidence": HOSTILE,
            "recommendation": HOSTILE,
        }
    )
    in_body = hostile.model_copy(update={"line": None, "title": "Body " + HOSTILE})
    result = setup.result([hostile, in_body], summary=HOSTILE, notes=[HOSTILE])
    setup.publish(result)

    [post] = setup.review_posts()
    sent = post.json()
    assert active_parts(sent["body"]) == []
    assert [active_parts(c["body"]) for c in sent["comments"]] == [[]]
    assert "@admin" not in sent["body"]
    assert active_parts(HOSTILE) != []  # the oracle sees what an unescaped text would do
