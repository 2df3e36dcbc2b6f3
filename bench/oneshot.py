"""One-shot processes: a fresh `pr-review review --repo` with one whole-tree search.

What the CLI and a GitHub Action pay: each measurement starts a new `pr-review` process (the
console script beside this Python, the project's real entry point; else
`python -m pr_review_api.cli`) on `--repo <repo> --base <base> --head <head> --format json`,
against a scripted provider on loopback whose script makes exactly one `search_repository`
call, for the rare literal over the whole tree, then a final review. Timed from the start of
the process to its exit.

- first ever: the process gets a fresh, empty cache directory (PR_REVIEW_CACHE_DIR);
- seen before: a second fresh process on the same repository with that same cache directory,
  where whatever the first left on disk may be used;
- seen before, index built: the same once the repository's search index is complete. A
  one-shot process builds what it can while the model works and hands the rest to a
  background process as it exits (loop/background_index.py); this waits for that process
  (found in /proc) and shows how long after the first process's exit it ended. "Seen
  before" runs while that build still goes on.

The search round is also shown on its own: from the provider's first request (the process is
up and the review prepared) to its second (the search has run and its result is sent back);
a line on stderr per process splits its time into start-up and preparation (to the first
request), the search round, and the final review and exit (last request to exit).

References, measured in the same run, interleaved with the processes: `git grep -F -n -I -e
<literal>` in a checkout of the head (on your own repository a temporary clone; with
`--no-checkout` that reference is skipped), `git grep <sha>` over the tree object, and the
process floor, `pr-review --version`. One untimed process and one untimed `git grep` run
first (each with a throwaway cache directory), so every timed one finds the operating
system's page cache warm: the one thing that differs between "first ever" and "seen before"
is pr-review's own cache directory.

    uv run python -m bench.oneshot [--quick] [--repo auto|kernel|synthetic|PATH] [--runs N]
        [--base REV] [--head REV] [--no-checkout]
"""

from __future__ import annotations

import importlib
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from tests.fakes.provider_server import ScriptedProvider

from bench.common import (
    BenchRepo,
    Report,
    bench_env,
    head_checkout,
    log,
    parser,
    repository_for,
    runs_for,
    skipped_checkout,
)
from bench.harness import Script, scripted_provider
from bench.search import git_grep


def cli_command() -> list[str]:
    """The `pr-review` console script of this environment, else its module."""
    script = Path(sys.executable).parent / "pr-review"
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "pr_review_api.cli"]


def child_env(base_url: str, cache_dir: Path, home: Path) -> dict[str, str]:
    """The process's whole environment: the bench provider, an explicit cache directory, a
    home of its own and no git configuration of the user's."""
    return bench_env(
        {
            "HOME": str(home),
            "OPENCODE_API_KEY": "bench-key",
            "OPENCODE_BASE_URL": base_url,
            "PR_REVIEW_CACHE_DIR": str(cache_dir),
            "REVIEW_TIMEOUT_SECONDS": "3600",
        }
    )


class OneShot:
    """Runs `pr-review review` processes against one scripted provider and checks each."""

    def __init__(
        self, repo: BenchRepo, provider: ScriptedProvider, script: Script, scratch: Path
    ) -> None:
        self.repo = repo
        self.provider = provider
        self.base_url = provider.base_url
        self.script = script
        self.scratch = scratch  # the processes' working directory (no .env) and home
        self.argv = [
            *cli_command(),
            "review",
            "--repo",
            str(repo.path),
            "--base",
            repo.base_sha,
            "--head",
            repo.head_sha,
            "--format",
            "json",
        ]

    def run(self, cache_dir: Path, *, hand_off: bool = True) -> tuple[float, float]:
        """Seconds of the whole process, and of its search round (`hand_off`: whether the
        process may leave its unfinished index build to a background process)."""
        seen = len(self.script.arrivals)
        started = time.perf_counter()
        env = child_env(self.base_url, cache_dir, self.scratch)
        if not hand_off:
            env["PR_REVIEW_BACKGROUND_INDEX"] = "false"
        done = subprocess.run(
            self.argv,
            cwd=self.scratch,
            env=env,
            capture_output=True,
            check=False,
        )
        wall = time.perf_counter() - started
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace")[-2000:] or done.stdout.decode()[-2000:]
            raise SystemExit(f"pr-review review exited {done.returncode}:\n{tail}")
        arrivals = self.script.arrivals[seen:]
        if len(arrivals) != 2:
            raise SystemExit(f"expected 2 provider requests, got {len(arrivals)}")
        check_search(self.repo, self.provider.requests[-1].body)
        ended = started + wall
        log(
            f"  to the first request {arrivals[0] - started:.2f} s, search round "
            f"{arrivals[1] - arrivals[0]:.2f} s, last request to exit {ended - arrivals[1]:.2f} s"
        )
        return wall, arrivals[1] - arrivals[0]

    def floor(self) -> float:
        """Seconds of `pr-review --version`: start-up and imports, no review."""
        started = time.perf_counter()
        subprocess.run(
            [*cli_command(), "--version"],
            cwd=self.scratch,
            env=child_env(self.base_url, self.scratch / "unused-cache", self.scratch),
            stdout=subprocess.DEVNULL,
            check=True,
        )
        return time.perf_counter() - started


def has_search_index() -> bool:
    try:
        importlib.import_module("pr_review_api.git.search_index")
    except ImportError:
        return False
    return True


HAND_OFF_MODULE = "pr_review_api.loop.background_index"


def hand_offs(git_dir: Path) -> list[int]:
    """The process ids of the background builds a review handed the repository to (Linux:
    read from /proc; none elsewhere, or on a source from before the hand-off)."""
    wanted = [HAND_OFF_MODULE.encode(), str(git_dir).encode()]
    found = []
    for entry in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            arguments = entry.read_bytes().split(b"\0")
        except OSError:
            continue
        if all(any(word == argument for argument in arguments) for word in wanted):
            found.append(int(entry.parent.name))
    return found


def wait_for_hand_offs(git_dir: Path, timeout: float = 1800) -> float:
    """Wait for the repository's background builds to end; the seconds waited."""
    started = time.monotonic()
    while hand_offs(git_dir) and time.monotonic() - started < timeout:
        time.sleep(0.2)
    return time.monotonic() - started


def build_index(repo: BenchRepo, cache_dir: Path) -> None:
    """Complete the repository's search index in `cache_dir`, as a long-lived process would
    (nothing is left to do once a background build the last review handed off has ended)."""
    store_module = importlib.import_module("pr_review_api.git.store")
    repository = importlib.import_module("pr_review_api.git.repository")
    with store_module.RepositoryStore(cache_dir=cache_dir) as store:
        pinned = repository.PinnedRepository.open(
            repo.git_dir, repo.base_sha, repo.head_sha, store=store
        )
        if pinned.snapshot.search_bytes() < store.indexes.min_bytes:
            return  # small enough that search keeps git grep: there is no index to build
        deadline = time.monotonic() + 900
        while pinned._search_index() is None and time.monotonic() < deadline:
            store.indexes.wait(repo.git_dir)
            time.sleep(0.1)


def check_search(repo: BenchRepo, body: bytes) -> None:
    """A review's second request carries the search's result: the literal's hits on a built
    repository, none on the user's own (the literal is absent), and never truncated."""
    messages = json.loads(body)["messages"]
    results = [json.loads(m["content"]) for m in messages if m.get("role") == "tool"]
    if len(results) != 1:
        raise SystemExit(f"expected one tool result, got {len(results)}")
    result = results[0]
    matches = result.get("matches", [])
    if result.get("truncated") or (len(matches) >= 3) != repo.planted:
        raise SystemExit(f"unexpected search result: {json.dumps(result)[:500]}")


def folder_mb(folder: Path) -> float:
    """The bytes of the files under `folder`, in MB: what the process left on disk."""
    if not folder.is_dir():
        return 0.0
    return sum(path.lstat().st_size for path in folder.rglob("*") if path.is_file()) / 1e6


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def cached_runs(
    shot: OneShot, repo: BenchRepo, cache_dir: Path, note: Callable[[str, float], None]
) -> tuple[float, float, float, float]:
    """First ever, seen before and (with a search index) seen before with the index built, in
    a fresh cache directory; the first two (whole process, search round) are returned."""
    first, first_search = shot.run(cache_dir)
    log(f"cache directory after the first process: {folder_mb(cache_dir):,.1f} MB")
    again, again_search = shot.run(cache_dir)
    if has_search_index():
        waited = wait_for_hand_offs(repo.git_dir)
        if waited > 1:
            note("hand-off", waited + again)
            log(f"the first process's background build ended {waited + again:.1f} s after it")
        build_index(repo, cache_dir)
        indexed, indexed_search = shot.run(cache_dir)
        note("indexed", indexed)
        note("indexed search", indexed_search)
    for name, seconds in (
        ("first", first),
        ("first search", first_search),
        ("again", again),
        ("again search", again_search),
    ):
        note(name, seconds)
    return first, first_search, again, again_search


def main() -> None:  # noqa: C901  (one script's timed runs and its table; each branch is an optional row)
    args = parser(__doc__ or "").parse_args()
    repo = repository_for(args)
    runs = runs_for(args, full=5, quick=3)
    checkout = head_checkout(repo)
    literal = repo.rare_literal
    in_checkout: Callable[[], object] | None = None
    if checkout is not None:
        in_checkout = partial(git_grep, checkout, literal, None)
    over_tree = partial(git_grep, repo.git_dir, literal, repo.head_sha)
    script = Script(plan=[[("search_repository", {"query": literal})]])
    scratch = Path(tempfile.mkdtemp(prefix="pr-review-bench-oneshot-"))
    samples: dict[str, list[float]] = {}

    def note(name: str, seconds: float) -> None:
        samples.setdefault(name, []).append(seconds)

    try:
        with scripted_provider(script) as provider:
            shot = OneShot(repo, provider, script, scratch)
            log(f"each process: {' '.join(cli_command())} review --repo ... ({runs} runs)")
            # Untimed: the page cache, the bytecode (and no background build left running).
            shot.run(scratch / "warm-up-cache", hand_off=False)
            if in_checkout is not None:
                in_checkout()
            for number in range(runs):
                first, first_search, again, again_search = cached_runs(
                    shot, repo, scratch / f"cache-{number}", note
                )
                note("floor", shot.floor())
                note("tree", timed(over_tree))
                if in_checkout is not None:
                    note("checkout", timed(in_checkout))
                log(
                    f"run {number + 1}: first ever {first:.2f} s (search {first_search:.2f} s), "
                    f"seen before {again:.2f} s (search {again_search:.2f} s)"
                )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

    report = Report(
        f"one-shot `pr-review review --repo`, one whole-tree search ({repo.describe()})", []
    )
    references = [("git grep <sha>", samples["tree"])]
    if "checkout" in samples:
        references.insert(0, ("git grep in a checkout", samples["checkout"]))
    else:
        skipped_checkout(report, "every figure: vs git grep in a checkout")
    rows = [
        ("first ever (empty cache dir): whole process", "first"),
        ("seen before (same cache dir, new process): whole process", "again"),
        ("first ever: the search round inside it", "first search"),
        ("seen before: the search round inside it", "again search"),
        ("seen before, index built: whole process", "indexed"),
        ("seen before, index built: the search round inside it", "indexed search"),
        ("process floor: pr-review --version", "floor"),
    ]
    for label, key in rows:
        if key not in samples:
            continue  # a source without the search index
        for name, reference in references:
            report.add_samples(label, samples[key], name, reference)
    if "hand-off" in samples:
        report.note(
            "background build after the first process (median)",
            f"{statistics.median(samples['hand-off']):,.1f} s",
        )
    saved = statistics.median(samples["first"]) - statistics.median(samples["again"])
    report.note("seen before saves (medians)", f"{saved * 1000:,.0f} ms")
    report.print()


if __name__ == "__main__":
    main()
