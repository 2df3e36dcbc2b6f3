"""Files of the repository cache: flock locks, leases, sizes and leftovers of killed processes.

Locks are `flock(2)` locks on files that are never deleted, so a waiter can never hold a lock on
an unlinked file. A lease is a shared lock on one repository: while any review holds one, the
repository cannot be evicted.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
from pathlib import Path

from pr_review_api.cache_layout import git_dir_of, last_used_file_of

logger = logging.getLogger(__name__)

LOCK_POLL_SECONDS = 0.05


# --- locks ---


def lock(path: Path, *, shared: bool, timeout: float) -> int | None:
    """An open descriptor holding a flock on `path`, or None if it stayed busy for `timeout`."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    operation = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
    deadline = time.monotonic() + timeout
    delay = 0.002
    try:
        while True:
            try:
                fcntl.flock(fd, operation)
                return fd
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return None
                time.sleep(delay)
                delay = min(delay * 2, LOCK_POLL_SECONDS)
    except BaseException:
        os.close(fd)
        raise


class Lease:
    """A shared hold on one cached repository; it cannot be evicted until released."""

    def __init__(self, fd: int, repository: Path) -> None:
        self._fd: int | None = fd
        self.repository = repository

    @property
    def git_dir(self) -> Path:
        return git_dir_of(self.repository)

    def touch(self) -> None:
        """Mark the repository as used now, for least-recently-used eviction."""
        last_used_file_of(self.repository).touch(mode=0o600, exist_ok=True)

    def release(self) -> None:
        """Mark the repository used and let eviction have it again; idempotent."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            self.touch()
        except OSError:
            logger.warning("could not mark a cached repository as used")
        finally:
            os.close(fd)


def tree_size(top: Path) -> int:
    total = 0
    for directory, _, files in os.walk(top):
        for name in files:
            try:
                total += os.lstat(os.path.join(directory, name)).st_size
            except FileNotFoundError:
                continue
    return total


def last_used(repository: Path) -> float:
    for candidate in (last_used_file_of(repository), repository):
        try:
            return candidate.stat().st_mtime
        except FileNotFoundError:
            continue
    return 0.0


# Written by git while it works and renamed or deleted when it is done: one still present while
# we hold the repository's fetch lock (no other writer) is a leftover of a killed process.
_LEFTOVERS = ("objects/pack/tmp_*", "objects/tmp_objdir-*", "objects/incoming-*", "*.lock")


def heal(git_dir: Path) -> None:
    """Remove partial packs, quarantine directories and stale locks (fetch lock held)."""
    for pattern in _LEFTOVERS:
        for leftover in git_dir.glob(pattern):
            remove_path(leftover)
    refs = git_dir / "refs"
    if refs.is_dir():
        for lock in refs.rglob("*.lock"):
            remove_path(lock)


def remove_path(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError:
        logger.warning("a leftover file in the repository cache could not be removed")
