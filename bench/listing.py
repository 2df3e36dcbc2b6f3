"""list_repository_files pages against `git ls-files`.

The first call of a review pays for indexing the head tree (a new PinnedRepository on a head
this process has not seen): the first head of a repository in a process, then other new
heads of it; every later page comes from that index. References, measured in
this run: `git ls-files -z` in the checkout (it reads the index file) and
`git ls-tree -r --name-only -z <head>` (it reads the tree object, as the tool must).

    uv run python -m bench.listing [--quick] [--repo kernel|synthetic] [--runs N]
"""

from __future__ import annotations

import statistics
import time
from functools import partial

from bench.common import (
    Report,
    log,
    make_head,
    median_seconds,
    open_pinned,
    parser,
    repository_for,
    run_quietly,
    runs_for,
)
from pr_review_api.tools import ListFilesArguments, list_repository_files


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    repo = repository_for(args)
    runs = runs_for(args, full=9)
    ls_files = median_seconds(partial(run_quietly, ["git", "ls-files", "-z"], repo.worktree), runs)
    ls_tree = median_seconds(
        partial(
            run_quietly, ["git", "ls-tree", "-r", "--name-only", "-z", repo.head_sha], repo.git_dir
        ),
        runs,
    )
    report = Report(f"list_repository_files vs git ls-files ({repo.describe()})", [])

    # Heads never indexed before: the first is the first of the repository in this process,
    # the others may build on an index already made (one fresh head per run).
    heads = [make_head(repo.worktree, repo.base_sha, variant=1000 + n) for n in range(runs + 1)]
    first_page: list[float] = []
    for head in heads:
        started = time.perf_counter()
        fresh = open_pinned(repo.git_dir, repo.base_sha, head)
        list_repository_files(fresh, ListFilesArguments())
        first_page.append(time.perf_counter() - started)
    label = "first page, first head of the repository (open + index + page)"
    report.add(label, first_page[0], "git ls-files", ls_files)
    report.add(label, first_page[0], "git ls-tree -r", ls_tree)
    label = "first page, another new head (open + index + page)"
    report.add(label, statistics.median(first_page[1:]), "git ls-files", ls_files)
    report.add(label, statistics.median(first_page[1:]), "git ls-tree -r", ls_tree)

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
        report.add(label, ours, "git ls-files", ls_files)
    report.print()


if __name__ == "__main__":
    main()
