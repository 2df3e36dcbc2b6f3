"""search_repository while the head's search index is built in part, against `git grep`.

A process that starts while another's build of the index runs finds the head stored in
part. This script stores the head's search blobs, in path order as a build does, into a fresh
index up to a share of the head's text (`--shares`), holding the build lock as another
process's build would, and at each share measures a new store's first search of the rare
literal (`--runs` times, a store of its own each, its head opened untimed), interleaved with
`git grep -F -n -I -z` in a checkout and over the head SHA. Below the share that pays
(`PARTIAL_MIN_SHARE`) the search is `git grep` itself.

    uv run python -m bench.partial [--quick] [--repo auto|kernel|synthetic|PATH] [--runs N]
        [--shares 0.25,0.5,0.75,0.9]
"""

from __future__ import annotations

import importlib
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import (
    BenchRepo,
    Report,
    head_checkout,
    log,
    parser,
    repository_for,
    runs_for,
    skipped_checkout,
)
from bench.search import git_grep
from pr_review_api.git.blobs import stream_blobs
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.search_index.folder import build_lock, current_generation
from pr_review_api.git.search_index.schema import open_writer, write_blobs
from pr_review_api.git.store import RepositoryStore
from pr_review_api.tools import SearchArguments, search_repository

_BATCH_BYTES = 4 * 1024**2  # a build's transaction (search_index/build.py)


def main() -> None:
    arguments = parser(__doc__ or "")
    arguments.add_argument("--shares", default="0.25,0.5,0.75,0.9")
    args = arguments.parse_args()
    repo = repository_for(args)
    runs = runs_for(args, full=3)
    shares = [float(share) for share in args.shares.split(",")]
    checkout = head_checkout(repo)
    report = Report(f"search_repository, the index built in part ({repo.describe()})", [])
    if checkout is None:
        skipped_checkout(report, "vs git grep in a checkout")
    with tempfile.TemporaryDirectory(prefix="pr-review-bench-partial-") as scratch:
        cache = Path(scratch) / "cache"
        _measure(report, repo, cache, shares, runs, checkout)
    report.print()


def _store(cache: Path) -> RepositoryStore:
    store = RepositoryStore(cache_dir=cache)
    # As a kernel head's: indexed (however small the repository), never completed inline.
    store.indexes.min_bytes, store.indexes.inline_bytes = 0, 0
    return store


def _measure(
    report: Report,
    repo: BenchRepo,
    cache: Path,
    shares: list[float],
    runs: int,
    checkout: Path | None,
) -> None:
    schedule = importlib.import_module("pr_review_api.git.search_index.schedule")
    store = _store(cache)
    folder = store.index_dir(repo.git_dir)
    assert folder is not None
    folder.mkdir(parents=True, exist_ok=True)
    with build_lock(folder) as mine:  # "another process's build": this process stores blobs
        assert mine
        snapshot = store.snapshot(repo.git_dir, repo.head_sha)
        blobs = list(dict(snapshot.search_blobs()).items())
        total = sum(size for _, size in blobs)
        store.close()
        connection = open_writer(current_generation(folder))
        stored_bytes, position = 0, 0
        for share in shares:
            end = position
            while end < len(blobs) and stored_bytes + blobs[end][1] <= share * total:
                stored_bytes += blobs[end][1]
                end += 1
            started = time.perf_counter()
            _store_blobs(repo.git_dir, connection, [oid for oid, _ in blobs[position:end]])
            log(f"stored up to {share:.0%} of {total / 1e6:,.0f} MB in "
                f"{time.perf_counter() - started:.1f} s")  # fmt: skip
            position = end
            ours, in_checkout, over_sha = [], [], []
            for _ in range(runs):
                if checkout is not None:
                    in_checkout.append(_timed(lambda: git_grep(checkout, repo.rare_literal, None)))
                over_sha.append(
                    _timed(lambda: git_grep(repo.git_dir, repo.rare_literal, repo.head_sha))
                )
                ours.append(_first_search(cache, repo))
            used = "index and git" if share >= schedule.PARTIAL_MIN_SHARE else "git grep"
            figure = f"first search, {share:.0%} of the text stored ({used})"
            if in_checkout:
                report.add_samples(figure, ours, "git grep in a checkout", in_checkout)
            report.add_samples(figure, ours, "git grep <sha>", over_sha)
            log(f"{figure}: {statistics.median(ours) * 1000:.0f} ms")
        connection.close()


def _store_blobs(git_dir: Path, connection: object, oids: list[str]) -> None:
    batch: list[tuple[str, bytes]] = []
    size = 0
    for oid, data in stream_blobs(git_dir, oids):
        batch.append((oid, data))
        size += len(data)
        if size >= _BATCH_BYTES:
            write_blobs(connection, batch)  # type: ignore[arg-type]
            batch, size = [], 0
    if batch:
        write_blobs(connection, batch)  # type: ignore[arg-type]


def _first_search(cache: Path, repo: BenchRepo) -> float:
    """A new store's first search of the rare literal, its head opened first (untimed)."""
    store = _store(cache)
    try:
        pinned = PinnedRepository.open(repo.git_dir, repo.base_sha, repo.head_sha, store=store)
        started = time.perf_counter()
        search_repository(pinned, SearchArguments(query=repo.rare_literal, limit=100))
        return time.perf_counter() - started
    finally:
        store.close()


def _timed(action: object) -> float:
    started = time.perf_counter()
    action()  # type: ignore[operator]
    return time.perf_counter() - started


if __name__ == "__main__":
    main()
