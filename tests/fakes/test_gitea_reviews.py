"""The fake Gitea answers as Gitea answers (tests/fakes/gitea_server.py, gitea_reviews.py): a
lenient fake would let a read-only token, a missing body or a misplaced comment pass the
publishing tests; a strict one that refused what Gitea accepts would hide that we send it."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_reviews import GiteaWrites, new_side_lines
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.gitrepo import git

PATH = "acme/widget"
READER_TOKEN = "gitea-reader-token-0b7e"
ADMIN_TOKEN = "gitea-admin-token-44c1"
OLD = "".join(f"line {n}\n" for n in range(1, 31))
NEW = OLD.replace("line 15\n", "line 15 changed\n")


@pytest.fixture
def pull(fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites) -> PullFixture:
    fake_gitea.add_token(GITEA_TOKEN, "review-bot")
    fake_gitea.add_token(READER_TOKEN, "reader")
    fake_gitea.add_token(ADMIN_TOKEN, "maintainer")
    fake_gitea.grant(PATH, "review-bot", "write")
    fake_gitea.grant(PATH, "reader", "read")
    fake_gitea.grant(PATH, "maintainer", "admin")
    return fake_gitea.pull_request(PATH, 3, base={"a.py": OLD}, head={"a.py": NEW})


def call(
    fake: FakeGitea, method: str, tail: str, token: str | None = GITEA_TOKEN, **kwargs: Any
) -> httpx.Response:
    headers = {} if token is None else {"Authorization": f"token {token}"}
    url = f"{fake.api_url}/repos/{PATH}{tail}"
    return httpx.request(method, url, headers=headers, **kwargs)


def review(pull: PullFixture, **fields: Any) -> dict[str, Any]:
    document = {"event": "COMMENT", "body": "Summary", "commit_id": pull.head_sha, "comments": []}
    document.update(fields)
    return document


def comment(line: int, path: str = "a.py") -> dict[str, Any]:
    return {"path": path, "body": "finding", "new_position": line, "old_position": 0}


def test_a_review_needs_a_writer(fake_gitea: FakeGitea, pull: PullFixture) -> None:
    assert call(fake_gitea, "POST", "/pulls/3/reviews", None, json=review(pull)).status_code == 401
    refused = call(fake_gitea, "POST", "/pulls/3/reviews", READER_TOKEN, json=review(pull))
    assert refused.status_code == 403
    unknown = call(fake_gitea, "POST", "/pulls/3/reviews", "no-such-token", json=review(pull))
    assert unknown.status_code == 401
    posted = call(fake_gitea, "POST", "/pulls/3/reviews", json=review(pull))
    assert posted.status_code == 200
    document = posted.json()
    assert (document["state"], document["body"], document["user"]["login"]) == (
        "COMMENT",
        "Summary",
        "review-bot",
    )
    assert document["commit_id"] == pull.head_sha
    assert not document["stale"]


def test_a_comment_review_needs_a_body_or_a_comment(
    fake_gitea: FakeGitea, pull: PullFixture
) -> None:
    empty = call(fake_gitea, "POST", "/pulls/3/reviews", json=review(pull, body=""))
    assert empty.status_code == 422
    inline_only = review(pull, body="", comments=[comment(15)])
    assert call(fake_gitea, "POST", "/pulls/3/reviews", json=inline_only).status_code == 200
    bad_event = call(fake_gitea, "POST", "/pulls/3/reviews", json=review(pull, event="NOPE"))
    assert bad_event.status_code == 422


def test_comments_on_the_diff_are_in_place_and_the_rest_is_recorded(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites, pull: PullFixture
) -> None:
    assert new_side_lines(pull.repo, pull.merge_base, pull.head_sha, "a.py") == set(range(12, 19))
    placed = [comment(15), comment(12), comment(18)]
    misplaced = [comment(11), comment(30), comment(5, "missing.py")]
    off_side = {"path": "a.py", "body": "old side", "new_position": 0, "old_position": 15}
    document = review(pull, comments=[*placed, *misplaced, off_side])
    posted = call(fake_gitea, "POST", "/pulls/3/reviews", json=document)
    assert posted.status_code == 200  # Gitea stores them all, shown out of place
    assert posted.json()["comments_count"] == 7
    assert [(m.path, m.new_position) for m in fake_gitea_writes.misplaced] == [
        ("a.py", 11),
        ("a.py", 30),
        ("missing.py", 5),
        ("a.py", 0),
    ]
    listed = call(fake_gitea, "GET", f"/pulls/3/reviews/{posted.json()['id']}/comments").json()
    assert [c["position"] for c in listed] == [15, 12, 18, 11, 30, 5, 0]


def test_a_commit_that_is_not_the_head_is_accepted_and_recorded(
    fake_gitea: FakeGitea, fake_gitea_writes: GiteaWrites, pull: PullFixture
) -> None:
    posted = call(
        fake_gitea, "POST", "/pulls/3/reviews", json=review(pull, commit_id=pull.base_sha)
    )
    assert posted.status_code == 200
    assert posted.json()["stale"]
    assert fake_gitea_writes.stale_commits == [pull.base_sha]
    head_by_default = call(fake_gitea, "POST", "/pulls/3/reviews", json=review(pull, commit_id=""))
    assert head_by_default.json()["commit_id"] == pull.head_sha


def test_reviews_are_listed_a_page_at_a_time(fake_gitea: FakeGitea, pull: PullFixture) -> None:
    for _ in range(3):
        call(fake_gitea, "POST", "/pulls/3/reviews", json=review(pull))
    fake_gitea.max_items = 2
    first = call(fake_gitea, "GET", "/pulls/3/reviews", params={"limit": 50, "page": 1})
    assert len(first.json()) == 2
    assert first.headers["x-total-count"] == "3"
    assert 'rel="next"' in first.headers["link"]
    last = call(fake_gitea, "GET", "/pulls/3/reviews", params={"limit": 50, "page": 2})
    assert len(last.json()) == 1
    assert "link" not in last.headers
    assert call(fake_gitea, "GET", "/pulls/9/reviews").status_code == 404


def test_a_commit_status_needs_a_writer_and_a_known_state(
    fake_gitea: FakeGitea, pull: PullFixture
) -> None:
    status = {"state": "pending", "context": "pr-review", "description": "Reviewing"}
    tail = f"/statuses/{pull.head_sha}"
    assert call(fake_gitea, "POST", tail, READER_TOKEN, json=status).status_code == 403
    assert call(fake_gitea, "POST", tail, json={**status, "state": "neutral"}).status_code == 422
    created = call(fake_gitea, "POST", tail, json=status)
    assert created.status_code == 201
    assert created.json()["status"] == "pending"
    call(fake_gitea, "POST", tail, json={**status, "state": "success"})
    listed = call(fake_gitea, "GET", f"/commits/{pull.head_sha}/statuses").json()
    assert [s["status"] for s in listed] == ["success", "pending"]  # newest first


def test_the_permission_lookup_answers_only_an_admin_or_the_user_itself(
    fake_gitea: FakeGitea, pull: PullFixture
) -> None:
    assert call(fake_gitea, "GET", "/collaborators/reader/permission").status_code == 403
    mine = call(fake_gitea, "GET", "/collaborators/review-bot/permission")
    assert mine.json()["permission"] == "write"
    by_admin = call(fake_gitea, "GET", "/collaborators/reader/permission", ADMIN_TOKEN)
    assert (by_admin.status_code, by_admin.json()["permission"]) == (200, "read")
    owner = call(fake_gitea, "GET", "/collaborators/acme/permission", ADMIN_TOKEN)
    assert owner.json()["permission"] == "admin"
    assert pull.index == 3


def test_comments_and_reactions(fake_gitea: FakeGitea, pull: PullFixture) -> None:
    assert (
        call(fake_gitea, "POST", "/issues/3/comments", READER_TOKEN, json={"body": "x"}).status_code
        == 403
    )
    assert call(fake_gitea, "POST", "/issues/3/comments", json={"body": ""}).status_code == 422
    created = call(fake_gitea, "POST", "/issues/3/comments", json={"body": "An answer"})
    assert created.status_code == 201
    comment_id = created.json()["id"]
    listed = call(fake_gitea, "GET", "/issues/3/comments").json()
    assert [c["body"] for c in listed] == ["An answer"]
    tail = f"/issues/comments/{comment_id}/reactions"
    assert call(fake_gitea, "POST", tail, json={"content": "+1"}).status_code == 201
    assert call(fake_gitea, "POST", tail, json={"content": "+1"}).status_code == 200
    assert call(fake_gitea, "POST", tail, json={"content": "thumbsup"}).status_code == 403
    assert len(call(fake_gitea, "GET", tail).json()) == 1
    assert (
        call(fake_gitea, "POST", "/issues/comments/1/reactions", json={"content": "+1"}).status_code
        == 404
    )
    assert pull.index == 3


def test_the_pull_request_and_a_private_repository(
    fake_gitea: FakeGitea, pull: PullFixture
) -> None:
    document = call(fake_gitea, "GET", "/pulls/3").json()
    assert (document["head"]["sha"], document["merge_base"]) == (pull.head_sha, pull.merge_base)
    fake_gitea.pull_request("acme/secret", 1, private=True)
    hidden = httpx.get(f"{fake_gitea.api_url}/repos/acme/secret/pulls/1")
    assert hidden.status_code == 404  # Gitea hides what a user may not read
    mine = httpx.get(
        f"{fake_gitea.api_url}/repos/acme/secret/pulls/1",
        headers={"Authorization": f"token {GITEA_TOKEN}"},
    )
    assert mine.status_code == 404  # review-bot has no grant there
    assert httpx.get(f"{fake_gitea.api_url}/user").status_code == 401


@pytest.mark.parametrize(
    "credentials",
    [f"{GITEA_TOKEN}:x-oauth-basic", f"{GITEA_TOKEN}:", f"anyone:{GITEA_TOKEN}"],
)
def test_git_takes_the_token_as_gitea_reads_basic_credentials(
    fake_gitea: FakeGitea, pull: PullFixture, credentials: str, tmp_path: Any
) -> None:
    fake_gitea.pull_request("acme/secret", 1, private=True)
    fake_gitea.grant("acme/secret", "review-bot", "read")
    url = f"{fake_gitea.server_url}/acme/secret.git/info/refs?service=git-upload-pack"
    assert httpx.get(url).status_code == 401
    basic = base64.b64encode(credentials.encode()).decode()
    answer = httpx.get(url, headers={"Authorization": f"Basic {basic}"})
    assert answer.status_code == 200
    refs = git(tmp_path, "ls-remote", f"{fake_gitea.server_url}/{PATH}.git")
    assert f"{pull.head_sha}\trefs/pull/3/head" in refs
