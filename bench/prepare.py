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

    uv run python -m bench.prepare [--quick] [--repo kernel|synthetic] [--runs N] [--no-github]
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

from tests.fakes.provider_server import ScriptedProvider

from bench.common import (
    BenchRepo,
    Report,
    git,
    log,
    make_head,
    parser,
    repository_for,
    runs_for,
)
from bench.harness import Script, bench_settings, shared_store
from pr_review_api.loop.run import LocalTarget, ReviewTarget, run_review

DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def time_to_first_request(target: ReviewTarget, **overrides: object) -> float:
    """Seconds from run_review() to the provider's first request (the review then stops)."""
    script = Script(plan=[])
    with ScriptedProvider(responder=script) as provider:
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
            str(repo.worktree),
            repo.base_sha,
            head,
        ],
        capture_output=True,
        check=True,
        cwd=Path(__file__).resolve().parent.parent,
    )
    return float(json.loads(done.stdout)["seconds"])


def worktree_add(repo: BenchRepo) -> float:
    with tempfile.TemporaryDirectory(dir=repo.worktree.parent) as scratch:
        target = Path(scratch) / "checkout"
        started = time.perf_counter()
        git(repo.worktree, "worktree", "add", "-q", "--detach", str(target), repo.head_sha)
        elapsed = time.perf_counter() - started
        git(repo.worktree, "worktree", "remove", "--force", str(target))
    return elapsed


def median_of(samples: list[float]) -> float:
    return statistics.median(samples)


def measure_local(repo: BenchRepo, runs: int, report: Report, reference: float, drop: bool) -> None:
    heads = [make_head(repo.worktree, repo.base_sha, variant=2000 + n) for n in range(2 * runs)]
    dropped = drop and drop_page_cache()
    cold = []
    for head in heads[:runs]:
        if dropped:
            drop_page_cache()
        cold.append(cold_local(repo, head))
    label = "cold: new process, page cache dropped" if dropped else "cold: new process"
    report.add(f"local, {label}", median_of(cold), "worktree add", reference)

    # Warm the process and the object store on the bench's own head first.
    time_to_first_request(LocalTarget(repo.worktree, repo.base_sha, repo.head_sha))
    warm = [
        time_to_first_request(LocalTarget(repo.worktree, repo.base_sha, head))
        for head in heads[runs:]
    ]
    report.add(
        "local, new head, warm object store (target 3 s)",
        median_of(warm),
        "worktree add",
        reference,
    )
    again = [
        time_to_first_request(LocalTarget(repo.worktree, repo.base_sha, repo.head_sha))
        for _ in range(runs)
    ]
    report.add("local, repeated head (target 1 s)", median_of(again), "worktree add", reference)


def measure_github(
    repo: BenchRepo, runs: int, report: Report, reference: float, drop: bool
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

    from pr_review_api.loop.run import PullRequestTarget

    with tempfile.TemporaryDirectory(dir=repo.worktree.parent) as scratch:
        root = Path(scratch)
        fake = FakeGitHub(root / "github")
        try:
            origin = fake.origin("bench", "linux")
            # The served repository borrows the bench repository's objects: no copy.
            alternates = origin.bare / "objects" / "info" / "alternates"
            alternates.write_text(str(repo.git_dir / "objects") + "\n")
            heads = [
                make_head(repo.worktree, repo.base_sha, variant=3000 + n) for n in range(runs + 1)
            ]
            git(origin.bare, "update-ref", "refs/heads/main", repo.base_sha)

            def publish(number: int, head: str) -> PullRequestTarget:
                git(origin.bare, "update-ref", f"refs/pull/{number}/head", head)
                fake.set_pull("bench", "linux", number, base_sha=repo.base_sha, head_sha=head)
                return PullRequestTarget(f"{fake.server_url}/bench/linux/pull/{number}")

            def timed(target: PullRequestTarget) -> float:
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
            report.add(
                "pull request, cold: empty cache, full fetch", cold, "worktree add", reference
            )
            warm = [timed(publish(2 + n, head)) for n, head in enumerate(heads[1:])]
            report.add(
                "pull request, new head, warm cache (target 3 s)",
                median_of(warm),
                "worktree add",
                reference,
            )
            again = [timed(first) for _ in range(runs)]
            report.add(
                "pull request, repeated head (target 1 s)",
                median_of(again),
                "worktree add",
                reference,
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
    reference = median_of([worktree_add(repo) for _ in range(max(1, min(runs, 2)))])
    log(f"git worktree add: {reference:.2f} s")
    report = Report(f"preparing a review, to the first provider request ({repo.describe()})", [])
    drop = not args.quick  # a smoke run leaves the machine's page cache alone
    measure_local(repo, runs, report, reference, drop)
    if not args.no_github:
        measure_github(repo, runs, report, reference, drop)
    report.print()


if __name__ == "__main__":
    main()
