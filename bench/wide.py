"""A wide tree: preparing a head of about a million entries, in time and peak memory.

A hostile repository can hold a million tree entries in a few megabytes of git data: the
generated one here is `--dirs` directories of `--files` empty files each (distinct names, one
shared empty blob), written with `git mktree`, so 1000 x 1000 packs into about 2.6 MB. What a
head of it costs to prepare is measured in a fresh process each run (the peak RSS is the
process's own, VmHWM):

- with the default budgets (`PrepareLimits()`, as the service and the CLI have them): the
  tree has 1,001,001 entries with its directories, over the 1,000,000 of
  `PR_REVIEW_MAX_TREE_ENTRIES`, so this is the time to the `invalid_repository` refusal;
- with the default budgets but 2,000,000 entries: the whole index, what a tree just under
  the entry budget costs (past an eighth of the budget, git's output is read whole before the
  rest is parsed);
- with no budget: the whole index, parsed as git's output streams in.

The reference is `git ls-tree -r -z` of the head (what any listing of the tree costs git),
measured in the same run; the target is 5 s and 300 MB.

    uv run python -m bench.wide [--quick] [--dirs 1000] [--files 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench.common import DATA_DIR, Report, git, git_text, log, log_load, run_probe, run_quietly

# One measurement, in a fresh interpreter: open the head through a store, print the outcome.
_PROBE = """
import json, resource, sys, tempfile, time
from pathlib import Path
from pr_review_api.errors import InvalidRepository
from pr_review_api.git.limits import UNLIMITED, PrepareLimits
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.store import RepositoryStore

git_dir, head, budget = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
limits = {
    "default": PrepareLimits(),
    "raised": PrepareLimits(max_tree_entries=2_000_000),
    "none": UNLIMITED,
}[budget]
with tempfile.TemporaryDirectory() as cache:
    store = RepositoryStore(limits=limits, cache_dir=Path(cache))
    started = time.perf_counter()
    try:
        pinned = PinnedRepository.open(git_dir, head, head, store=store)
        outcome = f"prepared, {len(pinned.snapshot.files):,} files listed"
    except InvalidRepository as error:
        outcome = f"refused: {error.code}"
    seconds = time.perf_counter() - started
    store.snapshots.wait_for_saves()
    store.close()
status = Path("/proc/self/status").read_text()
peak_kb = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM")))
print(json.dumps({"seconds": seconds, "peak_mb": peak_kb * 1024 / 1e6, "outcome": outcome}))
"""


_BUDGET_NAMES = {
    "default": "default budgets",
    "raised": "default budgets, 2,000,000 entries",
    "none": "no budget",
}


def wide_repository(dirs: int, files: int) -> tuple[Path, str]:
    """A bare repository whose one commit holds `dirs` x `files` empty files (built once)."""
    root = DATA_DIR / f"wide-{dirs}x{files}"
    meta = root / "meta.json"
    if meta.exists():
        return root / "repo.git", json.loads(meta.read_text())["head"]
    root.mkdir(parents=True, exist_ok=True)
    git_dir = root / "repo.git"
    git(root, "init", "-q", "--bare", str(git_dir))
    empty = git_text(git_dir, "hash-object", "-w", "--stdin")
    listing = []
    for d in range(dirs):
        records = "".join(f"100644 blob {empty}\tf{d:04d}_{f:06d}\0" for f in range(files)).encode()
        tree = git(git_dir, "mktree", "-z", input_bytes=records).decode().strip()
        listing.append(f"040000 tree {tree}\td{d:04d}\0")
    top = git(git_dir, "mktree", "-z", input_bytes="".join(listing).encode()).decode().strip()
    head = git_text(git_dir, "commit-tree", top, "-m", "wide")
    git(git_dir, "update-ref", "refs/heads/main", head)
    git(git_dir, "repack", "-a", "-d", "-q")
    git(git_dir, "prune-packed")
    meta.write_text(json.dumps({"head": head}))
    return git_dir, head


def probe(git_dir: Path, head: str, budget: str, source: str | None) -> dict[str, object]:
    return run_probe(_PROBE, [str(git_dir), head, budget], source)


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__)
    options.add_argument("--dirs", type=int, default=1000)
    options.add_argument("--files", type=int, default=1000)
    options.add_argument("--runs", type=int, default=3)
    options.add_argument("--quick", action="store_true", help="a 50 x 40 tree, in seconds")
    options.add_argument(
        "--compare",
        metavar="SRC",
        help="also measure the `src` folder of another version (an A/B, runs interleaved)",
    )
    options.add_argument("--budget", choices=("default", "raised", "none", "all"), default="all")
    args = options.parse_args()
    if args.quick:
        args.dirs, args.files = 50, 40
    git_dir, head = wide_repository(args.dirs, args.files)
    packed = sum(path.stat().st_size for path in (git_dir / "objects" / "pack").iterdir())
    log(f"wide tree: {args.dirs} x {args.files} empty files, {packed / 1e6:.1f} MB packed")
    log_load("start")
    budgets = ("default", "raised", "none") if args.budget == "all" else (args.budget,)
    sources: list[str | None] = [None] if args.compare is None else [args.compare, None]
    cases = [(budget, source) for budget in budgets for source in sources]
    samples: dict[tuple[str, str | None], list[dict[str, object]]] = {case: [] for case in cases}
    references: list[float] = []
    ls_tree = ["git", "ls-tree", "-r", "-z", head]
    for _ in range(args.runs):  # interleaved, so load drifts alike on both sides
        started = time.perf_counter()
        run_quietly(ls_tree, git_dir)
        references.append(time.perf_counter() - started)
        for budget, source in cases:
            samples[budget, source].append(probe(git_dir, head, budget, source))
    report = Report(f"preparing a wide tree ({args.dirs:,} x {args.files:,} files)", [])
    for budget, source in cases:
        runs = samples[budget, source]
        seconds = [float(str(run["seconds"])) for run in runs]
        peaks = [float(str(run["peak_mb"])) for run in runs]
        name = _BUDGET_NAMES[budget]
        name += "" if source is None else f" [{source}]"
        figure = f"{name}: time ({runs[0]['outcome']})"
        report.add_samples(figure, seconds, "ls-tree -r", references)
        report.add_mb(f"{name}: peak RSS (median)", statistics.median(peaks), "target", 300)
    report.print()
    log_load("end")


if __name__ == "__main__":
    main()
