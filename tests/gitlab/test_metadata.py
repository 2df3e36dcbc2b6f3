"""Merge-request metadata (gitlab/metadata.py): `diff_refs`, commit ids, the target branch, the
iid, the bounded title and description, and a diff GitLab is still preparing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import GitLabUnavailable, PullRequestNotFound
from pr_review_api.fetch.metadata import MAX_BODY_BYTES, MAX_LABELS, MAX_TITLE_CHARS
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.metadata import (
    DIFF_NOT_READY,
    INVALID_METADATA,
    fetch_merge_request,
    parse_merge_request,
)
from pr_review_api.gitlab.urls import MergeRequestRef, parse_merge_request_url
from pr_review_api.settings import Settings
from tests.conftest import GITLAB_TOKEN
from tests.fakes.gitlab_server import FakeGitLab, merge_request_json

START = "a" * 40
HEAD = "b" * 40
MERGE_BASE = "c" * 40
PATH = "grp/sub/project"
SETTINGS = Settings(gitlab_server_url="https://gitlab.example.com")
REF = parse_merge_request_url(f"https://gitlab.example.com/{PATH}/-/merge_requests/3", SETTINGS)


def parse(**fields: Any) -> Any:
    fields.setdefault("start_sha", START)
    fields.setdefault("head_sha", HEAD)
    fields.setdefault("base_sha", MERGE_BASE)
    return parse_merge_request(json.dumps(merge_request_json(3, **fields)).encode(), REF)


def refused(data: bytes | dict[str, Any], ref: MergeRequestRef = REF) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    with pytest.raises(GitLabUnavailable) as caught:
        parse_merge_request(raw, ref)
    return caught.value.message


def test_diff_refs_give_the_base_the_head_and_gitlabs_merge_base() -> None:
    metadata = parse(target_branch="release/1.x", title="T", description="D")
    assert (metadata.base_sha, metadata.head_sha) == (START, HEAD)
    assert metadata.diff_base_sha == MERGE_BASE
    assert (metadata.base_ref, metadata.title, metadata.body) == ("release/1.x", "T", "D")


def test_author_labels_and_draft_are_kept() -> None:
    metadata = parse(author="alice", labels=("bug", "backend"), draft=True)
    assert (metadata.author, metadata.labels, metadata.draft) == ("alice", ("bug", "backend"), True)
    assert parse().draft is False


def test_work_in_progress_alone_is_a_draft() -> None:
    """GitLab before 13.2 said `work_in_progress` only."""
    document = merge_request_json(3, start_sha=START, head_sha=HEAD)
    del document["draft"]
    document["work_in_progress"] = True
    assert parse_merge_request(json.dumps(document).encode(), REF).draft is True


def test_a_null_description_is_empty() -> None:
    assert parse(description=None).body == ""


def test_title_description_and_labels_are_cut() -> None:
    metadata = parse(
        title="t" * (MAX_TITLE_CHARS + 50),
        description="é" * MAX_BODY_BYTES,
        labels=tuple(f"l{i}" for i in range(MAX_LABELS + 5)),
    )
    assert len(metadata.title) == MAX_TITLE_CHARS
    assert len(metadata.body.encode()) <= MAX_BODY_BYTES
    assert metadata.body == "é" * (MAX_BODY_BYTES // 2)
    assert len(metadata.labels) == MAX_LABELS


@pytest.mark.parametrize(
    "sha",
    ["a" * 39, "a" * 41, "A" * 40, "g" * 40, "a" * 40 + "\n", "", "HEAD", "--upload-pack=x", 7],
)
@pytest.mark.parametrize("field", ["start_sha", "head_sha", "base_sha"])
def test_shas_must_be_full_lowercase_hex(field: str, sha: object) -> None:
    document = merge_request_json(3, start_sha=START, head_sha=HEAD, base_sha=MERGE_BASE)
    document["diff_refs"][field] = sha
    assert refused(document) == INVALID_METADATA


@pytest.mark.parametrize(
    "branch", ["", "-main", "--upload-pack=touch x", "a..b", "a b", "x.lock", "HEAD", "a~1", "@"]
)
def test_the_target_branch_must_be_a_safe_branch_name(branch: str) -> None:
    document = merge_request_json(3, start_sha=START, head_sha=HEAD, target_branch=branch)
    assert refused(document) == INVALID_METADATA


def test_the_iid_must_be_the_one_asked_for() -> None:
    assert refused(merge_request_json(4, start_sha=START, head_sha=HEAD)) == INVALID_METADATA


@pytest.mark.parametrize(
    "change",
    [
        {"iid": "3"},
        {"iid": True},
        {"title": None},
        {"target_branch": None},
        {"labels": [{"name": "bug"}]},
        {"draft": "yes"},
        {"author": "alice"},
        {"diff_refs": "refs"},
    ],
)
def test_fields_of_the_wrong_type_are_refused(change: dict[str, Any]) -> None:
    document = merge_request_json(3, start_sha=START, head_sha=HEAD)
    document.update(change)
    assert refused(document) == INVALID_METADATA


@pytest.mark.parametrize("body", [b"", b"[]", b"null", b"{", b'"x"', b'{"iid": 3}'])
def test_a_body_that_is_no_merge_request_is_refused(body: bytes) -> None:
    assert refused(body) == INVALID_METADATA


def test_null_diff_refs_mean_gitlab_is_still_preparing_the_diff() -> None:
    assert refused(merge_request_json(3, start_sha=None, head_sha=HEAD)) == DIFF_NOT_READY
    document = merge_request_json(3, start_sha=START, head_sha=HEAD)
    document["diff_refs"]["start_sha"] = None
    assert refused(document) == DIFF_NOT_READY


def test_a_refusal_quotes_nothing_of_the_body() -> None:
    document = merge_request_json(3, start_sha="secret-sha-quoted", head_sha=HEAD)
    message = refused(document)
    assert "secret" not in message


@pytest.mark.anyio
async def test_metadata_is_read_from_the_url_encoded_project(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    fake_gitlab.users[GITLAB_TOKEN] = "reviewer"
    fake_gitlab.set_document(PATH, 3, start_sha=START, head_sha=HEAD, base_sha=MERGE_BASE)
    settings = fake_gitlab.settings(tmp_path, token=GITLAB_TOKEN)
    ref = parse_merge_request_url(f"{fake_gitlab.server_url}/{PATH}/-/merge_requests/3", settings)
    async with GitLabClient(settings) as gitlab:
        metadata = await fetch_merge_request(ref, settings, gitlab)
    assert (metadata.base_sha, metadata.head_sha, metadata.diff_base_sha) == (
        START,
        HEAD,
        MERGE_BASE,
    )
    (request,) = fake_gitlab.requests
    assert request.path == "/gitlab/api/v4/projects/grp%2Fsub%2Fproject/merge_requests/3"


@pytest.mark.anyio
async def test_a_missing_merge_request_is_not_found(
    fake_gitlab: FakeGitLab, tmp_path: Path
) -> None:
    fake_gitlab.project(PATH)
    settings = fake_gitlab.settings(tmp_path)
    ref = parse_merge_request_url(f"{fake_gitlab.server_url}/{PATH}/-/merge_requests/9", settings)
    with pytest.raises(PullRequestNotFound):
        await fetch_merge_request(ref, settings)  # a client of its own, closed after
    assert fake_gitlab.requests[0].status == 404


@pytest.mark.anyio
async def test_an_oversized_answer_is_refused(fake_gitlab: FakeGitLab, tmp_path: Path) -> None:
    document = merge_request_json(3, start_sha=START, head_sha=HEAD, title="t" * (2 * 1024**2))
    fake_gitlab.respond(PATH, 3, 200, json.dumps(document))
    settings = fake_gitlab.settings(tmp_path)
    ref = parse_merge_request_url(f"{fake_gitlab.server_url}/{PATH}/-/merge_requests/3", settings)
    with pytest.raises(GitLabUnavailable) as caught:
        await fetch_merge_request(ref, settings)
    assert caught.value.message == "GitLab's answer was larger than allowed."
