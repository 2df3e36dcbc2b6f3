"""Preparing a review: from the request to the first provider request.

The time runs from calling `run_review` to the moment the scripted provider receives the first
chat-completions request: pinning the commits, indexing the head tree, the changed files and
the prompt (and, for a pull request, the metadata and the fetch). Three cases:

- cold: a new process, the page cache dropped first (when this user may: root; not with
  `--quick`), a head never reviewed;
- warm object store: a head never reviewed, in a process that has reviewed others;
- repeated head: a head this process reviewed before.

The reference is `git worktree add --detach` of the head (a full checkout), measured in this
run. A pull request through the fake GitHub of the test suite is measured too when
`pr_review_api.cache.open_pull_request` is available (cold: an empty cache, the whole
repository fetched over smart HTTP; warm: the repository cached, a new pull request head).

On your own repository (`--repo PATH`) the reference is a full checkout of the head in a
temporary clone outside it (`git clone --shared --no-checkout` and `git checkout`; with
`--no-checkout`, `git ls-tree -r -l` instead), and the new heads are written to a scratch
repository that borrows its objects.

    uv run python -m bench.prepare [--quick] [--repo auto|kernel|synthetic|PATH] [--runs N]
        [--base REV] [--head REV] [--no-checkout] [--no-github]
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import (
    BenchRepo,
    Report,
    git,
    log,
    make_head,
    parser,
    repository_for,
    run_quietly,
    run_review,
    runs_for,
    writable_repository,
)
from bench.harness import Script, bench_settings, scripted_provider, shared_store
from pr_review_api.loop.workspace import LocalTarget, ReviewTarget

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def time_to_first_request(target: ReviewTarget, **overrides: object) -> float:
    """Seconds from run_review() to the provider's first request (the review then stops)."""
    script = Script(plan=[])
    with scripted_provider(script) as provider:
        settings = bench_settings(provider.base_url, **overrides)
        started = time.perf_counter()
        asyncio.run(run_review(target, settings, **shared_store()))
    return script.arrivals[0] - started


def drop_page_cache() -> bool:
    """Empty the kernel's page cache, when this process may; whether it did."""
    try:
        os.sync()
        DROP_CACHES.write_text("3\n")
    except OSError:
        return False
    return True


def cold_local(repo: BenchRepo, head: str) -> float:
    """One cold preparation, in a new process."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.prepare",
            "--worker",
            str(repo.path),
            repo.base_sha,
            head,
        ],
        capture_output=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return float(json.loads(done.stdout)["seconds"])


def worktree_add(repo: BenchRepo) -> float:
    """A full checkout of the head: `git worktree add` in a repository the bench built; in the
    user's, which is never written to, a clone outside it that borrows its objects."""
    if repo.worktree is not None:
        with tempfile.TemporaryDirectory(dir=repo.worktree.parent) as scratch:
            target = Path(scratch) / "checkout"
            started = time.perf_counter()
            git(repo.worktree, "worktree", "add", "-q", "--detach", str(target), repo.head_sha)
            elapsed = time.perf_counter() - started
            git(repo.worktree, "worktree", "remove", "--force", str(target))
        return elapsed
    source = repo.source if repo.source is not None else repo.git_dir
    with tempfile.TemporaryDirectory(prefix="pr-review-bench-") as scratch:
        target = Path(scratch) / "checkout"
        started = time.perf_counter()
        git(Path(scratch), "clone", "-q", "--shared", "--no-checkout", str(source), str(target))
        git(target, "checkout", "-q", "--detach", repo.head_sha)
        return time.perf_counter() - started


def reference(repo: BenchRepo, runs: int) -> tuple[str, float]:
    """The reference every figure is divided by: its name and median seconds."""
    if repo.worktree is None and not repo.checkouts:
        log("--no-checkout: the reference is git ls-tree -r -l of the head, not a checkout")
        listing = ["git", "ls-tree", "-r", "-l", "-z", repo.head_sha]
        samples = [time_of(listing, repo.git_dir) for _ in range(max(1, runs))]
        return "ls-tree -r -l", median_of(samples)
    name = "worktree add" if repo.worktree is not None else "clone + checkout"
    seconds = median_of([worktree_add(repo) for _ in range(max(1, min(runs, 2)))])
    log(f"{name}: {seconds:.2f} s")
    return name, seconds


def time_of(argv: list[str], cwd: Path) -> float:
    started = time.perf_counter()
    run_quietly(argv, cwd)
    return time.perf_counter() - started


def median_of(samples: list[float]) -> float:
    return statistics.median(samples)


def measure_local(
    repo: BenchRepo, runs: int, report: Report, against: tuple[str, float], drop: bool
) -> None:
    heads = [make_head(repo, variant=2000 + n) for n in range(2 * runs)]
    dropped = drop and drop_page_cache()
    cold = []
    for head in heads[:runs]:
        if dropped:
            drop_page_cache()
        cold.append(cold_local(repo, head))
    label = "cold: new process, page cache dropped" if dropped else "cold: new process"
    report.add(f"local, {label}", median_of(cold), *against)

    # Warm the process and the object store on the bench's own head first.
    time_to_first_request(LocalTarget(repo.path, repo.base_sha, repo.head_sha))
    warm = [
        time_to_first_request(LocalTarget(repo.path, repo.base_sha, head)) for head in heads[runs:]
    ]
    report.add(
        "local, new head, warm object store (target 3 s)",
        median_of(warm),
        *against,
    )
    again = [
        time_to_first_request(LocalTarget(repo.path, repo.base_sha, repo.head_sha))
        for _ in range(runs)
    ]
    report.add("local, repeated head (target 1 s)", median_of(again), *against)


def measure_github(
    repo: BenchRepo, runs: int, report: Report, against: tuple[str, float], drop: bool
) -> None:
    try:
        from pr_review_api.github import checkout as cache

        available = callable(getattr(cache, "open_pull_request", None))
    except ImportError:
        available = False
    if not available:
        report.note("pull request through fake GitHub", "skipped: no cache.open_pull_request")
        return
    from tests.fakes.github_server import FakeGitHub

    from pr_review_api.loop.workspace import ChangeTarget

    near = None if repo.worktree is None else repo.worktree.parent
    with tempfile.TemporaryDirectory(dir=near, prefix="pr-review-bench-") as scratch:
        root = Path(scratch)
        fake = FakeGitHub(root / "github")
        try:
            origin = fake.repository("bench", "linux")
            # The served repository borrows the bench repository's objects: no copy.
            alternates = origin.bare / "objects" / "info" / "alternates"
            alternates.write_text(str(repo.git_dir / "objects") + "\n")
            heads = [make_head(repo, variant=3000 + n) for n in range(runs + 1)]
            git(origin.bare, "update-ref", "refs/heads/main", repo.base_sha)

            def publish(number: int, head: str) -> ChangeTarget:
                git(origin.bare, "update-ref", f"refs/pull/{number}/head", head)
                fake.set_pull("bench", "linux", number, base_sha=repo.base_sha, head_sha=head)
                return ChangeTarget(f"{fake.server_url}/bench/linux/pull/{number}")

            def timed(target: ChangeTarget) -> float:
                return time_to_first_request(
                    target,
                    github_server_url=fake.server_url,
                    github_api_url=fake.api_url,
                    pr_review_cache_dir=root / "cache",
                )

            first = publish(1, heads[0])
            if drop:
                drop_page_cache()
            cold = timed(first)  # one run: it fetches the whole repository
            report.add("pull request, cold: empty cache, full fetch", cold, *against)
            warm = [timed(publish(2 + n, head)) for n, head in enumerate(heads[1:])]
            report.add(
                "pull request, new head, warm cache (target 3 s)",
                median_of(warm),
                *against,
            )
            again = [timed(first) for _ in range(runs)]
            report.add(
                "pull request, repeated head (target 1 s)",
                median_of(again),
                *against,
            )
        finally:
            fake.close()


def worker(argv: list[str]) -> None:
    worktree, base, head = argv
    seconds = time_to_first_request(LocalTarget(Path(worktree), base, head))
    print(json.dumps({"seconds": seconds}))


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2:])
        return
    options = parser(__doc__ or "")
    options.add_argument("--no-github", action="store_true", help="skip the pull-request path")
    args = options.parse_args()
    repo = repository_for(args)
    runs = runs_for(args, full=5)
    against = reference(repo, runs)
    repo = writable_repository(repo)
    report = Report(f"preparing a review, to the first provider request ({repo.describe()})", [])
    drop = not args.quick  # a smoke run leaves the machine's page cache alone
    measure_local(repo, runs, report, against, drop)
    if not args.no_github:
        measure_github(repo, runs, report, against, drop)
    report.print()


if __name__ == "__main__":
    main()
