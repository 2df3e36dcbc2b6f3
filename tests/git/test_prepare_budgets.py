"""Preparing a hostile repository costs what its budgets allow, and stops at its deadline.

A link bomb (thousands of links, each resolving through ~40 hops of 4 KB `d/../d/..` targets)
and a wide tree (200k entries in a few megabytes of git data) are untrusted input like any
other: indexing them ends with `invalid_repository` (a budget, `RepositoryTooLarge`) or
`review_timeout` (the deadline) in bounded time and memory, and a warm review keeps its
threads while such work runs.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.errors import ReviewTimeout
from pr_review_api.git import ls_tree
from pr_review_api.git.limits import UNLIMITED, PrepareLimits, RepositoryTooLarge
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.store import RepositoryStore
from tests.environment import process_environment, review_variables
from tests.gitrepo import GitRepo, git

# Repositories built to the size of a budget, and CLI processes: the default run, not --fast.
pytestmark = pytest.mark.e2e


CHAIN = 39  # links a bomb link passes through: 40 hops, MAX_SYMLINK_HOPS
PADDING = "d/../" * 800  # 4 KB of components that go nowhere


def hash_blob(repo: GitRepo, content: bytes) -> str:
    return git(repo.git_dir, "hash-object", "-w", "--stdin", input_bytes=content)


def commit_entries(repo: GitRepo, lines: list[bytes]) -> str:
    tree = git(repo.git_dir, "mktree", "-z", input_bytes=b"\0".join(lines) + b"\0")
    return git(repo.git_dir, "commit-tree", tree, "-m", "hostile")


def link_bomb(repo: GitRepo, links: int) -> str:
    """A commit whose `links` links each take 40 hops of 4 KB targets to reach `f`."""
    file_oid = hash_blob(repo, b"the end\n")
    inner = git(repo.git_dir, "mktree", input_bytes=f"100644 blob {file_oid}\tx\n".encode())
    lines = [f"100644 blob {file_oid}\tf".encode(), f"040000 tree {inner}\td".encode()]
    for hop in range(CHAIN):
        following = f"c{hop + 1}" if hop + 1 < CHAIN else "f"
        target = hash_blob(repo, (PADDING + following).encode())
        lines.append(f"120000 blob {target}\tc{hop}".encode())
    entry = hash_blob(repo, (PADDING + "c0").encode())
    lines += [f"120000 blob {entry}\tbomb{n:05}".encode() for n in range(links)]
    return commit_entries(repo, lines)


def wide_tree(repo: GitRepo, entries: int) -> str:
    """A commit of `entries` files in one directory, all the same blob."""
    oid = hash_blob(repo, b"same\n")
    return commit_entries(repo, [f"100644 blob {oid}\tf{n:07}".encode() for n in range(entries)])


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> tuple[GitRepo, str, str]:
    repo = GitRepo(tmp_path_factory.mktemp("budgets") / "repo")
    return repo, link_bomb(repo, 3000), wide_tree(repo, 200_000)


def test_a_link_bomb_exceeds_its_link_budget_quickly(
    hostile: tuple[GitRepo, str, str],
) -> None:
    repo, bomb, _ = hostile
    # A budget that did not stop the bomb would meet this deadline: review_timeout instead.
    with (
        RepositoryStore(limits=PrepareLimits()) as store,
        pytest.raises(RepositoryTooLarge) as raised,
    ):
        PinnedRepository.open(
            repo.git_dir, bomb, bomb, store=store, work=store.work(time.monotonic() + 60)
        )
    assert raised.value.code == "invalid_repository"
    assert "PR_REVIEW_MAX_LINK" in raised.value.message


def test_a_link_bomb_stops_at_its_deadline(hostile: tuple[GitRepo, str, str]) -> None:
    repo, bomb, _ = hostile
    with RepositoryStore(limits=UNLIMITED) as store:
        started = time.monotonic()
        with pytest.raises(ReviewTimeout):
            PinnedRepository.open(
                repo.git_dir, bomb, bomb, store=store, work=store.work(started + 1.0)
            )
        elapsed = time.monotonic() - started
    assert elapsed < 4, f"{elapsed:.1f} s for a 1 s deadline"


def test_a_wide_tree_exceeds_its_entry_budget_in_bounded_memory(
    hostile: tuple[GitRepo, str, str],
) -> None:
    repo, _, wide = hostile
    limits = PrepareLimits(max_tree_entries=50_000)
    with RepositoryStore(limits=limits) as store:
        tracemalloc.start()
        try:
            with pytest.raises(RepositoryTooLarge) as raised:
                PinnedRepository.open(repo.git_dir, wide, wide, store=store)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert "PR_REVIEW_MAX_TREE_ENTRIES" in raised.value.message
    assert peak < 64 * 1024**2, f"peak {peak / 1024**2:.0f} MiB refusing 200k entries"


def test_a_wide_tree_over_its_entry_budget_is_refused_before_most_of_it_is_parsed(
    hostile: tuple[GitRepo, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo, _, wide = hostile
    parsed: list[int] = []
    parse = ls_tree.parse_records

    def counting(output: bytes, *args: Any) -> None:
        parsed.append(output.count(b"\0"))
        parse(output, *args)

    monkeypatch.setattr(ls_tree, "parse_records", counting)
    limits = PrepareLimits(max_tree_entries=50_000)
    with RepositoryStore(limits=limits) as store, pytest.raises(RepositoryTooLarge):
        PinnedRepository.open(repo.git_dir, wide, wide, store=store)
    # Counted past the budget, parsed at most its look-ahead share (here: nothing, as the
    # first chunk of git's output already holds more than that share).
    assert sum(parsed) <= limits.max_tree_entries // ls_tree.LOOK_AHEAD_SHARE
    parsed.clear()
    with RepositoryStore(limits=PrepareLimits()) as store:
        pinned = PinnedRepository.open(repo.git_dir, wide, wide, store=store)
    assert sum(parsed) == 200_000  # read ahead past 1/8 of the budget, then parsed whole
    assert len(pinned.snapshot.files) == 200_000


def test_a_wide_tree_within_its_budgets_is_indexed(
    hostile: tuple[GitRepo, str, str],
) -> None:
    repo, _, wide = hostile
    with RepositoryStore(limits=PrepareLimits()) as store:
        pinned = PinnedRepository.open(repo.git_dir, wide, wide, store=store)
        assert len(pinned.snapshot.files) == 200_000
    small = PrepareLimits(max_index_bytes=8 * 1024**2)
    with RepositoryStore(limits=small) as store, pytest.raises(RepositoryTooLarge) as raised:
        PinnedRepository.open(repo.git_dir, wide, wide, store=store)
    assert "PR_REVIEW_MAX_INDEX_BYTES" in raised.value.message


def test_a_warm_review_is_not_starved_while_link_bombs_run(
    hostile: tuple[GitRepo, str, str], tmp_path: Path
) -> None:
    repo, bomb, _ = hostile
    other = GitRepo(tmp_path / "other")  # another pull request's repository
    warm = other.commit_files({"a.py": "print('warm')\n"})
    reviews = 4  # the service's PR_REVIEW_MAX_CONCURRENT_REVIEWS here

    async def scenario(store: RepositoryStore) -> None:
        cancels = [threading.Event() for _ in range(reviews - 1)]
        bombs = [
            asyncio.ensure_future(
                store.run(
                    PinnedRepository.open,
                    repo.git_dir,
                    bomb,
                    bomb,
                    store=store,
                    work=store.work(None, cancel),
                )
            )
            for cancel in cancels
        ]
        await asyncio.sleep(0.2)  # every bomb is indexing now
        # Starved behind the unbounded bombs, the warm review would meet its own deadline.
        limit = store.work(time.monotonic() + 60)
        pinned = await store.run(
            PinnedRepository.open, other.git_dir, warm, warm, store=store, work=limit
        )
        reads = [store.run(pinned.resolve_file, "a.py") for _ in range(8)]  # one round's tools
        await asyncio.gather(*reads)
        assert not any(task.done() for task in bombs)  # the bombs were still running
        for cancel in cancels:  # the reviews' deadlines pass
            cancel.set()
        # Unbounded, a bomb that ignored its cancel would run on past this generous bound.
        outcomes = await asyncio.wait_for(asyncio.gather(*bombs, return_exceptions=True), 60)
        assert all(isinstance(outcome, ReviewTimeout) for outcome in outcomes)

    with RepositoryStore(limits=UNLIMITED, threads=reviews + 8) as store:
        asyncio.run(scenario(store))


def test_a_closed_store_reads_through_one_shot_processes(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    head = repo.commit_files({"a.txt": "one\ntwo\n"})
    store = RepositoryStore()
    pinned = PinnedRepository.open(repo.git_dir, head, head, store=store)
    store.close()
    store.close()  # idempotent
    file = pinned.resolve_file("a.txt")
    assert pinned.read_source(file) == "one\ntwo\n"
    assert file.entry is not None
    assert pinned.line_counts([file]) == {file.entry.oid: 2}


def cli_review(repo: GitRepo, sha: str, cwd: Path, **env: str) -> tuple[int, str, float]:
    environment = process_environment(
        review_variables(
            cache=cwd / "cache", OPENCODE_API_KEY="test-key", OPENCODE_BASE_URL="http://127.0.0.1:9"
        )
    )
    environment |= env
    argv = [sys.executable, "-m", "pr_review_api.cli", "review", "--repo", str(repo.path)]
    argv += ["--base", sha, "--head", sha, "--format", "json"]
    started = time.monotonic()
    done = subprocess.run(
        argv, capture_output=True, text=True, env=environment, cwd=cwd, timeout=120, check=False
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def test_the_cli_prints_review_timeout_on_time_during_a_link_bomb(
    hostile: tuple[GitRepo, str, str], tmp_path: Path
) -> None:
    repo, bomb, _ = hostile
    unbounded = {  # so only the deadline can stop the indexing
        "PR_REVIEW_MAX_LINK_HOPS_TOTAL": str(1 << 60),
        "PR_REVIEW_MAX_LINK_TARGET_BYTES": str(1 << 60),
    }
    status, output, elapsed = cli_review(
        repo, bomb, tmp_path, REVIEW_TIMEOUT_SECONDS="2", **unbounded
    )
    assert "review_timeout" in output
    assert status != 0
    assert elapsed < 12, f"{elapsed:.1f} s for a 2 s review timeout"  # process start included


def test_the_cli_refuses_a_link_bomb_as_invalid_repository(
    hostile: tuple[GitRepo, str, str], tmp_path: Path
) -> None:
    repo, bomb, _ = hostile
    status, output, _ = cli_review(repo, bomb, tmp_path)
    assert status == 2
    assert "invalid_repository" in output
    assert "PR_REVIEW_MAX_LINK" in output
    assert str(repo.path) not in output  # no local path in the message
