"""The repository cache: one bare object store per repository, shared by concurrent reviews.

Every forge fetches a change into it: a `Remote` says where the change's commits come from
(its cache key's text, git URL, head ref and git configuration) and in whose words a failure
is told. Each forge's checkout (github/checkout.py, and through `ChangeOpener` gitlab/ and
gitea/'s) reads the change's metadata, makes its remote and pins its two commits here; the
repository stays protected from eviction until their context exits.

The folders and locks under PR_REVIEW_CACHE_DIR are named in `cache_layout`. A repository's key
is a hash of the remote's key text (its forge's server and repository, lower-cased where the
forge's names are case-insensitive), so no part of a URL ever becomes a path. Locks are
`flock(2)` locks on files never deleted, so a waiter never holds a lock on an unlinked file.

Only `refs/pull/N/head` (a merge request's `refs/merge-requests/N/head`) and `refs/heads/<base>`
are fetched, into refs of our own namespace; a later fetch offers those as "haves", so it
downloads only new objects. A
review whose two commits are already present fetches nothing. The size bound is enforced
after each fetch by removing the least recently used repositories that no review is using;
a repository in use is never removed, so the bound can be exceeded while it is.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import logging
import os
import re
import secrets
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pydantic import SecretStr

from pr_review_api.cache_layout import (
    CacheLayout,
    git_dir_of,
    last_used_file_of,
    staging_git_dir_of,
)
from pr_review_api.errors import ConfigurationError
from pr_review_api.fetch.files import Lease, heal, last_used, lock, tree_size
from pr_review_api.fetch.metadata import PullRequestMetadata, is_valid_branch_name
from pr_review_api.fetch.remote import (
    BASE_MISSING_TEMPLATE,
    CACHE_BROKEN,
    CACHE_BUSY,
    FETCH_FAILED_TEMPLATE,
    FETCH_TIMEOUT_TEMPLATE,
    HEAD_MOVED_TEMPLATE,
    INVALID_METADATA_TEMPLATE,
    CacheFailure,
    Remote,
)
from pr_review_api.git_runner import GitError, is_sha, run_git
from pr_review_api.http.api_client import lent_or_own
from pr_review_api.http.origin_client import OriginClient
from pr_review_api.model import PullRequestInfo
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)

LOCAL_GIT_TIMEOUT_SECONDS = 60.0
# Before a fetch, unused repositories are evicted while the cache's file system has less free.
FETCH_RESERVE_BYTES = 256 * 1024**2

CACHE_UNUSABLE = "PR_REVIEW_CACHE_DIR cannot be used as the repository cache (is it writable?)."

_KEY = re.compile(r"[0-9a-f]{32}")


@dataclass(frozen=True)
class PreparedChange:
    """A change (a pull or merge request) whose base and head commits are in a local bare
    repository."""

    info: PullRequestInfo
    metadata: PullRequestMetadata
    git_dir: Path  # bare repo holding base_sha and head_sha


class RepositoryCache:
    """The bare repositories under PR_REVIEW_CACHE_DIR and their locks. Blocking methods."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.layout = CacheLayout(settings.pr_review_cache_dir)
        self.root = self.layout.root
        self.max_bytes = settings.pr_review_cache_max_bytes
        self._wait = settings.review_timeout_seconds

    @staticmethod
    def key_of(key_text: str) -> str:
        """The cache key of a remote's `key_text`: a hash, never a path."""
        return hashlib.sha256(key_text.encode("utf-8")).hexdigest()[:32]

    def _ensure_layout(self) -> None:
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder in self.layout.folders:
            folder.mkdir(mode=0o700, exist_ok=True)

    # --- pinning ---

    def prepare_remote(self, remote: Remote, metadata: PullRequestMetadata) -> Lease:
        """`prepare` for any forge's `remote`; failures are its forge's errors."""
        try:
            return self._prepare(remote, metadata)
        except CacheFailure as failure:
            raise remote.words.failure(failure.sentence) from None

    def _prepare(self, remote: Remote, metadata: PullRequestMetadata) -> Lease:
        key = self.key_of(remote.key_text)
        try:
            self._ensure_layout()
            fd = lock(self.layout.use_lock(key), shared=True, timeout=self._wait)
        except OSError:
            raise ConfigurationError(CACHE_UNUSABLE) from None
        if fd is None:
            raise CacheFailure(CACHE_BUSY)
        lease = Lease(fd, self.layout.repository(key))
        try:
            fetched = self._pin(key, remote, metadata)
            lease.touch()
        except BaseException:
            lease.release()
            raise
        if fetched:
            self._evict_quietly(keep=key)
        return lease

    def _pin(self, key: str, remote: Remote, metadata: PullRequestMetadata) -> bool:
        """Fetch unless both commits are present; whether a fetch ran."""
        pinned = (metadata.base_sha, metadata.head_sha)
        if not all(is_sha(sha) for sha in pinned) or not is_valid_branch_name(metadata.base_ref):
            raise CacheFailure(INVALID_METADATA_TEMPLATE)
        git_dir = git_dir_of(self.layout.repository(key))
        if (git_dir / "HEAD").is_file() and _has_commits(git_dir, pinned):
            return False  # a repeat review of the same head: nothing to fetch, no lock to wait for
        fetch_lock = lock(self.layout.fetch_lock(key), shared=False, timeout=self._wait)
        if fetch_lock is None:
            raise CacheFailure(CACHE_BUSY)
        try:
            # Space first: a full disk fails the fetch, and a cache that heals itself does not
            # stay wedged by what a killed fetch left behind.
            self._evict_quietly(keep=key, reserve=True)
            git_dir = self._ensure_repository(key)
            heal(git_dir)
            if _has_commits(git_dir, pinned):
                return False  # another review fetched them while this one waited
            try:
                self._fetch(git_dir, remote, metadata)
            except BaseException:
                heal(git_dir)  # a failed or cancelled fetch leaves no partial pack behind
                raise
            _verify(git_dir, remote, metadata)
            return True
        finally:
            os.close(fetch_lock)

    def _ensure_repository(self, key: str) -> Path:
        """The repository's bare git directory, created atomically if missing (fetch lock held)."""
        repository = self.layout.repository(key)
        git_dir = git_dir_of(repository)
        if (git_dir / "HEAD").is_file():
            return git_dir
        repository.mkdir(mode=0o700, exist_ok=True)
        staging = staging_git_dir_of(repository)
        for leftover in (staging, git_dir):  # from an interrupted creation
            shutil.rmtree(leftover, ignore_errors=True)
        try:
            run_git(
                None,
                ["init", "--bare", "--quiet", "--template=", "--end-of-options", str(staging)],
                cwd=repository,
                timeout=LOCAL_GIT_TIMEOUT_SECONDS,
            )
        except (GitError, OSError, subprocess.TimeoutExpired):
            raise CacheFailure(CACHE_BROKEN) from None
        staging.rename(git_dir)
        return git_dir

    def _fetch(self, git_dir: Path, remote: Remote, metadata: PullRequestMetadata) -> None:
        branch = metadata.base_ref
        if not _git_accepts_branch(git_dir, branch):
            raise CacheFailure(INVALID_METADATA_TEMPLATE)
        args = [
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-recurse-submodules",
            "--no-write-fetch-head",
            "--no-auto-maintenance",
            "--no-show-forced-updates",
            "--end-of-options",
            remote.git_url,
            f"+{remote.head_ref}:{remote.local_head_ref}",
            f"+refs/heads/{branch}:{_base_ref(branch)}",
        ]
        started = time.monotonic()
        try:
            run_git(git_dir, args, config=remote.config, timeout=self._wait)
        except GitError as exc:
            # stderr stays in the GitError: it may quote the server, and is never shown.
            logger.info("git fetch for %s failed with status %d", remote.label, exc.returncode)
            raise CacheFailure(FETCH_FAILED_TEMPLATE) from None
        except subprocess.TimeoutExpired:
            raise CacheFailure(FETCH_TIMEOUT_TEMPLATE) from None
        except OSError:
            raise CacheFailure(FETCH_FAILED_TEMPLATE) from None
        logger.info("fetched %s in %.2f s", remote.label, time.monotonic() - started)

    # --- eviction ---

    def total_size(self) -> int:
        """Bytes held by all cached repositories."""
        return sum(size for _, size, _ in self._entries())

    def _entries(self) -> list[tuple[float, int, str]]:
        """(last used, size, key) of every cached repository."""
        entries = []
        try:
            children = list(self.layout.repositories.iterdir())
        except FileNotFoundError:
            return []
        for child in children:
            if _KEY.fullmatch(child.name) and not child.is_symlink() and child.is_dir():
                entries.append((last_used(child), tree_size(child), child.name))
        return entries

    def evict(self, keep: str | None = None, *, reserve: bool = False) -> list[str]:
        """Remove least recently used repositories no review holds until the total fits
        (and, with `reserve`, until the file system has FETCH_RESERVE_BYTES free).

        Returns the keys removed. Another evictor already at work makes this a no-op.
        """
        self._ensure_layout()
        fd = lock(self.layout.evict_lock, shared=False, timeout=0)
        if fd is None:
            return []
        try:
            self._empty_trash()
            entries = self._entries()
            total = sum(size for _, size, _ in entries)
            removed: list[str] = []
            for _, size, key in sorted(entries):
                if total <= self.max_bytes and not (reserve and self._short_of_space()):
                    break
                if key != keep and self._remove(key):
                    total -= size
                    removed.append(key)
            return removed
        finally:
            os.close(fd)

    def trim_for_index(self, index_dir: Path) -> None:
        """Before a search index is built in `index_dir` (a repository's `index/` folder):
        mark its repository used and trim the cache, keeping it. A pull request's fetch trims
        the cache too, but a local repository's index grows it with no fetch at all."""
        repository = index_dir.parent
        try:
            last_used_file_of(repository).touch(mode=0o600, exist_ok=True)
            removed = self.evict(keep=repository.name)
        except OSError:
            logger.warning("the repository cache could not be trimmed to its size bound")
            return
        if removed:
            logger.info("evicted %d cached repositories before an index build", len(removed))

    def _short_of_space(self) -> bool:
        try:
            status = os.statvfs(self.root)
        except OSError:
            return False
        return status.f_bavail * status.f_frsize < FETCH_RESERVE_BYTES

    def _evict_quietly(self, keep: str, *, reserve: bool = False) -> None:
        try:
            removed = self.evict(keep=keep, reserve=reserve)
        except OSError:
            logger.warning("the repository cache could not be trimmed to its size bound")
            return
        if removed:
            logger.info("evicted %d cached repositories", len(removed))

    def _remove(self, key: str) -> bool:
        """Move a repository nobody uses to the trash and delete it."""
        fd = lock(self.layout.use_lock(key), shared=False, timeout=0)
        if fd is None:
            return False  # a review is reading it
        try:
            target = self.layout.trash / f"{key}-{secrets.token_hex(8)}"
            try:
                self.layout.repository(key).rename(target)
            except FileNotFoundError:
                return False
        finally:
            os.close(fd)
        shutil.rmtree(target, ignore_errors=True)
        return True

    def _empty_trash(self) -> None:
        for child in self.layout.trash.iterdir():
            shutil.rmtree(child, ignore_errors=True)


# --- healing: what a killed or failed git process leaves behind ---

# --- git helpers (all run with git.py's hardened environment) ---


def _base_ref(branch: str) -> str:
    # Hashed, so branches "a" and "a/b" (one after the other on the server) never collide.
    return f"refs/pr-review/base/{hashlib.sha256(branch.encode('utf-8')).hexdigest()[:40]}"


def _check(
    git_dir: Path, args: list[str], input_bytes: bytes | None = None
) -> subprocess.CompletedProcess[bytes]:
    """A local check of the cache: a git that fails is a "no" (check=False); one that cannot
    start (EMFILE) or finish in time is a cache not usable now, a contract error (not 500)."""
    try:
        return run_git(
            git_dir, args, input_bytes=input_bytes, timeout=LOCAL_GIT_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        raise CacheFailure(CACHE_BROKEN) from None


def _has_commits(git_dir: Path, shas: Iterable[str]) -> bool:
    wanted = list(shas)
    found = _check(
        git_dir,
        ["cat-file", "--batch-check=%(objecttype)"],
        input_bytes="".join(f"{sha}\n" for sha in wanted).encode("ascii"),
    )
    return found.returncode == 0 and found.stdout.split() == [b"commit"] * len(wanted)


def _git_accepts_branch(git_dir: Path, branch: str) -> bool:
    # The name cannot start with "-" (is_valid_branch_name); this subcommand has no
    # --end-of-options.
    found = _check(git_dir, ["check-ref-format", "--branch", branch])
    return found.returncode == 0 and found.stdout.strip() == branch.encode("utf-8")


def _resolve(git_dir: Path, ref: str) -> str | None:
    found = _check(
        git_dir, ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"]
    )
    sha = found.stdout.decode("ascii", "replace").strip()
    return sha if found.returncode == 0 and is_sha(sha) else None


def _verify(git_dir: Path, remote: Remote, metadata: PullRequestMetadata) -> None:
    """The fetched head ref must be the metadata's head, and the base commit must be present."""
    if _resolve(git_dir, remote.local_head_ref) != metadata.head_sha:
        raise CacheFailure(HEAD_MOVED_TEMPLATE)
    if not _has_commits(git_dir, [metadata.base_sha]):
        raise CacheFailure(BASE_MISSING_TEMPLATE)


# --- the entry point ---


async def prepare_in_thread(prepare: Callable[[], Lease]) -> Lease:
    """Run `prepare` (a cache's `prepare` or `prepare_remote`, its arguments bound) in a worker
    thread; if the caller is cancelled, release what it returns."""
    task = asyncio.ensure_future(asyncio.to_thread(prepare))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.add_done_callback(_release_abandoned)
        raise


@asynccontextmanager
async def pinned_change(
    prepare: Callable[[], Lease], info: PullRequestInfo, metadata: PullRequestMetadata
) -> AsyncIterator[PreparedChange]:
    """A change whose commits `prepare` fetches and pins, held until exit: every forge's last
    step of opening one."""
    lease = await prepare_in_thread(prepare)
    try:
        yield PreparedChange(info=info, metadata=metadata, git_dir=lease.git_dir)
    finally:
        lease.release()


def _release_abandoned(task: asyncio.Future[Lease]) -> None:
    if not task.cancelled() and task.exception() is None:
        task.result().release()


@asynccontextmanager
async def pinned_remote(
    settings: Settings, remote: Remote, info: PullRequestInfo, metadata: PullRequestMetadata
) -> AsyncIterator[PreparedChange]:
    """`pinned_change` of a change fetched from `remote` into the settings' cache."""
    prepare = functools.partial(RepositoryCache(settings).prepare_remote, remote, metadata)
    async with pinned_change(prepare, info, metadata) as prepared:
        yield prepared


class _ChangeRef(Protocol):
    """A forge's reference to one change, as opening it needs it."""

    @property
    def info(self) -> PullRequestInfo: ...


F = TypeVar("F", bound=_ChangeRef)
C = TypeVar("C", bound=OriginClient[Any])


@dataclass(frozen=True)
class ChangeOpener(Generic[F, C]):
    """How a token forge's change is opened, in its own functions: its URL parsed
    (`parse(url, settings)`), its client made (`client(settings)`), its metadata read
    (`metadata(ref, settings, client)`) and its remote made (`remote(ref, settings, token)`)."""

    parse: Callable[[str, Settings], F]
    client: Callable[[Settings], C]
    metadata: Callable[[F, Settings, C], Awaitable[PullRequestMetadata]]
    remote: Callable[[F, Settings, SecretStr | None], Remote]

    @asynccontextmanager
    async def open(
        self, url: str, settings: Settings, client: C | None = None
    ) -> AsyncIterator[PreparedChange]:
        """Parse the URL, read the metadata, fetch and pin both commits; hold them until exit.

        `client` is the API client of the review's identity (None: a short-lived one with the
        forge's token setting); git fetches with the same token."""
        ref = self.parse(url, settings)
        async with lent_or_own(client, lambda: self.client(settings)) as own:
            metadata = await self.metadata(ref, settings, own)
            token = own.token
        remote = self.remote(ref, settings, token)
        async with pinned_remote(settings, remote, ref.info, metadata) as prepared:
            yield prepared
