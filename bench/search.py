"""search_repository against `git grep -F -n -I` on the same tree.

Two references, both measured in this run and read to the end through a pipe:
`git grep -F -n -I -z -e Q` in the working tree (a checkout), and the same with the head SHA,
which reads the tree object from the object store, as search_repository must (a review never
has a checkout). A common literal (`return`: every reference prints hundreds of thousands of
lines, the tool stops at its 100-match cap) and a rare one (three hits: both scan everything),
over the whole tree and under one directory. The first search of a large repository in a
process runs `git grep` while the search text is filled in the background; it is reported on
its own line, and the other figures are taken once the text is ready. Before it, the same
first search is measured `--runs`/2 times (at least once) in a fresh store with an empty cache
directory each, as a process new to the repository makes, each right after a `git grep <sha>`
(the page cache warmed by an untimed one first): median and range against that reference.

On your own repository (`--repo PATH`) the rare literal is one absent from the head, so the
search ends with no match; the common one is `e`; the directory is the top-level one holding
the most bytes; the checkout reference runs in a temporary clone (`--no-checkout`: skipped).

    uv run python -m bench.search [--quick] [--repo auto|kernel|synthetic|PATH] [--runs N]
        [--base REV] [--head REV] [--no-checkout]
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from functools import partial
from pathlib import Path

from bench.common import (
    BenchRepo,
    Report,
    bench_env,
    git,
    head_checkout,
    log,
    median_seconds,
    open_pinned,
    parser,
    repository_for,
    runs_for,
    skipped_checkout,
    wait_for_search_index,
)
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.store import RepositoryStore
from pr_review_api.tools import SearchArguments, search_repository


def git_grep(cwd: Path, query: str, revision: str | None, path: str = "") -> int:
    """Run the reference and read its output to the end; the number of lines it printed."""
    argv = ["git", "grep", "-F", "-n", "-I", "-z", "-e", query]
    if revision:
        argv.append(revision)
    if path:
        argv += ["--", path]
    done = subprocess.run(argv, cwd=cwd, env=bench_env(), stdout=subprocess.PIPE, check=False)
    return done.stdout.count(b"\n")


def scoped_directory(repo: BenchRepo) -> str:
    """A top-level directory: the one holding a rare hit (`drivers` on the kernel), or on a
    repository without hits the one holding the most bytes; "" when there is none."""
    if repo.planted:
        pinned = open_pinned(repo.git_dir, repo.base_sha, repo.head_sha)
        arguments = SearchArguments(query=repo.rare_literal, limit=100)
        hits = search_repository(pinned, arguments)["matches"]
        tops = sorted({hit["path"].split("/")[0] for hit in hits if "/" in hit["path"]})
        return "drivers" if "drivers" in tops else tops[0]
    sizes: dict[str, int] = {}
    for record in git(repo.git_dir, "ls-tree", "-r", "-l", "-z", repo.head_sha).split(b"\0"):
        meta, _, name = record.partition(b"\t")
        if b" blob " in meta and b"/" in name:
            top = name.split(b"/")[0].decode(errors="surrogateescape")
            sizes[top] = sizes.get(top, 0) + int(meta.split()[3])
    return max(sizes, key=lambda top: sizes[top]) if sizes else ""


def first_searches(repo: BenchRepo, runs: int) -> tuple[list[float], list[float]]:
    """The first search of a store that finds no index (a fresh cache directory each run, as
    a process new to the repository has), and `git grep <sha>` run just before each; one
    untimed `git grep <sha>` first, so both read a warm page cache."""
    git_grep(repo.git_dir, repo.rare_literal, repo.head_sha)
    ours: list[float] = []
    reference: list[float] = []
    arguments = SearchArguments(query=repo.rare_literal, limit=100)
    for _ in range(runs):
        started = time.perf_counter()
        git_grep(repo.git_dir, repo.rare_literal, repo.head_sha)
        reference.append(time.perf_counter() - started)
        with tempfile.TemporaryDirectory() as cache:
            with RepositoryStore(cache_dir=Path(cache)) as store:
                pinned = PinnedRepository.open(
                    repo.git_dir, repo.base_sha, repo.head_sha, store=store
                )
                started = time.perf_counter()
                search_repository(pinned, arguments)
                ours.append(time.perf_counter() - started)
            store.snapshots.wait_for_saves()  # it writes into the folder removed next
    return ours, reference


def main() -> None:
    args = parser(__doc__ or "").parse_args()
    repo = repository_for(args)
    runs = runs_for(args, full=7)
    rare, common = repo.rare_literal, repo.common_literal
    no_index = first_searches(repo, max(runs // 2, 1))
    pinned = open_pinned(repo.git_dir, repo.base_sha, repo.head_sha)
    started = time.perf_counter()
    first = search_repository(pinned, SearchArguments(query=rare, limit=100))
    first_seconds = time.perf_counter() - started
    wait_for_search_index(repo.git_dir)
    log(
        f"first search in this process: {first_seconds:.2f} s; search index ready "
        f"{time.perf_counter() - started:.1f} s after it started"
    )
    if repo.planted:
        assert len(first["matches"]) >= 3, first
    else:  # absent from the head by construction (common.absent_literal)
        assert not first["matches"], first
        assert not first["truncated"], first
    directory = scoped_directory(repo)
    checkout = head_checkout(repo)
    report = Report(f"search_repository vs git grep -F -n -I ({repo.describe()})", [])
    shown = "" if repo.planted else f" {common!r}"
    cases = [(f"common literal{shown}, whole tree", common, "")]
    cases.append(("rare literal, whole tree", rare, ""))
    if directory:
        cases.append((f"rare literal, under {directory}/", rare, directory))
    else:
        report.note("rare literal, under a directory", "skipped: the head has no directory")
    for label, query, path in cases:
        arguments = SearchArguments(query=query, path=path, limit=100)
        ours = median_seconds(partial(search_repository, pinned, arguments), runs)
        tree = median_seconds(partial(git_grep, repo.git_dir, query, repo.head_sha, path), runs)
        report.add(f"{label}: vs tree object", ours, "git grep <sha>", tree)
        if checkout is not None:
            in_checkout = median_seconds(partial(git_grep, checkout, query, None, path), runs)
            report.add(f"{label}: vs checkout", ours, "git grep in worktree", in_checkout)
        else:
            skipped_checkout(report, f"{label}: vs checkout")
        if label.startswith("rare literal, whole"):
            report.add(
                "first search in a process, rare: vs tree", first_seconds, "git grep <sha>", tree
            )
            report.add_samples(
                "first search of a store that finds no index, rare (warm page cache)",
                no_index[0],
                "git grep <sha>, just before each",
                no_index[1],
            )
    report.print()


if __name__ == "__main__":
    main()
