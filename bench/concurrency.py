"""N concurrent reviews against a provider with a fixed latency: wall time and peak memory.

Each review is a pull request of its own (a distinct head commit on the same base, never
reviewed before) and runs three rounds as a model would: the diff and a read of a changed
file; a search and a first listing page; then the final review. The provider answers every
turn after `--latency` seconds (a real model takes seconds per turn), from a process of its
own, as a real provider would. Each N runs in a new process, so its peak memory is its own.

- warm (the default): the process has already reviewed another head of the repository and
  searched it, as a service that has been running does; N reviews then arrive at once;
- cold (`--cold`): the N reviews are the first thing the process does.

`--search` picks the search of round 2: `tree` (a rare literal over the whole tree: every
file is read), `directory` (the same literal under the changed file's top directory) or
`none` (no search: what the rest of a review costs).
The reference is one review alone, measured the same way in this run. Memory is the peak
resident size of the process above its size once warm (before the N reviews).

On your own repository (`--repo PATH`) the heads are written to a scratch repository that
borrows its objects, and the rare literal is one absent from the head.

    uv run python -m bench.concurrency [--quick] [--repo auto|kernel|synthetic|PATH] [--runs N]
        [--base REV] [--head REV] [--latency SECONDS] [--counts 1,10,50] [--cold]
        [--search tree|directory|none]
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench.common import (
    BenchRepo,
    Report,
    bench_store,
    log,
    make_head,
    open_pinned,
    parser,
    repository_for,
    run_review,
    runs_for,
    sample_file,
    wait_for_search_index,
    writable_repository,
)
from bench.harness import Call, bench_settings, provider_process
from pr_review_api.llm.openai_chat import ProviderClient
from pr_review_api.loop.workspace import LocalTarget


def plan_for(repo: BenchRepo, search: str) -> list[list[Call]]:
    pinned = open_pinned(repo.git_dir, repo.base_sha, repo.head_sha)
    modified = (path for status, path in pinned.changed_files() if status == "M")
    changed = next(modified, None) or sample_file(pinned)
    query: dict[str, str] = {"query": repo.rare_literal}
    if search == "directory":
        query["path"] = changed.split("/")[0]
    second: list[Call] = [("list_repository_files", {})]
    if search != "none":
        second.insert(0, ("search_repository", query))
    return [[("inspect_git_diff", {}), ("read_repository_file", {"path": changed})], second]


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def current_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return peak_mb()


async def reviews(targets: list[LocalTarget], base_url: str) -> float:
    settings = bench_settings(base_url, pr_review_max_concurrent_reviews=len(targets))
    async with ProviderClient(settings) as client:
        started = time.perf_counter()
        store = bench_store()  # shared by the warm-up run and the measured reviews
        extra = {} if store is None else {"store": store}
        await asyncio.gather(
            *(run_review(target, settings, model=client, **extra) for target in targets)
        )
        return time.perf_counter() - started


def worker(argv: list[str]) -> None:
    """One measurement in this (new) process: `repository git_dir base latency warm head...`."""
    path, git_dir, base, latency, warm, *heads = argv
    plan = json.loads(sys.stdin.read())
    if warm == "warm":
        with provider_process(plan, 0.0) as base_url:
            asyncio.run(reviews([LocalTarget(Path(path), base, base)], base_url))
        wait_for_search_index(Path(git_dir))
    targets = [LocalTarget(Path(path), base, head) for head in heads]
    with provider_process(plan, float(latency)) as base_url:
        before = current_mb()
        wall = asyncio.run(reviews(targets, base_url))
    print(json.dumps({"wall": wall, "before": before, "peak": peak_mb()}))


def measure(
    repo: BenchRepo, heads: list[str], plan: list[list[Call]], latency: float, warm: bool
) -> dict[str, float]:
    state = "warm" if warm else "cold"
    argv = [str(repo.path), str(repo.git_dir), repo.base_sha, str(latency), state, *heads]
    done = subprocess.run(
        [sys.executable, "-m", "bench.concurrency", "--worker", *argv],
        input=json.dumps(plan).encode(),
        stdout=subprocess.PIPE,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    result: dict[str, float] = json.loads(done.stdout)
    return result


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
        return
    options = parser(__doc__ or "")
    options.add_argument("--latency", type=float, default=0.0, help="provider seconds per turn")
    options.add_argument("--counts", default="1,10,50", help="numbers of concurrent reviews")
    options.add_argument("--cold", action="store_true", help="reviews in a process just started")
    options.add_argument("--search", choices=("tree", "directory", "none"), default="tree")
    args = options.parse_args()
    repo = writable_repository(repository_for(args))
    runs = runs_for(args, full=3, quick=1)
    latency = args.latency or (0.3 if args.quick else 2.0)
    counts = [int(count) for count in args.counts.split(",")]
    plan = plan_for(repo, args.search)
    variant = 4000
    results: dict[int, list[dict[str, float]]] = {}
    for _ in range(runs):
        for count in counts:
            heads = [make_head(repo, variant + n) for n in range(count)]
            variant += count
            results.setdefault(count, []).append(measure(repo, heads, plan, latency, not args.cold))
    ones = [sample["wall"] for sample in results[counts[0]]]
    state = "cold process" if args.cold else "warm process"
    report = Report(
        f"concurrent reviews, a distinct head each, {state}, search: {args.search}, "
        f"provider latency {latency:g} s, 3 rounds ({repo.describe()})",
        [],
    )
    for count in counts:
        samples = results[count]
        walls = [sample["wall"] for sample in samples]
        grown = statistics.median(sample["peak"] - sample["before"] for sample in samples)
        start = statistics.median(sample["before"] for sample in samples)
        report.add_samples(f"{count} reviews: wall time", walls, f"{counts[0]} review", ones)
        report.note(
            f"{count} reviews: peak memory above the start",
            f"{grown:,.0f} MB, {grown / count:,.1f} MB per review (start {start:,.0f} MB)",
        )
    log(f"timed runs per count: {runs}")
    report.print()


if __name__ == "__main__":
    main()
