"""The pull request's metadata (gitea/metadata.py, specification §19): base, head and Gitea's merge
base from `GET /repos/{owner}/{repo}/pulls/{index}`, every field checked before git runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import GiteaUnavailable, PullRequestNotFound
from pr_review_api.fetch.metadata import (
    MAX_BODY_BYTES,
    MAX_LABELS,
    MAX_METADATA_RESPONSE_BYTES,
    MAX_TITLE_CHARS,
    PullRequestMetadata,
)
from pr_review_api.gitea.metadata import (
    INVALID_METADATA,
    NO_MERGE_BASE,
    fetch_pull_request,
    parse_pull_request,
)
from pr_review_api.gitea.urls import parse_pull_request_url
from pr_review_api.settings import Settings
from tests.conftest import GITEA_TOKEN
from tests.fakes.gitea_server import FakeGitea, pull_json
from tests.gitea.support import PATH, client_for, pull_ref

BASE, HEAD, MERGE_BASE = "a" * 40, "b" * 40, "c" * 40


def document(**changes: Any) -> dict[str, Any]:
    base = pull_json(3, base_sha=BASE, head_sha=HEAD, merge_base=MERGE_BASE)
    base.update(changes)
    return base


SETTINGS = Settings(gitea_server_url="https://gitea.example.test")
REF = parse_pull_request_url("https://gitea.example.test/acme/widget/pulls/3", SETTINGS)


def parse(doc: dict[str, Any]) -> PullRequestMetadata:
    return parse_pull_request(json.dumps(doc).encode(), REF)


def refused(doc: dict[str, Any] | bytes) -> str:
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    with pytest.raises(GiteaUnavailable) as caught:
        parse_pull_request(data, REF)
    return caught.value.message


def test_the_base_the_head_and_giteas_merge_base() -> None:
    metadata = parse(document())
    assert (metadata.base_sha, metadata.head_sha, metadata.diff_base_sha) == (
        BASE,
        HEAD,
        MERGE_BASE,
    )
    assert metadata.base_ref == "main"


def test_author_labels_and_draft_are_kept() -> None:
    metadata = parse(document(user={"login": "carol"}, labels=[{"name": "wip"}], draft=True))
    assert (metadata.author, metadata.labels, metadata.draft) == ("carol", ("wip",), True)
    older = document()
    del older["draft"], older["labels"], older["user"]  # an older Gitea, a deleted user
    metadata = parse(older)
    assert (metadata.author, metadata.labels, metadata.draft) == ("", (), False)


def test_title_body_and_labels_are_cut() -> None:
    metadata = parse(
        document(
            title="t" * (MAX_TITLE_CHARS + 5),
            body="é" * MAX_BODY_BYTES,
            labels=[{"name": f"l{i}"} for i in range(MAX_LABELS + 3)],
        )
    )
    assert len(metadata.title) == MAX_TITLE_CHARS
    assert len(metadata.body.encode()) <= MAX_BODY_BYTES
    assert len(metadata.labels) == MAX_LABELS
    assert parse(document(body=None)).body == ""


@pytest.mark.parametrize(
    "change",
    [
        {"head": {"ref": "x", "sha": "B" * 40}},
        {"head": {"ref": "x", "sha": "b" * 64}},  # a SHA-256 repository
        {"base": {"ref": "main", "sha": "a" * 39}},
        {"base": {"ref": "-main", "sha": BASE}},
        {"base": {"ref": "a..b", "sha": BASE}},
        {"merge_base": "c" * 39},
        {"merge_base": "not-a-sha" * 5},
        {"number": 4},
        {"number": "3"},
        {"title": None},
        {"labels": [{"name": 5}]},
        {"draft": "yes"},
        {"head": None},
    ],
)
def test_hostile_fields_are_refused(change: dict[str, Any]) -> None:
    assert refused(document(**change)) == INVALID_METADATA


@pytest.mark.parametrize("merge_base", [None, ""])
def test_a_merge_base_not_computed_yet_is_said_so(merge_base: str | None) -> None:
    doc = document(merge_base=merge_base)
    assert refused(doc) == NO_MERGE_BASE


@pytest.mark.parametrize("body", [b"", b"[]", b"null", b"{", b'{"number": 3}', b"\xff"])
def test_a_body_that_is_no_pull_request_is_refused(body: bytes) -> None:
    assert refused(body) == INVALID_METADATA


def test_a_refusal_quotes_nothing_of_the_body() -> None:
    message = refused(document(title=["secret-title-7d"], head={"sha": "secret-sha"}))
    assert "secret" not in message


@pytest.mark.anyio
async def test_metadata_is_read_from_the_pull_request(fake_gitea: FakeGitea) -> None:
    pull = fake_gitea.pull_request(PATH, 3, base={"a.py": "1\n"}, head={"a.py": "2\n"})
    async with client_for(fake_gitea) as gitea:
        metadata = await fetch_pull_request(pull_ref(fake_gitea), gitea.settings, gitea)
    assert (metadata.base_sha, metadata.head_sha) == (pull.base_sha, pull.head_sha)
    assert metadata.diff_base_sha == pull.merge_base
    (request,) = fake_gitea.requests
    assert (request.method, request.path) == ("GET", "/git/api/v1/repos/acme/widget/pulls/3")


@pytest.mark.anyio
async def test_a_short_lived_client_uses_the_settings(
    fake_gitea: FakeGitea, tmp_path: Path
) -> None:
    fake_gitea.add_token(GITEA_TOKEN, "reviewer")
    fake_gitea.set_document(PATH, 3)
    settings = fake_gitea.settings(tmp_path, token=GITEA_TOKEN)
    await fetch_pull_request(pull_ref(fake_gitea), settings)
    assert [r.authorization for r in fake_gitea.requests] == [f"token {GITEA_TOKEN}"]


@pytest.mark.anyio
async def test_a_missing_pull_request_is_not_found(fake_gitea: FakeGitea) -> None:
    fake_gitea.repository(PATH)
    async with client_for(fake_gitea) as gitea:
        with pytest.raises(PullRequestNotFound):
            await fetch_pull_request(pull_ref(fake_gitea, 9), gitea.settings, gitea)


@pytest.mark.anyio
async def test_an_oversized_answer_is_refused(fake_gitea: FakeGitea) -> None:
    fake_gitea.respond(PATH, 3, 200, b" " * (MAX_METADATA_RESPONSE_BYTES + 1))
    async with client_for(fake_gitea) as gitea:
        with pytest.raises(GiteaUnavailable, match="larger than allowed"):
            await fetch_pull_request(pull_ref(fake_gitea), gitea.settings, gitea)
