"""The repository cache (fetch/cache.py): fetching and pinning a pull request, the
token's scope, and a 10,000-file repository.
"""

from __future__ import annotations

import base64
import json
import logging
import secrets
import time
import traceback
from pathlib import Path

import pytest

from pr_review_api.errors import GitHubUnavailable, PullRequestNotFound
from pr_review_api.fetch.cache import RepositoryCache
from pr_review_api.fetch.metadata import PullRequestMetadata
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git_runner import run_git
from pr_review_api.github import checkout as cache_module
from pr_review_api.github.checkout import HEAD_MOVED, GitHubCache, open_pull_request
from pr_review_api.github.git_http import fetch_config
from pr_review_api.github.urls import parse_pull_request_url
from tests.conftest import GITHUB_TOKEN
from tests.fakes.github_server import FakeGitHub
from tests.github.support import (
    Launch,
    assert_token_kept_out,
    diff_of,
    has_object,
    review,
)
from tests.gitrepo import git

TOKEN_FORMS = (
    GITHUB_TOKEN,
    base64.b64encode(f"x-access-token:{GITHUB_TOKEN}".encode()).decode(),
    base64.b64encode(GITHUB_TOKEN.encode()).decode().rstrip("="),
)


def upload_pack_bytes(fake: FakeGitHub, owner: str, repo: str) -> int:
    return sum(
        r.response_bytes
        for r in fake.git_requests(owner, repo)
        if r.path.endswith("/git-upload-pack")
    )


# --- fetching and pinning ---


@pytest.mark.anyio
async def test_review_pins_the_metadata_base_and_head(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request(
        "acme", "widget", 7, base={"a.py": "one\n"}, head={"a.py": "two\n"}
    )
    settings = fake_github.settings(tmp_path / "cache")
    async with open_pull_request(pull.url + "/files", settings) as prepared:
        assert prepared.info.url == pull.url
        assert (prepared.metadata.base_sha, prepared.metadata.head_sha) == (
            pull.base_sha,
            pull.head_sha,
        )
        assert has_object(prepared.git_dir, pull.base_sha)
        assert has_object(prepared.git_dir, pull.head_sha)
        assert "-one\n+two" in diff_of(prepared)
    assert prepared.git_dir.is_relative_to(tmp_path / "cache")


@pytest.mark.anyio
async def test_git_data_comes_from_the_server_repository_url(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    await review(pull.url, fake_github.settings(tmp_path / "cache"))
    paths = {r.path for r in fake_github.git_requests()}
    assert paths == {"/acme/widget.git/info/refs", "/acme/widget.git/git-upload-pack"}


@pytest.mark.anyio
async def test_base_branch_that_advanced_stays_out_of_the_diff(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    origin = fake_github.repository("acme", "widget")
    branch_point = origin.commit({"shared.py": "shared\n", "feature.py": "old\n"}, None)
    head = origin.commit({"feature.py": "PULL-REQUEST-CHANGE\n"}, branch_point)
    advanced = origin.commit({"shared.py": "BASE-ONLY-CHANGE\n"}, branch_point)
    origin.set_branch("main", advanced)
    origin.set_pull_head(9, head)
    fake_github.set_pull("acme", "widget", 9, base_sha=advanced, head_sha=head)
    prepared = await review(
        f"{fake_github.server_url}/acme/widget/pull/9", fake_github.settings(tmp_path / "c")
    )
    pinned = PinnedRepository.open(prepared.git_dir, advanced, head)
    assert pinned.revisions.merge_base_sha == branch_point
    diff = diff_of(prepared)
    assert "PULL-REQUEST-CHANGE" in diff
    assert "BASE-ONLY-CHANGE" not in diff


@pytest.mark.anyio
async def test_second_review_of_the_repository_fetches_only_new_objects(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    bulk = {f"data/{i:03}.txt": secrets.token_hex(2048) + "\n" for i in range(150)}  # ~600 KB
    first = fake_github.pull_request("acme", "widget", 1, base=bulk)
    settings = fake_github.settings(tmp_path / "cache")
    await review(first.url, settings)
    first_bytes = upload_pack_bytes(fake_github, "acme", "widget")
    assert first_bytes > 300_000
    second = fake_github.pull_request("acme", "widget", 2, head={"small.txt": "small change\n"})
    prepared = await review(second.url, settings)
    second_bytes = upload_pack_bytes(fake_github, "acme", "widget") - first_bytes
    assert fake_github.fetches("acme", "widget") == 2
    assert second_bytes < first_bytes / 50
    assert "small change" in diff_of(prepared)


@pytest.mark.anyio
async def test_new_head_of_the_same_pull_request_fetches_only_new_objects(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    bulk = {f"data/{i:03}.txt": secrets.token_hex(2048) + "\n" for i in range(150)}
    pull = fake_github.pull_request("acme", "widget", 1, base=bulk)
    settings = fake_github.settings(tmp_path / "cache")
    await review(pull.url, settings)
    first_bytes = upload_pack_bytes(fake_github, "acme", "widget")
    new_head = pull.origin.commit({"fix.txt": "review comments addressed\n"}, pull.head_sha)
    pull.origin.set_pull_head(1, new_head)
    fake_github.set_pull("acme", "widget", 1, base_sha=pull.base_sha, head_sha=new_head)
    prepared = await review(pull.url, settings)
    assert prepared.metadata.head_sha == new_head
    assert upload_pack_bytes(fake_github, "acme", "widget") - first_bytes < first_bytes / 50


@pytest.mark.anyio
async def test_repeat_review_of_the_same_head_fetches_nothing(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache")
    first = await review(pull.url, settings)
    before = len(fake_github.git_requests())
    second = await review(pull.url, settings)
    assert second.git_dir == first.git_dir
    assert len(fake_github.git_requests()) == before
    assert len(fake_github.api_requests()) == 2  # the metadata is always read afresh


@pytest.mark.anyio
async def test_moved_head_is_reported_instead_of_reviewed(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    pushed = pull.origin.commit({"late.txt": "pushed after the metadata was read\n"}, pull.head_sha)
    pull.origin.set_pull_head(7, pushed)  # the API still names the old head
    with pytest.raises(GitHubUnavailable) as caught:
        await review(pull.url, fake_github.settings(tmp_path / "cache"))
    assert caught.value.message == HEAD_MOVED
    assert "moved" in caught.value.message


@pytest.mark.anyio
async def test_force_pushed_head_is_reported(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    rewritten = pull.origin.commit({"rewritten.txt": "history rewritten\n"}, pull.base_sha)
    pull.origin.set_pull_head(7, rewritten)
    with pytest.raises(GitHubUnavailable, match="head moved"):
        await review(pull.url, fake_github.settings(tmp_path / "cache"))


@pytest.mark.anyio
async def test_pull_request_not_found_reaches_no_git(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    with pytest.raises(PullRequestNotFound):
        await review(
            f"{fake_github.server_url}/acme/missing/pull/1", fake_github.settings(tmp_path / "c")
        )
    assert fake_github.git_requests() == []


@pytest.mark.anyio
async def test_git_failure_is_github_unavailable_with_a_fixed_message(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    fake_github.set_pull("acme", "ghost", 7, base_sha="a" * 40, head_sha="b" * 40)  # no repository
    with pytest.raises(GitHubUnavailable) as caught:
        await review(
            f"{fake_github.server_url}/acme/ghost/pull/7", fake_github.settings(tmp_path / "cache")
        )
    assert caught.value.message == cache_module.FETCH_FAILED
    rendered = "".join(traceback.format_exception(caught.value))
    assert "fatal" not in rendered
    assert str(tmp_path) not in rendered


@pytest.mark.anyio
async def test_base_branch_is_checked_before_git_sees_it(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache")
    ref = parse_pull_request_url(pull.url, settings)
    metadata = PullRequestMetadata(pull.base_sha, pull.head_sha, "--upload-pack=touch x", "", "")
    with pytest.raises(GitHubUnavailable, match="not valid"):
        GitHubCache(settings).prepare(ref, metadata, token=None)
    bad_sha = PullRequestMetadata("HEAD", pull.head_sha, "main", "", "")
    with pytest.raises(GitHubUnavailable, match="not valid"):
        GitHubCache(settings).prepare(ref, bad_sha, token=None)
    assert fake_github.git_requests() == []


# --- the token ---


@pytest.mark.anyio
async def test_token_is_sent_to_the_api_and_git_and_appears_nowhere_else(
    fake_github: FakeGitHub,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    launches: list[Launch],
) -> None:
    caplog.set_level(logging.DEBUG)
    fake_github.require_token = GITHUB_TOKEN  # the server refuses anything else
    pull = fake_github.pull_request("acme", "widget", 7)
    cache_dir = tmp_path / "cache"
    settings = fake_github.settings(cache_dir, token=GITHUB_TOKEN)
    prepared = await review(pull.url, settings)
    assert "two" not in diff_of(prepared)
    moving = fake_github.pull_request("acme", "widget", 8)
    moved = pull.origin.commit({"late.txt": "late\n"}, moving.head_sha)
    pull.origin.set_pull_head(8, moved)  # a git-side failure, after a fetch with the token
    failures: list[BaseException] = []
    for url in (moving.url, f"{fake_github.server_url}/acme/widget/pull/9"):
        try:
            await review(url, settings)
        except (GitHubUnavailable, PullRequestNotFound) as exc:
            failures.append(exc)
    assert len(failures) == 2
    # Sent: as a bearer token to the API, as a basic credential to git.
    assert {r.authorization for r in fake_github.api_requests()} == {f"Bearer {GITHUB_TOKEN}"}
    git_auth = {r.authorization for r in fake_github.git_requests()}
    assert git_auth == {f"Basic {TOKEN_FORMS[1]}"}
    # Nowhere else: messages, tracebacks, logs, argument vectors, files in the cache.
    assert_token_kept_out(
        TOKEN_FORMS,
        origin=fake_github.server_url,
        launches=launches,
        records=caplog.records,
        cache=cache_dir,
        requests=fake_github.requests,
        failures=failures,
    )


def test_token_header_is_scoped_to_the_server_origin(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache", token=GITHUB_TOKEN)
    git_dir = tmp_path / "probe.git"
    git(tmp_path, "init", "-q", "--bare", str(git_dir))
    other_origin = (
        f"http://localhost:{fake_github.port}/acme/widget.git"  # same server, other origin
    )
    config = fetch_config(settings, settings.github_token)
    run_git(git_dir, ["ls-remote", "--end-of-options", other_origin], config=config)
    run_git(
        git_dir,
        ["ls-remote", "--end-of-options", pull.url.rsplit("/pull/", 1)[0] + ".git"],
        config=config,
    )
    first, second = [r for r in fake_github.git_requests() if r.path.endswith("/info/refs")]
    assert first.authorization is None
    assert second.authorization == f"Basic {TOKEN_FORMS[1]}"


@pytest.mark.anyio
async def test_no_token_means_no_authorization_anywhere(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    await review(pull.url, fake_github.settings(tmp_path / "cache"))
    assert all(r.authorization is None for r in fake_github.requests)


@pytest.mark.anyio
async def test_git_does_not_follow_redirects(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    fake_github.git_redirect = f"http://localhost:{fake_github.port}"  # another origin
    with pytest.raises(GitHubUnavailable, match="failed"):
        await review(pull.url, fake_github.settings(tmp_path / "cache", token=GITHUB_TOKEN))
    hosts = {r.headers["host"] for r in fake_github.requests}
    assert hosts == {f"127.0.0.1:{fake_github.port}"}  # the redirect target was never asked


# --- measurement ---


def _fast_import(work: Path, files: dict[str, str]) -> str:
    """Commit a large tree in one `git fast-import` stream (no working tree involved)."""
    stream = [b"commit refs/heads/fast-import\ncommitter T <t@example.invalid> 1700000000 +0000\n"]
    stream.append(b"data 4\nbulk\n")
    for path, content in files.items():
        data = content.encode()
        stream.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")
    stream.append(b"done\n")
    git(work, "fast-import", "--quiet", "--done", input_bytes=b"".join(stream))
    return git(work, "rev-parse", "refs/heads/fast-import")


@pytest.mark.slow
@pytest.mark.anyio
async def test_fetch_of_a_10000_file_repository(fake_github: FakeGitHub, tmp_path: Path) -> None:
    origin = fake_github.repository("acme", "big")
    # About 1.3 KB of barely compressible text per file: a 13 MB tree.
    files = {
        f"pkg{i // 100:03}/module{i % 100:03}.py": f"VALUE_{i} = '{secrets.token_hex(640)}'\n"
        for i in range(10_000)
    }
    started = time.perf_counter()
    base = _fast_import(origin.work.path, files)
    head = origin.commit({"pkg000/module000.py": "CHANGED = True\n"}, base, "change")
    origin.set_branch("main", base)
    origin.set_pull_head(1, head)
    fake_github.set_pull("acme", "big", 1, base_sha=base, head_sha=head)
    built = time.perf_counter() - started
    settings = fake_github.settings(tmp_path / "cache")
    url = f"{fake_github.server_url}/acme/big/pull/1"

    started = time.perf_counter()
    first = await review(url, settings)
    first_seconds = time.perf_counter() - started
    first_bytes = upload_pack_bytes(fake_github, "acme", "big")

    started = time.perf_counter()
    await review(url, settings)
    same_head_seconds = time.perf_counter() - started
    same_head_bytes = upload_pack_bytes(fake_github, "acme", "big") - first_bytes

    newer = origin.commit({"pkg001/module001.py": "ALSO_CHANGED = True\n"}, head, "more")
    origin.set_pull_head(1, newer)
    fake_github.set_pull("acme", "big", 1, base_sha=base, head_sha=newer)
    started = time.perf_counter()
    await review(url, settings)
    new_head_seconds = time.perf_counter() - started
    new_head_bytes = upload_pack_bytes(fake_github, "acme", "big") - first_bytes - same_head_bytes

    size = RepositoryCache(settings).total_size()
    report = {
        "files": len(files),
        "build_seconds": round(built, 2),
        "first_fetch_seconds": round(first_seconds, 3),
        "first_fetch_bytes": first_bytes,
        "repeat_same_head_seconds": round(same_head_seconds, 3),
        "repeat_new_head_seconds": round(new_head_seconds, 3),
        "repeat_new_head_bytes": new_head_bytes,
        "cache_bytes": size,
        "cache_bound_bytes": settings.pr_review_cache_max_bytes,
    }
    print(json.dumps(report))
    assert "CHANGED = True" in diff_of(first)
    assert new_head_bytes < first_bytes / 100
    assert same_head_bytes == 0  # the repeat fetched nothing (its time is printed, not judged)
