"""The review loop's own overhead per round, against a zero-latency scripted provider.

Two whole reviews, one of `1` round and one of `1 + R` rounds (R = 7 by default: eight rounds
is REVIEW_MAX_ROUNDS), each round one cheap tool call (`list_repository_files` with limit 1);
the difference divided by R is the cost of one round; the median over many such pairs.
From it we subtract, each measured in this run:

- the wire floor: the same request bodies POSTed again with a bare `httpx` client to a
  scripted server that answers each as in the review (loopback HTTP, the server's own
  parsing, the reply);
- the tool: the same call made directly.

What remains is the loop's own overhead per round: building and serializing the request,
reading and checking the reply (the nine turn checks), dispatching the call to a worker
thread, the trace record. The target is under 2 ms.

    uv run python -m bench.loop [--quick] [--repo auto|kernel|synthetic|PATH] [--runs N]
        [--base REV] [--head REV] [--rounds R]
"""

from __future__ import annotations

import statistics
import time
from functools import partial

import httpx

from bench.common import (
    Report,
    log,
    median_seconds,
    open_pinned,
    parser,
    repository_for,
    runs_for,
)
from bench.harness import Call, Script, bench_settings, review, scripted_provider
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.tools import ListFilesArguments, list_repository_files

CALL: Call = ("list_repository_files", {"limit": 1})


def timed_review(target: LocalTarget, rounds: int) -> tuple[float, list[bytes]]:
    """Seconds for a review of `rounds` tool rounds, and the request bodies it sent."""
    script = Script(plan=[[CALL]] * rounds)
    with scripted_provider(script) as provider:
        settings = bench_settings(provider.base_url)
        review(target, settings)  # warm the connection pool, the thread pool and the index
        skip = len(provider.requests)
        started = time.perf_counter()
        review(target, settings)
        elapsed = time.perf_counter() - started
        bodies = [request.body for request in provider.requests[skip:]]
    return elapsed, bodies


def replay(bodies: list[bytes], rounds: int) -> float:
    """Seconds to POST `bodies` one after the other with a bare httpx client, to a scripted
    provider answering each exactly as in the review: the wire and the server, no loop."""
    script = Script(plan=[[CALL]] * rounds)
    with scripted_provider(script) as provider, httpx.Client() as client:
        url = f"{provider.base_url}/chat/completions"
        headers = {"Authorization": "Bearer bench", "Content-Type": "application/json"}
        client.post(url, content=bodies[0], headers=headers)  # connect
        started = time.perf_counter()
        for body in bodies:
            client.post(url, content=body, headers=headers)
        return time.perf_counter() - started


def main() -> None:
    options = parser(__doc__ or "")
    options.add_argument("--rounds", type=int, default=0, help="R, the extra rounds measured")
    args = options.parse_args()
    repo = repository_for(args)
    runs = runs_for(args, full=41, quick=9)
    # 1 + 7 rounds: the default REVIEW_MAX_ROUNDS, so requests carry a realistic history.
    rounds = args.rounds or 7
    target = LocalTarget(repo.path, repo.base_sha, repo.head_sha)
    all_in: list[float] = []
    wire: list[float] = []
    for _ in range(runs):
        short, short_bodies = timed_review(target, 1)
        long, long_bodies = timed_review(target, 1 + rounds)
        all_in.append((long - short) / rounds)
        replayed = replay(long_bodies, 1 + rounds) - replay(short_bodies, 1)
        wire.append(replayed / rounds)
    per_round = statistics.median(all_in)
    floor = statistics.median(wire)
    pinned = open_pinned(repo.git_dir, repo.base_sha, repo.head_sha)
    tool = median_seconds(partial(list_repository_files, pinned, ListFilesArguments(limit=1)), 200)
    overhead = per_round - floor - tool
    log(
        f"{runs} runs of 1 and {1 + rounds} rounds; per-round samples (ms): "
        + ", ".join(f"{(a - w) * 1000:.2f}" for a, w in zip(all_in, wire, strict=True))
    )
    report = Report(f"review loop per round, zero-latency provider ({repo.describe()})", [])
    report.add("one round, all in", per_round, "bare POSTs", floor)
    report.add("the tool call itself", tool, "bare POSTs", floor)
    report.add("loop overhead per round (target < 2 ms)", overhead, "bare POSTs", floor)
    report.add("loop overhead per round (target < 2 ms)", overhead, "target", 0.002)
    report.print()


if __name__ == "__main__":
    main()
