"""What every bench script shares: the benchmark repositories, timing, and printing ratios.

A benchmark repository is a git repository under `bench/.data/` with a working tree checked
out at its head commit and a packed object store, as a fetched repository has. Three kinds:

- `kernel`: the Linux kernel tree from Debian's `linux-source-*` package
  (`apt-get install -y linux-source-6.1` puts a tarball under /usr/src);
- `synthetic`: a deterministic generated tree of the kernel's size (about 79,000 files, 1 GB);
- `quick`: a small deterministic generated tree, built in seconds (`--quick`).

`--repo auto` (the default) takes the kernel when its tarball is present, else the synthetic
tree. The base commit is the tree itself; the head commit changes a few files, adds two and
deletes one, and plants `RARE_LITERAL` in three places. Commits carry fixed dates, so the
same tree always gives the same SHAs. Every figure is printed with the reference it is divided
by, measured in the same run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / ".data"
FORMAT_VERSION = 1  # bump when the layout of a built repository changes

RARE_LITERAL = "pr_review_bench_rare_marker"
COMMON_LITERAL = "return"

_COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "Bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "Bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


# --- Running git for the bench (the reference side, not the code under test) ---------------


def bench_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment free of the user's git configuration."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.devnull,
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        **_COMMIT_ENV,
    }
    env.update(extra or {})
    return env


def git(
    cwd: Path,
    *args: str,
    input_bytes: bytes | None = None,
    env: dict[str, str] | None = None,
    check: bool = True,
) -> bytes:
    """Run git and return its stdout; fail loudly."""
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=bench_env(env),
        input=input_bytes,
        capture_output=True,
        check=False,
    )
    if check and done.returncode != 0:
        message = done.stderr.decode(errors="replace").strip()
        raise RuntimeError(f"git {' '.join(args[:3])} failed: {message}")
    return done.stdout


def git_text(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    return git(cwd, *args, env=env).decode().strip()


def run_quietly(argv: Sequence[str], cwd: Path) -> None:
    """Run a reference command, discarding its output (as a pipe that is read to the end)."""
    subprocess.run(
        list(argv),
        cwd=cwd,
        env=bench_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=False,
    )


# --- Benchmark repositories ---------------------------------------------------------------


@dataclass(frozen=True)
class BenchRepo:
    """A built benchmark repository."""

    kind: str
    worktree: Path
    base_sha: str
    head_sha: str
    files: int
    bytes: int

    @property
    def git_dir(self) -> Path:
        return self.worktree / ".git"

    def describe(self) -> str:
        return f"{self.kind}: {self.files:,} files, {self.bytes / 1e6:,.0f} MB at head"


def kernel_tarball() -> Path | None:
    """The newest Debian linux-source tarball under /usr/src, if any."""
    found = sorted(Path("/usr/src").glob("linux-source-*.tar.*"))
    return found[-1] if found else None


def ensure_repository(kind: str) -> BenchRepo:
    """Build the repository of `kind` under bench/.data/, or reuse it."""
    if kind == "auto":
        kind = "kernel" if kernel_tarball() is not None else "synthetic"
    root = DATA_DIR / kind
    meta_path = root / "meta.json"
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("format") == FORMAT_VERSION:
            return _from_meta(kind, root, meta)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    started = time.perf_counter()
    log(f"building the {kind} repository under {root} (once; later runs reuse it)")
    worktree = root / "repo"
    worktree.mkdir()
    if kind == "kernel":
        tarball = kernel_tarball()
        if tarball is None:
            raise SystemExit(
                "no /usr/src/linux-source-*.tar.* found: run `apt-get install -y "
                "linux-source-6.1`, or pass --repo synthetic"
            )
        subprocess.run(
            ["tar", "-xf", str(tarball), "-C", str(worktree), "--strip-components=1"], check=True
        )
    elif kind == "synthetic":
        generate_tree(worktree, files=79_000, mean_bytes=13_000, seed=1)
    elif kind == "quick":
        generate_tree(worktree, files=1_500, mean_bytes=4_000, seed=2)
    else:
        raise SystemExit(f"unknown repository kind {kind!r}")
    meta = _commit(worktree)
    meta["format"] = FORMAT_VERSION
    meta_path.write_text(json.dumps(meta, indent=2))
    log(f"built in {time.perf_counter() - started:.0f} s")
    return _from_meta(kind, root, meta)


def _from_meta(kind: str, root: Path, meta: dict[str, Any]) -> BenchRepo:
    return BenchRepo(
        kind, root / "repo", meta["base_sha"], meta["head_sha"], meta["files"], meta["bytes"]
    )


def _commit(worktree: Path) -> dict[str, Any]:
    git(worktree, "init", "-q", "-b", "main")
    for key, value in (("core.autocrlf", "false"), ("gc.auto", "0"), ("core.fsmonitor", "false")):
        git(worktree, "config", key, value)
    git(worktree, "add", "-A", "-f")
    git(worktree, "commit", "-q", "--no-verify", "-m", "base")
    base = git_text(worktree, "rev-parse", "HEAD")
    head = make_head(worktree, base, variant=0)
    git(worktree, "repack", "-a", "-d", "-q")
    git(worktree, "prune-packed")
    git(worktree, "checkout", "-q", "-f", "-B", "main", head)
    listing = git(worktree, "ls-tree", "-r", "-l", "-z", head).split(b"\0")
    sizes = [int(rec.split(b"\t")[0].split()[3]) for rec in listing if b" blob " in rec]
    return {"base_sha": base, "head_sha": head, "files": len(sizes), "bytes": sum(sizes)}


def make_head(worktree: Path, base: str, variant: int) -> str:
    """A head commit on `base`: a few files changed, two added, one deleted.

    Built with plumbing on a private index, so the working tree is untouched and any number
    of distinct heads (one per `variant`) can be made for "a head never seen before".
    """
    names = [
        path
        for path in git(worktree, "ls-tree", "-r", "--name-only", "-z", base)
        .decode(errors="surrogateescape")
        .split("\0")
        if path.endswith((".c", ".h", ".py", ".txt"))
    ]
    rng = random.Random(f"head-{variant}")
    chosen = sorted(rng.sample(names, 12))
    with tempfile.TemporaryDirectory() as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(worktree, "read-tree", base, env=env)
        updates: list[str] = []
        for number, path in enumerate(chosen):
            old = git(worktree, "cat-file", "blob", f"{base}:{path}")
            marker = RARE_LITERAL if number < 2 else f"bench change {variant}.{number}"
            new = (
                old + f"\n/* {marker} (variant {variant}) */\nint bench_{number}(void);\n".encode()
            )
            updates.append(f"100644 {_hash(worktree, new)}\t{path}")
        for number in range(2):
            body = f"/* new file {number}, variant {variant}: {RARE_LITERAL} */\n" * (1 + number)
            updates.append(f"100644 {_hash(worktree, body.encode())}\tbench/new_{number}.c")
        deleted = names[len(names) // 2]
        if deleted not in chosen:
            updates.append(f"0 {'0' * 40}\t{deleted}")
        git(
            worktree,
            "update-index",
            "--index-info",
            input_bytes="\n".join(updates).encode() + b"\n",
            env=env,
        )
        tree = git_text(worktree, "write-tree", env=env)
    return git_text(worktree, "commit-tree", tree, "-p", base, "-m", f"bench head {variant}")


def _hash(worktree: Path, data: bytes) -> str:
    return git(worktree, "hash-object", "-w", "--stdin", input_bytes=data).decode().strip()


_WORD_TEXT = (
    "return if else for while struct static const unsigned int long char void size_t "
    "buffer length offset device driver queue lock unlock spin mutex alloc free init exit "
    "probe remove register unregister error value result count index entry list head node "
    "table page cache flags state config read write open close start stop update reset"
)
_WORDS = _WORD_TEXT.split()


def generate_tree(root: Path, *, files: int, mean_bytes: int, seed: int) -> None:
    """A deterministic source-like tree: nested directories, C-ish text, a few binaries."""
    rng = random.Random(seed)
    lines = [_line(rng) for _ in range(20_000)]
    directories = [f"d{a:02d}/s{b:02d}" for a in range(40) for b in range(rng.randint(3, 30))]
    for number in range(files):
        directory = root / directories[number % len(directories)]
        directory.mkdir(parents=True, exist_ok=True)
        size = max(200, int(rng.expovariate(1 / mean_bytes)))
        if number % 997 == 5:
            (directory / f"blob_{number}.bin").write_bytes(rng.randbytes(size))
            continue
        chunk: list[str] = []
        total = 0
        while total < size:
            line = lines[rng.randrange(len(lines))]
            chunk.append(line)
            total += len(line) + 1
        (directory / f"file_{number}.c").write_text("\n".join(chunk) + "\n")


def _line(rng: random.Random) -> str:
    indent = "\t" * rng.randint(0, 3)
    words = " ".join(
        rng.choice(_WORDS) + str(rng.randint(0, 999)) for _ in range(rng.randint(2, 9))
    )
    return f"{indent}{words};"


_STORES: list[Any] = []


def bench_store() -> Any:
    """The one repository store of this bench process (git/store.py), or None on a source
    from before the store existed. Looked up by name (docs/performance.md)."""
    if not _STORES:
        try:
            store_module = importlib.import_module("pr_review_api.git.store")
        except ImportError:
            _STORES.append(None)
        else:
            _STORES.append(store_module.RepositoryStore())
    return _STORES[0]


def open_pinned(git_dir: Path, base_sha: str, head_sha: str) -> Any:
    """`PinnedRepository.open` through the bench's store, so heads share indexes and text."""
    repository = importlib.import_module("pr_review_api.git.repository")
    store = bench_store()
    if store is None:
        return repository.PinnedRepository.open(git_dir, base_sha, head_sha)
    return store.open(git_dir, base_sha, head_sha)


def wait_for_search_index(git_dir: Path) -> None:
    """Let a background build of a repository's search text finish. Looked up by name: the
    benches also measure the source as it was before that existed (docs/performance.md)."""
    store = bench_store()
    if store is not None:
        store.texts.wait(git_dir)
        return
    try:
        blobs = importlib.import_module("pr_review_api.git.blobs")
    except ImportError:
        return
    wait = getattr(blobs, "wait_for_text_store", None)
    if wait is not None:
        wait(git_dir)


# --- Timing and printing ------------------------------------------------------------------


def log(message: str) -> None:
    print(f"# {message}", file=sys.stderr, flush=True)


def median_seconds(action: Callable[[], object], runs: int, warmup: int = 1) -> float:
    """Median wall time of `action` over `runs` runs, after `warmup` untimed runs."""
    for _ in range(warmup):
        action()
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


@dataclass
class Report:
    """Rows of `figure | ours | reference | ratio`, printed as a table."""

    title: str
    rows: list[tuple[str, str, str, str]]

    def add(self, figure: str, ours: float, reference_name: str, reference: float) -> None:
        ratio = ours / reference if reference > 0 else float("inf")
        self.rows.append(
            (figure, _ms(ours), f"{_ms(reference)} ({reference_name})", f"{ratio:.2f}x")
        )

    def note(self, figure: str, value: str) -> None:
        self.rows.append((figure, value, "", ""))

    def print(self) -> None:
        print(f"\n## {self.title}\n")
        header = ("figure", "ours", "reference", "ratio")
        widths = [max(len(row[i]) for row in [header, *self.rows]) for i in range(4)]
        for row in [header, tuple("-" * w for w in widths), *self.rows]:
            print(
                "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) + " |"
            )
        sys.stdout.flush()


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f} ms" if seconds < 10 else f"{seconds:,.2f} s"


def parser(description: str) -> argparse.ArgumentParser:
    """The options every bench script takes."""
    result = argparse.ArgumentParser(description=description)
    result.add_argument(
        "--quick", action="store_true", help="a small synthetic repository, done in seconds"
    )
    result.add_argument(
        "--repo",
        choices=("auto", "kernel", "synthetic"),
        default="auto",
        help="the large repository (auto: the kernel when its tarball is installed)",
    )
    result.add_argument("--runs", type=int, default=0, help="timed runs per figure (median)")
    return result


def repository_for(args: argparse.Namespace) -> BenchRepo:
    repo = ensure_repository("quick" if args.quick else args.repo)
    log(repo.describe())
    return repo


def runs_for(args: argparse.Namespace, full: int, quick: int = 3) -> int:
    if args.runs > 0:
        return int(args.runs)
    return quick if args.quick else full
