"""list_repository_files pages against `git ls-files`.

The first call of a review pays for indexing the head tree (a new PinnedRepository on a head
this process has not seen): the first head of a repository in a process, then other new
heads of it; every later page comes from that index. A repository never seen is measured
`--runs` times more, each in a store of its own with no cache directory, two ways
interleaved: the index made first (as a review's preparation does), and an early view
(`PinnedRepository.open(..., early=True)`), whose first page is read from the tree objects
while the index is made (git/first_page.py), each against `ls-tree -r` timed just before it.
References, measured in this run: `git ls-files -z` in the checkout (it reads the index file) and
`git ls-tree -r --name-only -z <head>` (it reads the tree object, as the tool must).

On your own repository (`--repo PATH`) the new heads are written to a scratch repository that
borrows its objects, and `git ls-files` runs in a temporary clone (`--no-checkout`: skipped).

    uv run python -m bench.listing [--quick] [--repo auto|kernel|synthetic|PATH] [--runs N]
        [--base REV] [--head REV] [--no-checkout]
"""

from __future__ import annotations

import importlib
import inspect
import statistics
import time
from collections.abc import Callable
from functools import partial

from bench.common import (
    BenchRepo,
    Report,
    head_checkout,
    log,
    make_head,
    median_seconds,
    open_pinned,
    parser,
    repository_for,
    run_quietly,
    runs_for,
    skipped_checkout,
    writable_repository,
)
from pr_review_api.tools import ListFilesArguments, list_repository_files


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    repo = writable_repository(repository_for(args))
    runs = runs_for(args, full=9)
    checkout = head_checkout(repo)
    references: list[tuple[str, float]] = []
    if checkout is not None:
        ls_files = partial(run_quietly, ["git", "ls-files", "-z"], checkout)
        references.append(("git ls-files", median_seconds(ls_files, runs)))
    ls_tree = partial(
        run_quietly, ["git", "ls-tree", "-r", "--name-only", "-z", repo.head_sha], repo.git_dir
    )
    references.append(("git ls-tree -r", median_seconds(ls_tree, runs)))
    report = Report(f"list_repository_files vs git ls-files ({repo.describe()})", [])
    if checkout is None:
        skipped_checkout(report, "every figure: vs git ls-files")

    # Heads never indexed before: the first is the first of the repository in this process,
    # the others may build on an index already made (one fresh head per run).
    heads = [make_head(repo, variant=1000 + n) for n in range(runs + 1)]
    first_page: list[float] = []
    for head in heads:
        started = time.perf_counter()
        fresh = open_pinned(repo.git_dir, repo.base_sha, head)
        list_repository_files(fresh, ListFilesArguments())
        first_page.append(time.perf_counter() - started)
    for name, reference in references:
        label = "first page, first head of the repository (open + index + page)"
        report.add(label, first_page[0], name, reference)
    for name, reference in references:
        label = "first page, another new head (open + index + page)"
        report.add(label, statistics.median(first_page[1:]), name, reference)

    _never_seen(report, repo, runs, ls_tree)

    pinned = open_pinned(repo.git_dir, repo.base_sha, repo.head_sha)
    files = pinned.snapshot.files
    deep_cursor = files[len(files) * 9 // 10]
    directory = deep_cursor.rsplit("/", 2)[0] if deep_cursor.count("/") >= 2 else ""
    log(f"deep cursor {deep_cursor!r}, directory {directory!r}")
    pages = [
        ("first page (100) after the first call", ListFilesArguments()),
        ("first page (200)", ListFilesArguments(limit=200)),
        ("deep page (cursor at 90%)", ListFilesArguments(cursor=deep_cursor)),
        ("deep page inside a directory", ListFilesArguments(path=directory, cursor=deep_cursor)),
    ]
    for label, arguments in pages:
        ours = median_seconds(partial(list_repository_files, pinned, arguments), runs * 5)
        report.add(label, ours, *references[0])
    report.print()


def _never_seen(report: Report, repo: BenchRepo, runs: int, ls_tree: Callable[[], object]) -> None:
    """The first page of a repository never seen, `runs` times: each in a store of its own
    with no cache directory, on a head of its own, `ls-tree -r` timed just before it. An
    early view (`open(..., early=True)`) serves the page while the index is made, and is
    then waited for, untimed; the same with the index made first, interleaved."""
    try:
        store_module = importlib.import_module("pr_review_api.git.store")
        repository = importlib.import_module("pr_review_api.git.repository")
    except ImportError:
        return
    early_supported = "early" in inspect.signature(repository.PinnedRepository.open).parameters
    samples: dict[bool, list[float]] = {True: [], False: []}
    references: list[float] = []
    for run in range(runs):
        for early in (True, False) if early_supported else (False,):
            head = make_head(repo, variant=2000 + 2 * run + early)
            started = time.perf_counter()
            ls_tree()
            references.append(time.perf_counter() - started)
            store = store_module.RepositoryStore(threads=2)
            started = time.perf_counter()
            options = {"early": True} if early else {}
            fresh = repository.PinnedRepository.open(
                repo.git_dir, repo.base_sha, head, store=store, **options
            )
            list_repository_files(fresh, ListFilesArguments())
            samples[early].append(time.perf_counter() - started)
            _ = fresh.snapshot  # the index, untimed: the next run starts on a quiet process
            store.close()
    for early, label in ((False, "index first"), (True, "early view, index made meanwhile")):
        if samples[early]:
            figure = f"first page, a repository never seen, {label} (median, range)"
            report.add_samples(figure, samples[early], "git ls-tree -r", references)


if __name__ == "__main__":
    main()
