"""The cache folder (fetch/files.py and its use by fetch/cache.py): private, hashed
paths, locks, eviction, and healing after a failed or killed fetch.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import ConfigurationError, GitHubUnavailable
from pr_review_api.fetch import cache as cache_module
from pr_review_api.fetch import files as cache_files
from pr_review_api.fetch.cache import RepositoryCache
from pr_review_api.github.checkout import GitHubCache, open_pull_request
from pr_review_api.github.urls import parse_pull_request_url
from pr_review_api.settings import Settings
from tests.fakes.github_server import FakeGitHub
from tests.github.support import diff_of, has_object, review

# --- the cache folder and eviction ---


def test_cache_path_is_a_hash_of_server_owner_and_repository(tmp_path: Path) -> None:
    settings = Settings(pr_review_cache_dir=tmp_path / "cache")
    cache = GitHubCache(settings)
    ref = parse_pull_request_url("https://github.com/Acme/Widget/pull/7", settings)
    same = parse_pull_request_url("https://github.com/acme/widget/pull/8", settings)
    other = parse_pull_request_url("https://github.com/acme/widget2/pull/7", settings)
    key = cache.key(ref)
    assert len(key) == 32
    assert all(c in "0123456789abcdef" for c in key)
    assert cache.repository(ref) == tmp_path / "cache" / "repositories" / key
    assert cache.key(same) == key  # GitHub names are case-insensitive
    assert cache.key(other) != key
    ghes = GitHubCache(
        Settings(github_server_url="https://ghe.example.com", pr_review_cache_dir=tmp_path)
    )
    assert (
        ghes.key(
            parse_pull_request_url("https://ghe.example.com/acme/widget/pull/7", ghes.settings)
        )
        != key
    )
    for name in ("..", "...", ".git", "-x", "a.b"):
        assert name not in cache.repository(ref).parts


@pytest.mark.anyio
async def test_cache_folder_is_private(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    await review(pull.url, fake_github.settings(tmp_path / "cache"))
    for folder in ("", "repositories", "locks", "trash"):
        assert stat.S_IMODE((tmp_path / "cache" / folder).stat().st_mode) == 0o700


@pytest.mark.anyio
async def test_unusable_cache_folder_is_a_configuration_error(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    with pytest.raises(ConfigurationError) as caught:
        await review(pull.url, fake_github.settings(blocker / "cache"))
    assert "PR_REVIEW_CACHE_DIR" in caught.value.message
    assert str(tmp_path) not in caught.value.message


async def _review_each(fake: FakeGitHub, settings: Settings, names: list[str]) -> dict[str, Path]:
    repositories: dict[str, Path] = {}
    for name in names:
        pull = fake.pull_request("acme", name, 1, base={f"{name}.txt": secrets.token_hex(8192)})
        repositories[name] = (await review(pull.url, settings)).git_dir.parent
    return repositories


@pytest.mark.anyio
async def test_least_recently_used_repositories_are_evicted_first(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    settings = fake_github.settings(tmp_path / "cache")
    repositories = await _review_each(fake_github, settings, ["a", "b", "c"])
    for when, name in enumerate(["b", "a", "c"]):  # b least recently used, c most
        os.utime(repositories[name] / "last-used", (1_000_000 + when, 1_000_000 + when))
    sizes = {name: cache_files.tree_size(path) for name, path in repositories.items()}
    bound = sizes["a"] + sizes["c"] + 1
    cache = RepositoryCache(settings.model_copy(update={"pr_review_cache_max_bytes": bound}))
    assert cache.total_size() == sum(sizes.values())
    assert cache.evict() == [repositories["b"].name]
    assert not repositories["b"].exists()
    assert repositories["a"].exists()
    assert repositories["c"].exists()
    assert cache.evict() == []  # within the bound now
    assert cache.total_size() <= bound


@pytest.mark.anyio
async def test_fetch_trims_the_cache_to_its_bound(fake_github: FakeGitHub, tmp_path: Path) -> None:
    settings = fake_github.settings(tmp_path / "cache")
    repositories = await _review_each(fake_github, settings, ["a", "b"])
    tight = settings.model_copy(update={"pr_review_cache_max_bytes": 1})
    fresh = await _review_each(fake_github, tight, ["c"])
    assert not repositories["a"].exists()
    assert not repositories["b"].exists()
    assert fresh["c"].exists()  # the repository being reviewed is kept, even over the bound
    assert not list((tmp_path / "cache" / "trash").iterdir())


@pytest.mark.anyio
async def test_repository_in_use_is_never_evicted(fake_github: FakeGitHub, tmp_path: Path) -> None:
    settings = fake_github.settings(tmp_path / "cache")
    tight = settings.model_copy(update={"pr_review_cache_max_bytes": 1})
    held = fake_github.pull_request("acme", "held", 1)
    other = fake_github.pull_request("acme", "other", 1)
    async with open_pull_request(held.url, settings) as prepared:
        other_dir = (await review(other.url, tight)).git_dir  # its fetch trims to one byte
        assert prepared.git_dir.exists()
        assert RepositoryCache(tight).evict() == [other_dir.parent.name]  # only "other" goes
        assert prepared.git_dir.exists()
        assert "change-1.txt" in diff_of(prepared)
        RepositoryCache(tight).evict()
        assert prepared.git_dir.exists()
    assert RepositoryCache(tight).evict() != []
    assert not prepared.git_dir.exists()


@pytest.mark.anyio
async def test_evicted_repository_is_fetched_again(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, head={"x.py": "AGAIN\n"})
    settings = fake_github.settings(tmp_path / "cache")
    first = await review(pull.url, settings)
    RepositoryCache(settings.model_copy(update={"pr_review_cache_max_bytes": 0})).evict()
    assert not first.git_dir.exists()
    again = await review(pull.url, settings)
    assert "+AGAIN" in diff_of(again)
    assert fake_github.fetches("acme", "widget") == 2


def test_interrupted_repository_creation_is_redone(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache")
    cache = GitHubCache(settings)
    ref = parse_pull_request_url(pull.url, settings)
    half = cache.repository(ref) / "git"
    (half / "objects").mkdir(parents=True)  # a crash left a folder without HEAD
    (cache.repository(ref) / "git.new").mkdir()
    prepared = asyncio.run(review(pull.url, settings))
    assert has_object(prepared.git_dir, pull.head_sha)
    assert not (cache.repository(ref) / "git.new").exists()


def test_fetch_lock_is_exclusive_and_use_lock_is_shared(tmp_path: Path) -> None:
    path = tmp_path / "lock"
    shared = cache_files.lock(path, shared=True, timeout=0)
    assert shared is not None
    again = cache_files.lock(path, shared=True, timeout=0)
    assert again is not None
    assert cache_files.lock(path, shared=False, timeout=0.05) is None
    os.close(shared)
    os.close(again)
    exclusive = cache_files.lock(path, shared=False, timeout=0)
    assert exclusive is not None
    got: list[int | None] = []
    waiter = threading.Thread(
        target=lambda: got.append(cache_files.lock(path, shared=True, timeout=5))
    )
    waiter.start()
    time.sleep(0.1)
    assert got == []
    os.close(exclusive)
    waiter.join()
    assert got[0] is not None
    os.close(got[0])


# --- healing: a failed fetch leaves nothing behind, a killed one is cleaned up next time ---


def partial_data(cache_dir: Path) -> list[Path]:
    """Partial packs, quarantine directories and lock files anywhere in the cache's git data."""
    repositories = cache_dir / "repositories"
    patterns = ("*/git/objects/pack/tmp_*", "*/git/objects/incoming-*", "*/git/**/*.lock")
    return [path for pattern in patterns for path in repositories.glob(pattern)]


@pytest.fixture
def small_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 5 MiB tmpfs for the cache; skipped where mounting is not permitted."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=5m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip("mounting a small file system is not permitted here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


@pytest.mark.anyio
async def test_a_fetch_that_fills_the_disk_leaves_no_partial_pack(
    fake_github: FakeGitHub, small_filesystem: Path
) -> None:
    # 12 MB of hex digits is about 6 MB of pack: more than the 5 MiB file system holds.
    big = fake_github.pull_request("acme", "huge", 1, head={"blob.txt": secrets.token_hex(6 << 20)})
    small = fake_github.pull_request("acme", "small", 2, head={"a.py": "fine\n"})
    settings = fake_github.settings(small_filesystem / "cache")
    with pytest.raises(GitHubUnavailable):
        await review(big.url, settings)
    assert partial_data(small_filesystem / "cache") == []
    # The cache is not wedged: another repository, then the same one, can still be reviewed.
    prepared = await review(small.url, settings)
    assert has_object(prepared.git_dir, small.head_sha)
    with pytest.raises(GitHubUnavailable):
        await review(big.url, settings)
    assert partial_data(small_filesystem / "cache") == []


@pytest.mark.anyio
async def test_leftovers_of_a_killed_fetch_are_removed_by_the_next_one(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    pull = fake_github.pull_request("acme", "widget", 7, head={"a.py": "one\n"})
    settings = fake_github.settings(tmp_path / "cache")
    git_dir = (await review(pull.url, settings)).git_dir
    # What a fetch killed with SIGKILL leaves: a partial pack, a quarantine, ref locks.
    (git_dir / "objects/pack/tmp_pack_Ab12Cd").write_bytes(os.urandom(1 << 20))
    (git_dir / "objects/incoming-XyZ123").mkdir()
    (git_dir / "refs/pr-review/pull/7.lock").write_text("0" * 40 + "\n")
    (git_dir / "packed-refs.lock").write_text("")
    newer = pull.origin.commit({"a.py": "two\n"}, pull.head_sha, "newer")
    pull.origin.set_pull_head(7, newer)
    fake_github.set_pull("acme", "widget", 7, base_sha=pull.base_sha, head_sha=newer)
    prepared = await review(pull.url, settings)
    assert prepared.metadata.head_sha == newer
    assert has_object(git_dir, newer)
    assert partial_data(tmp_path / "cache") == []


@pytest.mark.anyio
async def test_unused_repositories_are_evicted_before_a_fetch_needs_the_space(
    fake_github: FakeGitHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = fake_github.pull_request("acme", "old", 1)
    new = fake_github.pull_request("acme", "new", 2)
    settings = fake_github.settings(tmp_path / "cache")
    old_dir = (await review(old.url, settings)).git_dir
    # The file system now has less free space than a fetch wants: the unused one goes first.
    monkeypatch.setattr(cache_module, "FETCH_RESERVE_BYTES", 1 << 62)
    fetched: list[bool] = []
    real_fetch = RepositoryCache._fetch

    def watching(self: RepositoryCache, git_dir: Path, *args: Any) -> None:
        fetched.append(old_dir.exists())
        real_fetch(self, git_dir, *args)

    monkeypatch.setattr(RepositoryCache, "_fetch", watching)
    prepared = await review(new.url, settings)
    assert fetched == [False]  # evicted before the fetch started
    assert has_object(prepared.git_dir, new.head_sha)
