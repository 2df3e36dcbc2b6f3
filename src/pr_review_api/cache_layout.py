"""The layout of PR_REVIEW_CACHE_DIR: every folder and file name under it, in one place.

    repositories/<key>/git        bare repository: refs/pr-review/pull/N, refs/pr-review/base/H
    repositories/<key>/git.new    a bare repository being created (renamed to git/ when done)
    repositories/<key>/last-used  touched on every use; its mtime orders eviction
    repositories/<key>/index/     search indexes and snapshots of the repository's heads
    locks/<key>.use               shared by every review of <key>; exclusive to evict <key>
    locks/<key>.fetch             exclusive while fetching into <key>
    locks/evict                   one evictor at a time
    trash/                        evicted repositories being deleted

Every name is ours; none comes from a request. `<key>` is 32 hex digits: for a pull request's
repository a hash of the server URL and the lower-cased owner and repository
(`fetch/cache.py`), for a local repository a hash of its real path (`git/store.py`), whose
folder then holds only `index/` and `last-used`, so the cache's bound and eviction cover it.

Who uses what: `fetch/cache.py` fetches into `git/` under the locks and evicts through
`trash/`; `fetch/files.py` keeps `last-used`; `git/store.py` puts `index/` beside the
object store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

REPOSITORIES = "repositories"
LOCKS = "locks"
TRASH = "trash"
GIT = "git"
GIT_STAGING = "git.new"
LAST_USED = "last-used"
INDEX = "index"
EVICT_LOCK = "evict"


@dataclass(frozen=True)
class CacheLayout:
    """The paths under one cache folder (`root`, PR_REVIEW_CACHE_DIR)."""

    root: Path

    @property
    def repositories(self) -> Path:
        return self.root / REPOSITORIES

    @property
    def locks(self) -> Path:
        return self.root / LOCKS

    @property
    def trash(self) -> Path:
        return self.root / TRASH

    @property
    def folders(self) -> tuple[Path, ...]:
        """The folders the cache is made of, created together."""
        return (self.repositories, self.locks, self.trash)

    def repository(self, key: str) -> Path:
        """One repository's folder: its `git/`, `last-used` and `index/`."""
        return self.repositories / key

    def use_lock(self, key: str) -> Path:
        return self.locks / f"{key}.use"

    def fetch_lock(self, key: str) -> Path:
        return self.locks / f"{key}.fetch"

    @property
    def evict_lock(self) -> Path:
        return self.locks / EVICT_LOCK

    def cached_repository_of(self, git_dir: Path) -> Path | None:
        """The repository folder `git_dir` is the `git/` of (real paths compared), or None
        when it is not a repository of this cache (a local repository, say)."""
        real = Path(os.path.realpath(git_dir))
        repositories = Path(os.path.realpath(self.repositories))
        if real.name == GIT and real.parent.parent == repositories:
            return real.parent
        return None


def git_dir_of(repository: Path) -> Path:
    """A repository folder's bare git directory."""
    return repository / GIT


def staging_git_dir_of(repository: Path) -> Path:
    """Where a repository folder's bare git directory is created before it is renamed."""
    return repository / GIT_STAGING


def last_used_file_of(repository: Path) -> Path:
    """The file whose mtime says when the repository was last used."""
    return repository / LAST_USED


def index_dir_of(repository: Path) -> Path:
    """The folder of a repository's search indexes and snapshots."""
    return repository / INDEX
