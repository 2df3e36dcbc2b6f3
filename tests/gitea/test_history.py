"""gitea/history.py: what our earlier reviews on a pull request say (specification §§10, 19), read
from the fake Gitea: only our identity's reviews and inline comments count, and a listing
that outruns its budget says so unless it found this head's review."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.gitea import history
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.history import History, read_history
from pr_review_api.publishing.markers import finding_marker, head_marker
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.gitea.support import PATH, REVIEWER, pull_ref

FINGERPRINT = "ab" * 16


def pull_request(fake: FakeGitea) -> PullFixture:
    for token, login in ((GITEA_TOKEN, REVIEWER), ("other", "mallory")):
        fake.add_token(token, login)
        fake.grant(PATH, login, "write")
    return fake.pull_request(PATH, 3, head={"a.py": "one\ntwo\n"})


def post_review(fake: FakeGitea, token: str, payload: dict[str, Any]) -> None:
    settings = fake.settings(Path("unused"), token=token)

    async def go() -> None:
        async with GiteaClient(settings) as gitea:
            response = await gitea.request("POST", pull_ref(fake).api_url("/reviews"), json=payload)
            assert response.status == 200

    asyncio.run(go())


def read(fake: FakeGitea, head_sha: str | None = None) -> History:
    async def go() -> History:
        async with GiteaClient(fake.settings(Path("unused"), token=GITEA_TOKEN)) as gitea:
            return await read_history(gitea, pull_ref(fake), head_sha=head_sha)

    return asyncio.run(go())


def marked(pull: PullFixture) -> dict[str, Any]:
    return {
        "event": "COMMENT",
        "commit_id": pull.head_sha,
        "body": "### pr-review\n\n" + head_marker(pull.head_sha),
        "comments": [
            {
                "path": "a.py",
                "body": "**high** · T\n\n" + finding_marker(FINGERPRINT),
                "new_position": 2,
                "old_position": 0,
            }
        ],
    }


def test_only_our_reviews_and_comments_count(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites
) -> None:
    pull = pull_request(fake_gitea)
    post_review(fake_gitea, "other", marked(pull))
    assert read(fake_gitea).state.review_of(pull.head_sha) is None
    assert read(fake_gitea).state.fingerprints == set()
    post_review(fake_gitea, GITEA_TOKEN, marked(pull))

    found = read(fake_gitea)

    ours = fake_gitea_writes.reviews[(pull.repo.id, 3)][1]
    assert found.state.review_of(pull.head_sha) == (ours["id"], ours["html_url"])
    assert found.state.summary is not None
    assert found.state.summary.review_id == ours["id"]
    assert found.state.fingerprints == {FINGERPRINT}
    [comment] = found.comments
    assert (comment.fingerprint, comment.path, comment.line) == (FINGERPRINT, "a.py", 2)
    assert (comment.posted_on, comment.resolved) == (pull.head_sha, False)
    # The other reviewer's comments were never asked for.
    other = fake_gitea_writes.reviews[(pull.repo.id, 3)][0]["id"]
    assert not any(f"/reviews/{other}/" in r.path for r in fake_gitea.api_requests())


def test_a_listing_over_its_budget_is_incomplete_unless_it_found_this_head(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites, monkeypatch: pytest.MonkeyPatch
) -> None:
    pull = pull_request(fake_gitea)
    post_review(fake_gitea, GITEA_TOKEN, marked(pull))
    post_review(fake_gitea, "other", {"event": "COMMENT", "body": "later"})
    fake_gitea.max_items = 1
    monkeypatch.setattr(history, "MAX_LIST_PAGES", 1)
    monkeypatch.setattr("pr_review_api.gitea.client.PAGE_LIMIT", 1)

    assert read(fake_gitea, "c" * 40).state.complete is False
    assert read(fake_gitea, pull.head_sha).state.complete is True
