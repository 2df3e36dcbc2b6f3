"""The search index on disk: the time to build it for a head, its size against the text it
indexes, and the searches it then answers.

Each build runs in a fresh process with an empty cache directory (so nothing is shared with an
earlier build), as a worker's background build does: it opens the head, asks for its index
and waits for the build. The process then searches the head through that index, a rare
literal and a common one, 7 times each (median). The size is every file of the index folder
(the SQLite generation and its write-ahead log) against the bytes of text the index holds
(the head's searchable files without a NUL byte); the time's reference is `git grep <sha>`
of the rare literal, measured in the same run. `--compare SRC` builds with the `src` folder
of another version too, interleaved (an A/B). The building process's peak RSS (VmHWM, the
build's memory with the store's) is printed against the 300 MB a worker may use.

    uv run python -m bench.index [--quick] [--repo auto|kernel|synthetic|PATH] [--runs 1]
        [--compare SRC]
"""

from __future__ import annotations

import statistics
import time

from bench.common import BenchRepo, Report, log, parser, repository_for, run_probe, run_quietly

_PROBE = """
import json, statistics, sys, tempfile, time
from pathlib import Path
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git.store import RepositoryStore
from pr_review_api.tools import SearchArguments, search_repository

git_dir, base, head, rare, common = Path(sys.argv[1]), *sys.argv[2:6]
with tempfile.TemporaryDirectory() as cache:
    store = RepositoryStore(cache_dir=Path(cache))
    store.indexes.min_bytes = 0  # indexed however small (--quick's repository is)
    pinned = PinnedRepository.open(git_dir, base, head, store=store)
    started = time.perf_counter()
    pinned._search_index()
    store.indexes.wait(git_dir)
    seconds = time.perf_counter() - started
    assert pinned._search_index() is not None, "the index is not complete"
    folder = store.index_dir(git_dir)
    size = sum(path.stat().st_size for path in folder.glob("search-*.sqlite*"))
    text = sum(dict(pinned.snapshot.search_blobs()).values())
    searches = {}
    for name, query in (("rare", rare), ("common", common)):
        samples = []
        for _ in range(8):
            began = time.perf_counter()
            search_repository(pinned, SearchArguments(query=query, limit=100))
            samples.append(time.perf_counter() - began)
        searches[name] = statistics.median(samples[1:])
    store.close()
    store.snapshots.wait_for_saves()  # the snapshot's save writes into the folder removed next
status = Path("/proc/self/status").read_text() if Path("/proc/self/status").exists() else ""
peak = next((int(line.split()[1]) * 1024 for line in status.splitlines()
             if line.startswith("VmHWM:")), 0)
print(json.dumps({"seconds": seconds, "bytes": size, "text": text, "searches": searches,
                  "peak_rss": peak}))
"""


def build(repo: BenchRepo, source: str | None) -> dict[str, object]:
    literals = [repo.rare_literal, repo.common_literal]
    return run_probe(_PROBE, [str(repo.git_dir), repo.base_sha, repo.head_sha, *literals], source)


def _search_seconds(result: dict[str, object], kind: str) -> float:
    searches = result["searches"]
    assert isinstance(searches, dict)
    return float(searches[kind])


def main() -> None:
    options = parser(__doc__ or "")
    options.add_argument("--compare", metavar="SRC", help="also build with another `src` folder")
    args = options.parse_args()
    repo = repository_for(args)
    runs = args.runs if args.runs > 0 else 1
    sources: list[str | None] = [None] if args.compare is None else [args.compare, None]
    results: dict[str | None, list[dict[str, object]]] = {source: [] for source in sources}
    greps: list[float] = []
    grep = ["git", "grep", "-F", "-n", "-I", "-z", "-e", repo.rare_literal, repo.head_sha]
    run_quietly(grep, repo.git_dir)  # the page cache, warm for both sides
    for _ in range(runs):
        for source in sources:
            started = time.perf_counter()
            run_quietly(grep, repo.git_dir)
            greps.append(time.perf_counter() - started)
            results[source].append(build(repo, source))
            log(f"built with {source or 'this source'}: {results[source][-1]}")
    report = Report(f"the search index ({repo.describe()})", [])
    for source, built in results.items():
        name = "" if source is None else f" [{source}]"
        seconds = [float(str(one["seconds"])) for one in built]
        report.add_samples(f"build time{name}", seconds, "git grep <sha>", greps)
        size = statistics.median(float(str(one["bytes"])) for one in built)
        text = float(str(built[0]["text"]))
        report.add_mb(f"size on disk{name}", size / 1e6, "the searchable files", text / 1e6)
        peak = statistics.median(float(str(one.get("peak_rss", 0))) for one in built)
        report.add_mb(f"peak RSS of the building process{name}", peak / 1e6, "target", 300)
        for kind in ("rare", "common"):
            found = [_search_seconds(one, kind) for one in built]
            report.add_samples(f"search, {kind} literal{name}", found, "git grep <sha>", greps)
    report.print()


if __name__ == "__main__":
    main()
