"""The cache folder's layout (cache_layout.py): what a real fetch, a lease, an index folder and
an eviction leave under PR_REVIEW_CACHE_DIR is exactly what the layout names."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pr_review_api.cache_layout import (
    CacheLayout,
    git_dir_of,
    index_dir_of,
    last_used_file_of,
)
from pr_review_api.fetch.cache import RepositoryCache
from pr_review_api.git.store import RepositoryStore
from pr_review_api.github.checkout import GitHubCache, open_pull_request
from pr_review_api.github.urls import parse_pull_request_url
from tests.fakes.github_server import FakeGitHub


@pytest.mark.anyio
async def test_a_fetch_lays_out_the_cache_as_named(fake_github: FakeGitHub, tmp_path: Path) -> None:
    pull = fake_github.pull_request("acme", "widget", 7)
    settings = fake_github.settings(tmp_path / "cache")
    layout = CacheLayout(settings.pr_review_cache_dir)
    key = GitHubCache(settings).key(parse_pull_request_url(pull.url, settings))
    async with open_pull_request(pull.url, settings) as prepared:
        assert prepared.git_dir == git_dir_of(layout.repository(key))
    assert sorted(p.name for p in layout.root.iterdir()) == sorted(p.name for p in layout.folders)
    assert sorted(p.name for p in layout.repository(key).iterdir()) == ["git", "last-used"]
    assert last_used_file_of(layout.repository(key)).is_file()
    assert sorted(layout.locks.iterdir()) == sorted(
        [layout.use_lock(key), layout.fetch_lock(key), layout.evict_lock]
    )
    with RepositoryStore(cache_dir=layout.root) as store:
        assert store.index_dir(prepared.git_dir) == index_dir_of(layout.repository(key))
    evicting = RepositoryCache(settings.model_copy(update={"pr_review_cache_max_bytes": 0}))
    assert evicting.evict() == [key]
    assert list(layout.repositories.iterdir()) == []
    assert list(layout.trash.iterdir()) == []


def test_only_a_git_folder_of_the_cache_is_a_cached_repository(tmp_path: Path) -> None:
    layout = CacheLayout(tmp_path / "cache")
    cached = git_dir_of(layout.repository("a" * 32))
    cached.mkdir(parents=True)
    assert layout.cached_repository_of(cached) == Path(os.path.realpath(cached.parent))
    linked = tmp_path / "link"
    linked.symlink_to(layout.root)  # real paths are compared
    assert layout.cached_repository_of(linked / "repositories" / ("a" * 32) / "git") == Path(
        os.path.realpath(cached.parent)
    )
    local = tmp_path / "work" / ".git"
    local.mkdir(parents=True)
    assert layout.cached_repository_of(local) is None
    assert layout.cached_repository_of(layout.repository("b" * 32) / "other") is None
