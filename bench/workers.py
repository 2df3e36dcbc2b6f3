"""N worker processes reviewing at once: each one's peak RSS, and their total PSS.

A worker here is a new Python process that does what a jobs worker does: it keeps one
repository store for its life (made from its settings, as jobs/runner.py makes it) and
reviews the heads it is given one after the other (`run_review`, `--reviews` each, a
distinct head per review, never reviewed before), against a scripted provider on loopback
(in a process of its own) whose script makes one `search_repository` call, for the rare
literal over the whole tree, then a final review. The N workers start together and share
a cache directory (PR_REVIEW_CACHE_DIR), as a service's workers do. By default it is one per
run, in which one untimed worker first reviews the bench's head and waits for its background
index build, so the repository has been seen before; with `--first-ever` it is a fresh empty
one for every N.

Memory, for each N (`--workers 1,2,4`):
- peak RSS of each worker: its VmHWM (/proc/self/status), which the worker reads itself after
  its reviews and after any background build of its search index has finished, just before
  it exits; the target is 300 MB;
- total PSS: the sum of Pss (/proc/PID/smaps_rollup) over the N workers, sampled every
  `--interval` seconds while they run, at its largest; and the same with their git child
  processes. PSS splits each shared page among the processes that map it, so pages of a file
  every worker maps (the page cache) count once in the sum, not N times. The reference is
  N times one worker's peak RSS: what N private copies would hold.

    uv run python -m bench.workers [--quick] [--repo auto|kernel|synthetic|PATH] [--runs N]
        [--base REV] [--head REV] [--workers 1,2,4] [--reviews K] [--latency SECONDS]
        [--first-ever] [--interval SECONDS]
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    BenchRepo,
    Report,
    log,
    make_head,
    parser,
    repository_for,
    run_review,
    runs_for,
    wait_for_search_index,
    writable_repository,
)
from bench.harness import Call, bench_settings, provider_process
from pr_review_api.git.store import RepositoryStore
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
TARGET_MB = 300.0  # MB here are 10^6 bytes; /proc reports kB of 1024 bytes
KB = 1024 / 1e6  # one /proc kB in MB


# --- The worker process ---------------------------------------------------------------------


def status_kb(pid: int | str, field_name: str) -> int:
    """A `kB` field of /proc/PID/status (VmHWM, VmRSS), or 0."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field_name}:"):
            return int(line.split()[1])
    return 0


async def review_heads(job: dict[str, Any], store: RepositoryStore, settings: Settings) -> float:
    started = time.perf_counter()
    for head in job["heads"]:
        target = LocalTarget(Path(job["path"]), job["base"], head)
        result = await run_review(target, settings, store=store)
        if result.termination_reason != "final_review":
            raise SystemExit(f"a review ended with {result.termination_reason}")
    return time.perf_counter() - started


def worker() -> None:
    """One worker: read its job, say ready, wait for go, review, report its own VmHWM.

    Its store is made from its settings, as the jobs worker makes its own (jobs/runner.py):
    the job's cache directory, the service's budgets."""
    job = json.loads(sys.stdin.readline())
    settings = bench_settings(job["base_url"], pr_review_cache_dir=job["cache_dir"])
    # Looked up by name: a source from before loop.workspace.repository_store made the store
    # itself (docs/performance.md: the benches also measure older sources).
    workspace = importlib.import_module("pr_review_api.loop.workspace")
    store = getattr(workspace, "repository_store", RepositoryStore)(settings)
    print("ready", flush=True)
    sys.stdin.readline()  # go
    reviews = asyncio.run(review_heads(job, store, settings))
    started = time.perf_counter()
    wait_for_search_index(Path(job["git_dir"]), store)
    waited = time.perf_counter() - started
    peak = status_kb("self", "VmHWM")
    store.close()
    print(json.dumps({"reviews": reviews, "waited": waited, "peak_kb": peak}), flush=True)


# --- Sampling memory from outside ---------------------------------------------------------


def pss_kb(pid: int) -> int:
    """Pss of a live process (/proc/PID/smaps_rollup), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def children_of(parents: set[int]) -> set[int]:
    """Every live descendant of `parents` (git cat-file, git grep ...)."""
    by_parent: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        by_parent.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    frontier = list(parents)
    while frontier:
        for child in by_parent.get(frontier.pop(), []):
            if child not in found:
                found.add(child)
                frontier.append(child)
    return found


@dataclass
class Sample:
    """One N's measurement."""

    peaks_mb: list[float]
    pss_mb: float  # the largest sum over the workers
    pss_with_git_mb: float  # the same with their git processes
    reviews: list[float]  # seconds of each worker's reviews
    waited: list[float] = field(default_factory=list)  # for its background build


def run_workers(jobs: list[dict[str, Any]], interval: float) -> Sample:
    """Start one worker per job, start them together, sample their PSS until they exit."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.workers", "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        for _ in jobs
    ]
    for process, job in zip(processes, jobs, strict=True):
        assert process.stdin is not None
        process.stdin.write(json.dumps(job) + "\n")
        process.stdin.flush()
    for process in processes:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise SystemExit("a worker did not start")
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.close()
    pids = {process.pid for process in processes}
    pss = with_git = 0
    while any(process.poll() is None for process in processes):
        own = sum(pss_kb(pid) for pid in pids)
        helpers = sum(pss_kb(pid) for pid in children_of(pids))
        pss, with_git = max(pss, own), max(with_git, own + helpers)
        time.sleep(interval)
    reports = []
    for process in processes:
        assert process.stdout is not None
        line = process.stdout.read().strip()
        if process.wait() != 0 or not line:
            raise SystemExit(f"a worker failed (exit status {process.returncode})")
        reports.append(json.loads(line))
    return Sample(
        peaks_mb=[report["peak_kb"] * KB for report in reports],
        pss_mb=pss * KB,
        pss_with_git_mb=with_git * KB,
        reviews=[report["reviews"] for report in reports],
        waited=[report["waited"] for report in reports],
    )


# --- The measurement ------------------------------------------------------------------------


def plan_for(repo: BenchRepo) -> list[list[Call]]:
    return [[("search_repository", {"query": repo.rare_literal})]]


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker()
        return
    options = parser(__doc__ or "")
    options.add_argument("--workers", default="1,2,4", help="numbers of worker processes")
    options.add_argument("--reviews", type=int, default=1, help="heads each worker reviews")
    options.add_argument("--latency", type=float, default=0.0, help="provider seconds per turn")
    options.add_argument("--first-ever", action="store_true", help="no priming review first")
    options.add_argument("--interval", type=float, default=0.1, help="PSS sampling period")
    args = options.parse_args()
    repo = writable_repository(repository_for(args))
    runs = runs_for(args, full=1, quick=1)
    counts = [int(count) for count in args.workers.split(",")]
    latency = args.latency or (0.1 if args.quick else 0.5)
    scratch = Path(tempfile.mkdtemp(prefix="pr-review-bench-workers-"))
    variant = 5000
    results: dict[int, list[Sample]] = {}
    primed: set[Path] = set()
    try:
        with provider_process(plan_for(repo), latency) as base_url:
            for number in range(runs):
                for count in counts:
                    # Seen before: one cache directory per run, primed once, as a service's
                    # cache lives on; first ever: a fresh one for every N.
                    name = f"cache-{number}-{count}" if args.first_ever else f"cache-{number}"
                    cache_dir = scratch / name
                    job = {
                        "path": str(repo.path),
                        "git_dir": str(repo.git_dir),
                        "base": repo.base_sha,
                        "base_url": base_url,
                        "cache_dir": str(cache_dir),
                    }
                    if not args.first_ever and cache_dir not in primed:
                        primed.add(cache_dir)
                        started = time.perf_counter()
                        run_workers([{**job, "heads": [repo.head_sha]}], args.interval)
                        log(f"primed the cache in {time.perf_counter() - started:.1f} s")
                    jobs = []
                    for _ in range(count):
                        heads = [make_head(repo, variant + n) for n in range(args.reviews)]
                        variant += args.reviews
                        jobs.append({**job, "heads": heads})
                    sample = run_workers(jobs, args.interval)
                    log(
                        f"{count} workers: peak RSS "
                        + ", ".join(f"{peak:,.0f}" for peak in sample.peaks_mb)
                        + f" MB; total PSS {sample.pss_mb:,.0f} MB; reviews "
                        + ", ".join(f"{seconds:.1f}" for seconds in sample.reviews)
                        + " s; waited for the search index "
                        + ", ".join(f"{seconds:.1f}" for seconds in sample.waited)
                        + " s"
                    )
                    results.setdefault(count, []).append(sample)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print_report(repo, results, counts, args, latency)


def print_report(
    repo: BenchRepo,
    results: dict[int, list[Sample]],
    counts: list[int],
    args: Any,
    latency: float,
) -> None:
    seen = "first ever" if args.first_ever else "repository seen before"
    report = Report(
        f"worker processes, {args.reviews} review(s) each, a distinct head per review, one "
        f"whole-tree search, provider latency {latency:g} s, {seen} ({repo.describe()})",
        [],
    )

    def median(values: list[float]) -> float:
        return statistics.median(values)

    first = counts[0]
    one_review = median([max(sample.reviews) for sample in results[first]])
    for count in counts:
        samples = results[count]
        largest = median([max(sample.peaks_mb) for sample in samples])
        typical = median([median(sample.peaks_mb) for sample in samples])
        workers = f"{count} worker{'' if count == 1 else 's'}"
        report.add_mb(f"{workers}: largest peak RSS of a worker", largest, "target", TARGET_MB)
        report.note(
            f"{workers}: peak RSS of each worker",
            ", ".join(f"{peak:,.0f}" for peak in samples[-1].peaks_mb) + " MB",
        )
        copies = f"{count} x a worker's peak RSS"
        pss = median([sample.pss_mb for sample in samples])
        report.add_mb(f"{workers}: total PSS at its peak", pss, copies, count * typical)
        with_git = median([sample.pss_with_git_mb for sample in samples])
        report.add_mb(
            f"{workers}: the same, with their git processes",
            with_git,
            copies,
            count * typical,
        )
        slowest = median([max(sample.reviews) for sample in samples])
        report.add(
            f"{workers}: the slowest worker's reviews",
            slowest,
            f"{first} worker{'' if first == 1 else 's'}",
            one_review,
        )
    log(f"runs per count: {len(results[first])}; PSS sampled every {args.interval:g} s")
    report.print()


if __name__ == "__main__":
    main()
