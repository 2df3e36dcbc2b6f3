"""Pull-request metadata (github/metadata.py): commit ids, branch names, and the bounded
title and body.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.fetch.metadata import MAX_BODY_BYTES, MAX_TITLE_CHARS, is_valid_branch_name
from pr_review_api.github.client import fetch_metadata
from tests.fakes.github_documents import pull_json
from tests.fakes.github_server import FakeGitHub
from tests.github.support import BASE, HEAD, has_object, metadata_error, pull_ref, review
from tests.gitrepo import git


@pytest.mark.anyio
@pytest.mark.parametrize(
    "sha",
    [
        "a" * 39,
        "a" * 41,
        "A" * 40,
        "g" * 40,
        "a" * 39 + "\n",
        "a" * 40 + "\n",
        " " + "a" * 40,
        "-" + "a" * 39,
        "a" * 64,
        "",
        "HEAD",
        "refs/heads/main",
        "--upload-pack=touch x",
    ],
)
async def test_shas_must_be_full_lowercase_hex(fake_github: FakeGitHub, sha: str) -> None:
    for base, head in ((sha, HEAD), (BASE, sha)):
        fake_github.set_pull("acme", "widget", 7, base_sha=base, head_sha=head)
        error = await metadata_error(fake_github)
        assert isinstance(error, GitHubUnavailable)
        assert error.message == "GitHub returned pull request data that is not valid."


BAD_BRANCHES = [
    "",
    "-main",
    "--upload-pack=touch x",
    "a..b",
    "a b",
    "a\tb",
    "a\nb",
    "a\x00b",
    "a\x7fb",
    "x.lock",
    "a/x.lock/b",
    "HEAD",
    "@",
    ".hidden",
    "a/.hidden",
    "a//b",
    "/a",
    "a/",
    "a.",
    "a~1",
    "a^",
    "a:b",
    "a?",
    "a*",
    "a[1]",
    "a\\b",
    "@{-1}",
    "a@{b",
    "x" * 1025,
    "\ud800",
]


GOOD_BRANCHES = [
    "main",
    "release/1.x",
    "feature-x",
    "a@b",
    "ünïcode",
    "v1.0",
    "a.b/c_d",
    "x" * 200,
    "@a",
]


@pytest.mark.parametrize("branch", BAD_BRANCHES)
def test_invalid_base_branches_are_refused(branch: str) -> None:
    assert not is_valid_branch_name(branch)


@pytest.mark.parametrize("branch", GOOD_BRANCHES)
def test_valid_base_branches_are_accepted(branch: str) -> None:
    assert is_valid_branch_name(branch)


def test_branch_rule_is_no_looser_than_git_check_ref_format(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    for branch in BAD_BRANCHES + GOOD_BRANCHES:
        if "\x00" in branch or "\ud800" in branch:
            continue  # not representable in an argument vector
        done = subprocess.run(
            ["git", "check-ref-format", "--branch", branch],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            check=False,
        )
        if is_valid_branch_name(branch):
            assert done.returncode == 0, branch


@pytest.mark.anyio
async def test_invalid_base_branch_in_metadata_is_github_unavailable(
    fake_github: FakeGitHub,
) -> None:
    fake_github.set_pull(
        "acme", "widget", 7, base_sha=BASE, head_sha=HEAD, base_ref="--upload-pack=touch x"
    )
    error = await metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)


@pytest.mark.anyio
@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[]",
        "null",
        '{"number": 7}',
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "number": 8}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "number": "7"}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "title": None}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "body": 5}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "head": {"sha": None}}),
        json.dumps({**pull_json(7, base_sha=BASE, head_sha=HEAD), "base": {"sha": BASE}}),
        json.dumps(pull_json(7, base_sha=BASE, head_sha=HEAD))[:-1],
    ],
)
async def test_malformed_metadata_is_github_unavailable(fake_github: FakeGitHub, body: str) -> None:
    fake_github.respond("acme", "widget", 7, 200, body)
    error = await metadata_error(fake_github)
    assert isinstance(error, GitHubUnavailable)
    assert error.__cause__ is None
    assert error.__context__ is None or error.__suppress_context__


@pytest.mark.anyio
async def test_title_and_body_are_bounded(fake_github: FakeGitHub) -> None:
    fake_github.set_pull(
        "acme", "widget", 7, base_sha=BASE, head_sha=HEAD, title="t" * 100_000, body="é" * 100_000
    )
    metadata = await fetch_metadata(pull_ref(fake_github), fake_github.settings(Path("unused")))
    assert len(metadata.title) == MAX_TITLE_CHARS
    assert len(metadata.body.encode()) <= MAX_BODY_BYTES
    assert metadata.body == "é" * (MAX_BODY_BYTES // 2)  # cut on a character boundary


@pytest.mark.anyio
async def test_missing_body_is_empty_text(fake_github: FakeGitHub) -> None:
    fake_github.set_pull("acme", "widget", 7, base_sha=BASE, head_sha=HEAD, body=None)
    metadata = await fetch_metadata(pull_ref(fake_github), fake_github.settings(Path("unused")))
    assert metadata.body == ""


def refs_of(git_dir: Path) -> list[str]:
    return git(git_dir, "for-each-ref", "--format=%(refname)").split()


@pytest.mark.anyio
async def test_only_the_pull_head_and_base_branch_are_fetched(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 3, base={"a.py": "base\n"})
    origin = pull.origin
    other_branch = origin.commit({"other.txt": "other branch\n"}, pull.base_sha)
    origin.set_branch("other", other_branch)
    tagged = origin.commit({"tag.txt": "tagged\n"}, pull.base_sha)
    origin.publish(tagged, "refs/tags/v1")
    other_pull = origin.commit({"pull4.txt": "another pull request\n"}, pull.base_sha)
    origin.set_pull_head(4, other_pull)
    prepared = await review(pull.url, fake_github.settings(tmp_path / "cache"))
    for sha in (other_branch, tagged, other_pull):
        assert not has_object(prepared.git_dir, sha)
    refs = refs_of(prepared.git_dir)
    assert len(refs) == 2
    assert "refs/pr-review/pull/3" in refs
    assert any(ref.startswith("refs/pr-review/base/") for ref in refs)


@pytest.mark.anyio
async def test_base_commit_missing_from_the_base_branch_is_reported(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    elsewhere = pull.origin.commit({"x.txt": "never on main\n"}, None)
    fake_github.set_pull("acme", "widget", 7, base_sha=elsewhere, head_sha=pull.head_sha)
    with pytest.raises(GitHubUnavailable, match="base commit"):
        await review(pull.url, fake_github.settings(tmp_path / "cache"))
