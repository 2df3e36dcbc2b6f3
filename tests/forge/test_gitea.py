"""forge/gitea.py: what a review reads back from Gitea around publishing (specification §§10, 15,
19, 21), through the fake Gitea and real git: our earlier reviews (this head posted, or the files
changed since our last head), the counts our review states, the `-1` reactions of writers,
fixed comments resolved, and linked issues. Whole reviews: tests/gitea/test_review.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection
from pathlib import Path
from typing import Any, TypeVar

from pr_review_api.forge.base import DismissalQuery, IssueText
from pr_review_api.forge.gitea import GiteaForge
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.publish import publish
from pr_review_api.gitea.urls import parse_pull_request_url
from pr_review_api.model import Finding, Publication, PullRequestInfo, ReviewResult
from pr_review_api.permissions import PermissionCache
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.forge.test_gitlab_threads import DictDismissals
from tests.gitea.support import PATH, REVIEWER, finding, push_head, result_of

T = TypeVar("T")
TEN = "".join(f"line {n}\n" for n in range(1, 11))
HEAD_A = TEN.replace("line 5\n", "line 5\ninserted\n")
ADDED = finding("a.py", 6, "high", "Added line")
CONTEXT = finding("a.py", 8, "low", "Context line")


def pull_request(fake: FakeGitea, access: str = "write") -> PullFixture:
    fake.add_token(GITEA_TOKEN, REVIEWER)
    fake.grant(PATH, REVIEWER, access)  # type: ignore[arg-type]
    return fake.pull_request(PATH, 3, base={"a.py": TEN}, head={"a.py": HEAD_A})


def with_forge(fake: FakeGitea, use: Callable[[GiteaForge], Awaitable[T]]) -> T:
    settings = fake.settings(Path("unused"), token=GITEA_TOKEN)

    async def go() -> T:
        async with GiteaClient(settings) as gitea:
            return await use(GiteaForge(settings, gitea))

    return asyncio.run(go())


def result(fake: FakeGitea, pull: PullFixture, findings: list[Finding]) -> ReviewResult:
    ref = parse_pull_request_url(pull.url, fake.settings(Path("unused")))
    return result_of(pull, ref, findings)


def published(fake: FakeGitea, pull: PullFixture, findings: list[Finding]) -> Publication:
    review = result(fake, pull, findings)

    async def go(forge: GiteaForge) -> Publication:
        ref = parse_pull_request_url(pull.url, forge.settings)
        deadline = asyncio.get_running_loop().time() + 60
        return await publish(
            review, ref, forge.client, pull.repo.bare, deadline=deadline, max_inline=30
        )

    return with_forge(fake, go)


def info_of(fake: FakeGitea, pull: PullFixture) -> PullRequestInfo:
    return parse_pull_request_url(pull.url, fake.settings(Path("unused"))).info


def comment_ids(writes: GiteaWrites) -> list[int]:
    return [c["id"] for comments in writes.review_comments.values() for c in comments]


def react(fake: FakeGitea, login: str, comment_id: int, content: str = "-1") -> None:
    token = f"token-of-{login}"
    fake.add_token(token, login)
    settings = fake.settings(Path("unused"), token=token)

    async def go() -> None:
        async with GiteaClient(settings) as gitea:
            url = gitea.api_url(f"/repos/{PATH}/issues/comments/{comment_id}/reactions")
            response = await gitea.request("POST", url, json={"content": content})
            assert response.status == 201

    asyncio.run(go())


def test_prior_review_says_this_head_is_posted_or_what_changed_since_ours(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea)
    first = published(fake_gitea, pull, [ADDED])
    info = info_of(fake_gitea, pull)

    prior = with_forge(
        fake_gitea, lambda f: f.prior_review(info, pull.repo.bare, pull.head_sha, force=False)
    )
    assert prior.posted is not None
    assert (prior.posted.review_id, prior.posted.url) == (first.review_id, first.url)
    later = push_head(fake_gitea, pull, {"b.py": "b\n"})
    prior = with_forge(
        fake_gitea, lambda f: f.prior_review(info, pull.repo.bare, later.head_sha, force=False)
    )
    assert (prior.posted, prior.last_head, prior.changed) == (None, pull.head_sha, ("b.py",))


def test_posted_counts_are_read_back_from_our_own_review_only(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea)
    ours = published(fake_gitea, pull, [ADDED, CONTEXT])
    info = info_of(fake_gitea, pull)

    counts = with_forge(fake_gitea, lambda f: f.posted_counts(info, ours.review_id))
    assert counts == {"high": 1, "low": 1}
    fake_gitea.add_token("other", "mallory")
    fake_gitea.grant(PATH, "mallory", "write")
    fake_gitea_writes.reviews[(pull.repo.id, 3)].append(
        {"id": 5, "user": {"login": "mallory"}, "body": "**Findings:** 9 critical"}
    )
    assert with_forge(fake_gitea, lambda f: f.posted_body(info, 5)) is None


def test_our_first_review_does_not_stand_for_the_counts_of_a_later_head(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea)
    first = published(fake_gitea, pull, [CONTEXT])
    later = push_head(fake_gitea, pull, {"b.py": "b\n"})
    critical = finding("b.py", 1, "critical", "New")
    published(fake_gitea, later, [CONTEXT, critical])
    last = push_head(fake_gitea, later, {"c.py": "c\n"})
    nothing_new = published(fake_gitea, last, [CONTEXT, critical])
    assert nothing_new.review_id == first.review_id  # nothing posted for the last head
    info = info_of(fake_gitea, pull)

    async def counts_at(head: str, forge: GiteaForge) -> Any:
        await forge.prior_review(info, pull.repo.bare, head, force=False)
        return await forge.posted_counts(info, first.review_id)

    assert with_forge(fake_gitea, lambda f: counts_at(pull.head_sha, f)) == {"low": 1}
    # The first review says 1 low; the last head has a critical: unknown, never "1 low".
    assert with_forge(fake_gitea, lambda f: counts_at(last.head_sha, f)) is None


def test_a_writers_minus_one_dismisses_only_when_gitea_tells_who_writes(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea)
    published(fake_gitea, pull, [ADDED, CONTEXT])
    added, context = comment_ids(fake_gitea_writes)
    fake_gitea.grant(PATH, "carol", "write")
    fake_gitea.grant(PATH, "dave", "read")
    react(fake_gitea, "carol", added)
    react(fake_gitea, "dave", context)
    info = info_of(fake_gitea, pull)

    def dismissed() -> set[str]:
        return set(
            with_forge(
                fake_gitea,
                lambda f: f.dismissed(
                    DismissalQuery(
                        info, None, PermissionCache(), reviewed_before=True, has_findings=True
                    )
                ),
            )
        )

    # A token of a writer only: Gitea answers the permission lookup 403, nobody is a writer.
    assert dismissed() == set()
    fake_gitea.grant(PATH, REVIEWER, "admin")
    [comment] = [
        c for cs in fake_gitea_writes.review_comments.values() for c in cs if c["id"] == added
    ]
    assert dismissed() == {comment["body"].split("finding=")[1].split(" ")[0]}


def minus_one_by_an_admin(fake: FakeGitea, writes: GiteaWrites) -> PullRequestInfo:
    """A pull request with our review of one finding, its comment given a `-1` by an admin."""
    pull = pull_request(fake, "admin")
    published(fake, pull, [ADDED])
    [added] = comment_ids(writes)
    fake.grant(PATH, "carol", "admin")
    react(fake, "carol", added)
    return info_of(fake, pull)


def test_outside_the_service_a_first_review_or_one_without_findings_reads_no_reaction(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    info = minus_one_by_an_admin(fake_gitea, fake_gitea_writes)
    asked_before = len(fake_gitea.api_requests())

    def dismissed(reviewed_before: bool, has_findings: bool) -> Collection[str]:
        asked = DismissalQuery(info, None, None, reviewed_before, has_findings)
        return with_forge(fake_gitea, lambda f: f.dismissed(asked))

    assert dismissed(reviewed_before=False, has_findings=True) == set()
    assert dismissed(reviewed_before=True, has_findings=False) == set()

    # Nothing to dismiss or nothing to suppress: Gitea is not asked at all.
    assert len(fake_gitea.api_requests()) == asked_before
    assert len(dismissed(reviewed_before=True, has_findings=True)) == 1
    assert len(fake_gitea.api_requests()) > asked_before


def test_the_service_stores_a_writers_minus_one_for_the_repository(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    info = minus_one_by_an_admin(fake_gitea, fake_gitea_writes)
    dismissals = DictDismissals()

    found = with_forge(
        fake_gitea,
        lambda f: f.dismissed(
            DismissalQuery(info, dismissals, None, reviewed_before=False, has_findings=False)
        ),
    )

    [(key, fingerprint)] = dismissals.stored
    assert key == "gitea:acme/widget"
    assert set(found) == {fingerprint}
    assert dismissals.stored[(key, fingerprint)] == ("Added line", "a.py", "carol")


def test_a_fixed_comment_is_resolved_where_the_server_can(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea)
    published(fake_gitea, pull, [ADDED, CONTEXT])
    fixed = HEAD_A.replace("inserted\n", "fixed\n")
    later = push_head(fake_gitea, pull, {"a.py": fixed})
    review = result(fake_gitea, later, [CONTEXT])  # the context line's finding stands
    info = info_of(fake_gitea, pull)

    resolved = with_forge(fake_gitea, lambda f: f.resolve_fixed(review, info, pull.repo.bare))

    assert resolved == 1
    comments = [c for cs in fake_gitea_writes.review_comments.values() for c in cs]
    assert [c["resolver"] is not None for c in comments] == [True, False]
    again = with_forge(fake_gitea, lambda f: f.resolve_fixed(review, info, pull.repo.bare))
    assert again == 0  # resolved already


def test_a_server_without_the_resolve_endpoint_resolves_none(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea)
    published(fake_gitea, pull, [ADDED])
    later = push_head(fake_gitea, pull, {"a.py": HEAD_A.replace("inserted\n", "fixed\n")})
    fake_gitea_writes.resolvable = False
    review = result(fake_gitea, later, [])
    info = info_of(fake_gitea, pull)

    assert with_forge(fake_gitea, lambda f: f.resolve_fixed(review, info, pull.repo.bare)) is None


def test_linked_issues_are_read_and_a_pull_request_told_apart(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea)
    fake_gitea_writes.issues[(pull.repo.id, 12)] = {"number": 12, "title": "Bug", "body": None}

    async def read(forge: GiteaForge) -> list[Any]:
        return [
            await forge.read_issue(PATH, 12),
            await forge.read_issue(PATH, 3),
            await forge.read_issue(PATH, 99),
            await forge.read_issue("acme/../x", 12),
        ]

    answers = with_forge(fake_gitea, read)
    assert answers == [IssueText("Bug", ""), "pull_request", "unreadable", "unreadable"]
    paths = [r.path for r in fake_gitea.api_requests()]
    assert not any("/../" in path for path in paths)
