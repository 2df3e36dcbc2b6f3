"""Finishing a repository's search index after a one-shot review, in a process of its own.

A one-shot process (the CLI, a GitHub Action step) ends seconds after its review, while the
search index of a large repository takes minutes to build: each process would add a few
transactions before it exits, and the next review's first search would fall back to
`git grep` again and again. So, as `git gc --auto` detaches its housekeeping, a review that
made its own repository store (`one_shot_store`: run_review without a shared store, as the CLI
calls it) hands each build it leaves unfinished to a detached process (`hand_off`) that
completes it at low priority and exits. The index's build lock keeps one
builder per repository across every process (a service's, a worker's, another hand-off's).

The process runs this module (`main`) with the repository's git directory, the head and the
store's smallest indexed size as arguments, and an environment of its own: the settings the
build needs, set explicitly, and none of the parent's secrets (no provider key, no token).
`PR_REVIEW_BACKGROUND_INDEX=false` turns the hand-off off.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

from pr_review_api.git.search_index.folder import build_lock
from pr_review_api.git.store import RepositoryStore
from pr_review_api.git_runner import is_sha
from pr_review_api.loop.workspace import repository_store
from pr_review_api.settings import Settings, load_settings

# How long the process waits for the build lock its parent (closing) still holds.
LOCK_WAIT_SECONDS = 30.0
# How long one background build may run before the process gives up (the index keeps what it
# committed, and the next hand-off goes on from there).
MAX_BUILD_SECONDS = 3600.0
# Builds one process starts for a head before it gives up (a build stops early on an error).
MAX_ATTEMPTS = 3
# The only variables of the parent's environment the process keeps: what git and Python need.
_KEPT_VARIABLES = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT")


@contextlib.asynccontextmanager
async def one_shot_store(settings: Settings) -> AsyncIterator[RepositoryStore]:
    """A store of one review, closed at its end; its unfinished builds are then handed off.

    Not when the review was interrupted or ran out of time (cancelled): nothing of it is left
    running then.
    """
    made = repository_store(settings)
    interrupted = False
    try:
        yield made
    except asyncio.CancelledError:
        interrupted = True
        raise
    finally:
        made.close()
        if not interrupted:  # the process ends now: the builds go on in processes of their own
            hand_off(settings, made)


def hand_off(settings: Settings, store: RepositoryStore) -> list[subprocess.Popen[bytes]]:
    """Start a detached build for each index the closed `store` left short of its head."""
    if not settings.pr_review_background_index or store.cache_dir is None:
        return []
    started = []
    for git_dir, head_sha in store.indexes.incomplete_heads():
        with contextlib.suppress(OSError):  # no process, no harm: the next review goes on
            started.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        __name__,
                        os.fspath(git_dir),
                        head_sha,
                        str(store.indexes.min_bytes),
                    ],
                    cwd=store.cache_dir,  # no `.env` of a checkout under review is read there
                    env=_environment(settings),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    start_new_session=True,  # outlives the review, and its terminal's signals
                )
            )
    return started


def _environment(settings: Settings) -> dict[str, str]:
    kept = {name: os.environ[name] for name in _KEPT_VARIABLES if name in os.environ}
    return kept | {
        "PR_REVIEW_CACHE_DIR": os.fspath(settings.pr_review_cache_dir),
        "PR_REVIEW_CACHE_MAX_BYTES": str(settings.pr_review_cache_max_bytes),
        "PR_REVIEW_MAX_TREE_ENTRIES": str(settings.pr_review_max_tree_entries),
        "PR_REVIEW_MAX_LINK_HOPS_TOTAL": str(settings.pr_review_max_link_hops_total),
        "PR_REVIEW_MAX_LINK_TARGET_BYTES": str(settings.pr_review_max_link_target_bytes),
        "PR_REVIEW_MAX_INDEX_BYTES": str(settings.pr_review_max_index_bytes),
        "PR_REVIEW_BACKGROUND_INDEX": "false",  # a hand-off never hands off again
    }


def build(settings: Settings, git_dir: Path, head_sha: str, min_bytes: int) -> bool:
    """Complete `head_sha` in the repository's search index; whether it now is."""
    with repository_store(settings) as store:
        store.indexes.min_bytes = min_bytes
        folder = store.index_dir(git_dir)
        if folder is None or not folder.is_dir():
            return False  # evicted since: nothing to finish
        _wait_for_lock(folder)
        snapshot = store.snapshots.get(git_dir, head_sha, store.work())
        deadline = time.monotonic() + MAX_BUILD_SECONDS
        for _ in range(MAX_ATTEMPTS):
            if store.indexes.complete_index(git_dir, snapshot, head_sha) is not None:
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not store.indexes.building(git_dir):
                return False  # another process builds it, or this build is over
            store.indexes.wait(git_dir, remaining)
        return store.indexes.complete_index(git_dir, snapshot, head_sha) is not None


def _wait_for_lock(folder: Path) -> None:
    deadline = time.monotonic() + LOCK_WAIT_SECONDS
    while time.monotonic() < deadline:
        with build_lock(folder) as free:
            if free:
                return
        time.sleep(0.2)


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 3 or not is_sha(arguments[1]) or not arguments[2].isdigit():
        return 2
    with contextlib.suppress(OSError, AttributeError):
        os.nice(19)  # the lowest: a review that starts meanwhile comes first (threads inherit it)
    try:
        settings = load_settings()
        done = build(settings, Path(arguments[0]), arguments[1], int(arguments[2]))
    except Exception:  # detached, with nobody to tell: the index stays as it is
        return 1
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
