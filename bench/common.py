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

`--repo PATH` runs on a repository of the user's (a work tree or a bare repository), read
only: the head is `--head` (default HEAD), the base `--base` (default the head's first
parent, or the head itself when it has none), and the rare literal is one generated for the
run that `git grep` shows nowhere at the head. Nothing is written into that repository: new
heads go to a scratch repository in a temporary folder that borrows its objects (alternates),
and a reference that needs a checkout gets a temporary clone outside it (`--no-checkout`
skips those references instead).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
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
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

DATA_DIR = Path(__file__).resolve().parent / ".data"
FORMAT_VERSION = 1  # bump when the layout of a built repository changes

RARE_LITERAL = "pr_review_bench_rare_marker"
COMMON_LITERAL = "return"
# On a user's repository: one letter, in nearly every text file, so the search stops at its cap.
COMMON_LITERAL_ANYWHERE = "e"
BUILT_KINDS = ("auto", "kernel", "synthetic")

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
    """A repository to measure: one the bench built, or the user's own (`--repo PATH`)."""

    kind: str
    git_dir: Path
    base_sha: str
    head_sha: str
    files: int
    bytes: int
    # A checkout of the head the bench may use as a reference: the work tree of a built
    # repository; None for the user's own (see head_checkout).
    worktree: Path | None = None
    rare_literal: str = RARE_LITERAL
    common_literal: str = COMMON_LITERAL
    planted: bool = True  # the rare literal is at the head (three places), not absent
    writable: bool = True  # new heads may be written here (make_head)
    source: Path | None = None  # the user's path, for `--repo PATH`
    checkouts: bool = True  # False with --no-checkout: skip references that need one

    @property
    def path(self) -> Path:
        """What a user would pass as `pr-review review --repo`."""
        return self.worktree if self.worktree is not None else self.git_dir

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
    worktree = root / "repo"
    return BenchRepo(
        kind,
        worktree / ".git",
        meta["base_sha"],
        meta["head_sha"],
        meta["files"],
        meta["bytes"],
        worktree=worktree,
    )


def _commit(worktree: Path) -> dict[str, Any]:
    git(worktree, "init", "-q", "-b", "main")
    for key, value in (("core.autocrlf", "false"), ("gc.auto", "0"), ("core.fsmonitor", "false")):
        git(worktree, "config", key, value)
    git(worktree, "add", "-A", "-f")
    git(worktree, "commit", "-q", "--no-verify", "-m", "base")
    base = git_text(worktree, "rev-parse", "HEAD")
    built = BenchRepo("new", worktree / ".git", base, base, 0, 0, worktree=worktree)
    head = make_head(built, variant=0)
    git(worktree, "repack", "-a", "-d", "-q")
    git(worktree, "prune-packed")
    git(worktree, "checkout", "-q", "-f", "-B", "main", head)
    files, size = tree_size(worktree, head)
    return {"base_sha": base, "head_sha": head, "files": files, "bytes": size}


def tree_size(cwd: Path, commit: str) -> tuple[int, int]:
    """The number of blobs in `commit`'s tree and their total size in bytes."""
    listing = git(cwd, "ls-tree", "-r", "-l", "-z", commit).split(b"\0")
    sizes = [int(rec.split(b"\t")[0].split()[3]) for rec in listing if b" blob " in rec]
    return len(sizes), sum(sizes)


# --- The user's own repository (`--repo PATH`), read only -----------------------------------


def user_repository(
    path: str, base: str | None, head: str | None, checkouts: bool = True
) -> BenchRepo:
    """The repository at `path`, its base and head commits, and a literal absent at the head.

    Only read: every git command here and in the scripts leaves it as it was."""
    where = Path(path).expanduser().resolve()
    if not where.is_dir():
        raise SystemExit(f"--repo {path}: not a directory (or give auto, kernel or synthetic)")
    try:
        git_dir = Path(git_text(where, "rev-parse", "--absolute-git-dir"))
    except RuntimeError:
        raise SystemExit(f"--repo {path}: not a git repository") from None
    head_sha = _resolve(git_dir, head or "HEAD", "--head")
    if base is not None:
        base_sha = _resolve(git_dir, base, "--base")
    else:
        parent = git(
            git_dir, "rev-parse", "--verify", "-q", f"{head_sha}^1^{{commit}}", check=False
        )
        base_sha = parent.decode().strip() or head_sha
        if base_sha == head_sha:
            log("the head has no parent: base = head, so the diff is empty (or pass --base)")
    files, size = tree_size(git_dir, head_sha)
    literal = absent_literal(git_dir, head_sha)
    log(f"your repository {where}: base {base_sha[:12]}, head {head_sha[:12]}, rare {literal}")
    return BenchRepo(
        "your repository",
        git_dir,
        base_sha,
        head_sha,
        files,
        size,
        rare_literal=literal,
        common_literal=COMMON_LITERAL_ANYWHERE,
        planted=False,
        writable=False,
        source=where,
        checkouts=checkouts,
    )


def _resolve(git_dir: Path, revision: str, option: str) -> str:
    found = git(git_dir, "rev-parse", "--verify", "-q", f"{revision}^{{commit}}", check=False)
    sha = found.decode().strip()
    if not sha:
        raise SystemExit(f"{option} {revision}: not a commit of the repository")
    return sha


def absent_literal(git_dir: Path, head_sha: str) -> str:
    """A literal that `git grep` finds nowhere at the head, binary files included: a search
    for it must read every file and ends with no match."""
    for attempt in range(10):
        digest = hashlib.sha256(f"{head_sha}:{attempt}".encode()).hexdigest()[:16]
        literal = f"pr_review_bench_absent_{digest}"
        found = subprocess.run(
            ["git", "grep", "-q", "-F", "-e", literal, head_sha],
            cwd=git_dir,
            env=bench_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=False,
        )
        if found.returncode == 1:  # 0: found; above 1: git failed
            return literal
        if found.returncode > 1:
            raise SystemExit("git grep failed on the repository's head")
    raise SystemExit("no literal absent from the head was found (10 tries)")


def _temporary_folder(prefix: str) -> Path:
    """A folder under the system's temporary directory, removed when the process exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, True)
    return folder


_SCRATCH: dict[Path, BenchRepo] = {}


def writable_repository(repo: BenchRepo) -> BenchRepo:
    """`repo` itself when the bench built it; for the user's own, a bare scratch repository in
    a temporary folder that borrows its objects (objects/info/alternates), so new heads are
    written there and reviews read the user's packs, untouched."""
    if repo.writable:
        return repo
    if repo.git_dir in _SCRATCH:
        return _SCRATCH[repo.git_dir]
    common = Path(git_text(repo.git_dir, "rev-parse", "--path-format=absolute", "--git-common-dir"))
    object_format = git_text(repo.git_dir, "rev-parse", "--show-object-format")
    scratch = _temporary_folder("pr-review-bench-scratch-") / "repo.git"
    git(
        Path(tempfile.gettempdir()),
        "init",
        "-q",
        "--bare",
        f"--object-format={object_format}",
        str(scratch),
    )
    (scratch / "objects" / "info" / "alternates").write_text(f"{common / 'objects'}\n")
    log(f"new heads go to {scratch}, which borrows your repository's objects; yours is unchanged")
    _SCRATCH[repo.git_dir] = replace(repo, git_dir=scratch, writable=True)
    return _SCRATCH[repo.git_dir]


_CHECKOUTS: dict[tuple[Path, str], Path | None] = {}


def head_checkout(repo: BenchRepo) -> Path | None:
    """A checkout of the head, for references that need one (`git grep` or `git ls-files` in
    a work tree). A built repository's own work tree; for the user's, a temporary clone outside
    it (`git clone --shared --no-checkout`, then a detached checkout of the head), made once
    per process. None with `--no-checkout`: the caller skips that reference and says so."""
    if repo.worktree is not None:
        return repo.worktree
    if not repo.checkouts:
        return None
    key = (repo.git_dir, repo.head_sha)
    if key not in _CHECKOUTS:
        folder = _temporary_folder("pr-review-bench-checkout-") / "checkout"
        started = time.perf_counter()
        source = repo.source if repo.source is not None else repo.git_dir
        git(
            Path(tempfile.gettempdir()),
            "clone",
            "-q",
            "--shared",
            "--no-checkout",
            str(source),
            str(folder),
        )
        git(folder, "checkout", "-q", "--detach", repo.head_sha)
        log(f"a checkout of the head in {folder} ({time.perf_counter() - started:.1f} s)")
        _CHECKOUTS[key] = folder
    return _CHECKOUTS[key]


def skipped_checkout(report: Report, figure: str) -> None:
    """The line a script prints for a reference that needed a checkout it may not make."""
    report.note(figure, "skipped: --no-checkout (that reference needs a checkout of the head)")


def make_head(repo: BenchRepo, variant: int) -> str:
    """A head commit on the base: a few files changed, two added, one deleted.

    Built with plumbing on a private index, so no work tree is touched and any number of
    distinct heads (one per `variant`) can be made for "a head never seen before". On a built
    repository two of the changes and both new files carry RARE_LITERAL; on the user's own
    (through `writable_repository`) none carries the run's rare literal, which stays absent.
    """
    if not repo.writable:
        raise ValueError("make_head needs writable_repository(repo) for the user's repository")
    cwd, base = repo.git_dir, repo.base_sha
    if repo.planted:
        names = [
            path
            for path in git(cwd, "ls-tree", "-r", "--name-only", "-z", base)
            .decode(errors="surrogateescape")
            .split("\0")
            if path.endswith((".c", ".h", ".py", ".txt"))
        ]
    else:  # any regular file of the user's tree
        names = [
            record.split("\t", 1)[1]
            for record in git(cwd, "ls-tree", "-r", "-z", base)
            .decode(errors="surrogateescape")
            .split("\0")
            if record.startswith(("100644 blob ", "100755 blob "))
        ]
    rng = random.Random(f"head-{variant}")
    chosen = sorted(rng.sample(names, min(12, len(names))))
    with tempfile.TemporaryDirectory() as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        git(cwd, "read-tree", base, env=env)
        updates: list[str] = []
        for number, path in enumerate(chosen):
            old = git(cwd, "cat-file", "blob", f"{base}:{path}")
            marker = (
                RARE_LITERAL if number < 2 and repo.planted else f"bench change {variant}.{number}"
            )
            new = (
                old + f"\n/* {marker} (variant {variant}) */\nint bench_{number}(void);\n".encode()
            )
            updates.append(f"100644 {_hash(cwd, new)}\t{path}")
        for number in range(2):
            planted = RARE_LITERAL if repo.planted else "bench"
            body = f"/* new file {number}, variant {variant}: {planted} */\n" * (1 + number)
            updates.append(f"100644 {_hash(cwd, body.encode())}\tbench/new_{number}.c")
        deleted = names[len(names) // 2] if names else None
        if deleted is not None and deleted not in chosen:
            updates.append(f"0 {'0' * len(base)}\t{deleted}")
        git(
            cwd,
            "update-index",
            "--index-info",
            input_bytes="\n".join(updates).encode() + b"\n",
            env=env,
        )
        tree = git_text(cwd, "write-tree", env=env)
    return git_text(cwd, "commit-tree", tree, "-p", base, "-m", f"bench head {variant}")


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
CACHE_ENV = "PR_REVIEW_BENCH_CACHE_DIR"  # the run's cache directory, inherited by its children


def bench_cache_dir() -> Path:
    """The cache directory of this bench run's store, where the on-disk search indexes live:
    `--cache-dir`, else a fresh temporary folder for the run (removed when it ends). Child
    processes of the run (cold preparations, concurrency's measurements) inherit it."""
    value = os.environ.get(CACHE_ENV)
    if value:
        return Path(value)
    folder = _temporary_folder("pr-review-bench-cache-")
    os.environ[CACHE_ENV] = str(folder)
    return folder


def bench_store() -> Any:
    """The one repository store of this bench process (git/store.py), with the run's cache
    directory, or None on a source from before the store existed. Looked up by name
    (docs/performance.md)."""
    if not _STORES:
        try:
            store_module = importlib.import_module("pr_review_api.git.store")
        except ImportError:
            _STORES.append(None)
        else:
            try:
                store = store_module.RepositoryStore(cache_dir=bench_cache_dir())
            except TypeError:  # a source from before the on-disk search index
                store = store_module.RepositoryStore()
            _STORES.append(store)
    return _STORES[0]


def run_review(target: Any, settings: Any, **options: Any) -> Any:
    """`run_review`'s coroutine with `options` as one `ReviewOptions` value, or by keyword on a
    source from before that value existed."""
    run = importlib.import_module("pr_review_api.loop.run")
    made = getattr(run, "ReviewOptions", None)
    if made is None:
        return run.run_review(target, settings, **options)
    return run.run_review(target, settings, made(**options))


def open_pinned(git_dir: Path, base_sha: str, head_sha: str) -> Any:
    """`PinnedRepository.open` through the bench's store, so heads share indexes and text."""
    repository = importlib.import_module("pr_review_api.git.repository")
    store = bench_store()
    if store is None:
        return repository.PinnedRepository.open(git_dir, base_sha, head_sha)
    return repository.PinnedRepository.open(git_dir, base_sha, head_sha, store=store)


def _wait_for_other_builders(store: Any, git_dir: Path, timeout: float = 1800) -> None:
    """Wait while another process (the bench's parent, a worker) builds the index on disk."""
    index_dir = getattr(store, "index_dir", None)
    folder = index_dir(git_dir) if index_dir is not None else None
    build_lock = None
    # The index's folder module, or the one module of the index before it was split.
    for name in ("pr_review_api.git.search_index.folder", "pr_review_api.git.search_index"):
        with contextlib.suppress(ImportError):
            build_lock = getattr(importlib.import_module(name), "build_lock", None)
        if build_lock is not None:
            break
    if build_lock is None:
        return
    deadline = time.monotonic() + timeout
    while folder is not None and time.monotonic() < deadline:
        with build_lock(folder) as free:
            if free:
                return
        time.sleep(0.2)


def wait_for_search_index(git_dir: Path, store: Any = None) -> None:
    """Let a background build of a repository's search index (on disk) or search text (in
    memory, before that) finish. Looked up by name: the benches also measure sources from
    before either existed (docs/performance.md)."""
    store = bench_store() if store is None else store
    for name in ("indexes", "texts"):
        builds = getattr(store, name, None)
        if builds is not None:
            builds.wait(git_dir)
            _wait_for_other_builders(store, git_dir)
            return
    if store is not None:
        return
    try:
        blobs = importlib.import_module("pr_review_api.git.blobs")
    except ImportError:
        return
    wait = getattr(blobs, "wait_for_text_store", None)
    if wait is not None:
        wait(git_dir)


def run_probe(script: str, arguments: Sequence[str], source: str | None) -> dict[str, object]:
    """Run `script` in a fresh interpreter and return the JSON object its last line prints;
    `source`: the `src` folder of another version of pr-review, imported instead of this one
    (an A/B in one run). A failing probe ends the bench with the end of its stderr."""
    env = dict(os.environ)
    if source is not None:  # found before this version's, which the environment installs
        env["PYTHONPATH"] = source
    done = subprocess.run(
        [sys.executable, "-c", script, *arguments], capture_output=True, check=False, env=env
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr.decode(errors="replace")[-2000:])
    result: dict[str, object] = json.loads(done.stdout.decode().strip().splitlines()[-1])
    return result


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

    def add_samples(
        self, figure: str, ours: Sequence[float], reference_name: str, reference: Sequence[float]
    ) -> None:
        """Medians and ranges of timed samples; the ratio is of the medians."""
        mine, theirs = statistics.median(ours), statistics.median(reference)
        ratio = mine / theirs if theirs > 0 else float("inf")
        self.rows.append(
            (
                figure,
                _spread(ours, _ms),
                f"{_spread(reference, _ms)} ({reference_name})",
                f"{ratio:.2f}x",
            )
        )

    def add_mb(self, figure: str, ours: float, reference_name: str, reference: float) -> None:
        """A memory figure in MB (10^6 bytes) against a reference in MB."""
        ratio = ours / reference if reference > 0 else float("inf")
        self.rows.append(
            (figure, _mb(ours), f"{_mb(reference)} ({reference_name})", f"{ratio:.2f}x")
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


def _mb(megabytes: float) -> str:
    return f"{megabytes:,.1f} MB"


def _spread(samples: Sequence[float], unit: Callable[[float], str]) -> str:
    """`median (lowest-highest)`, the range without its unit when it is the median's; or the
    one value."""
    middle = unit(statistics.median(samples))
    if len(samples) == 1:
        return middle
    low, high = unit(min(samples)), unit(max(samples))
    suffix = " " + middle.split()[-1]
    if low.endswith(suffix) and high.endswith(suffix):
        low, high = low.removesuffix(suffix), high.removesuffix(suffix)
    return f"{middle} ({low}-{high})"


def parser(description: str) -> argparse.ArgumentParser:
    """The options every bench script takes."""
    result = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    result.add_argument(
        "--quick", action="store_true", help="a small synthetic repository, done in seconds"
    )
    result.add_argument(
        "--repo",
        default="auto",
        metavar="auto|kernel|synthetic|PATH",
        help="the repository: a large one the bench builds (auto: the kernel when its tarball "
        "is installed, else synthetic), or the path of your own (a work tree or a bare "
        "repository; only read)",
    )
    result.add_argument("--base", metavar="REV", help="with --repo PATH: the base commit")
    result.add_argument("--head", metavar="REV", help="with --repo PATH: the head (HEAD)")
    result.add_argument(
        "--no-checkout",
        action="store_true",
        help="with --repo PATH: skip the references that need a temporary checkout of the head",
    )
    result.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="the cache directory of the bench's own store (its search indexes on disk); "
        "default: a fresh temporary one for the run",
    )
    result.add_argument("--runs", type=int, default=0, help="timed runs per figure (median)")
    return result


def repository_for(args: argparse.Namespace) -> BenchRepo:
    built = args.quick or args.repo in BUILT_KINDS
    if built and (args.base or args.head or args.no_checkout):
        raise SystemExit("--base, --head and --no-checkout go with --repo PATH")
    if args.quick:
        repo = ensure_repository("quick")
    elif built:
        repo = ensure_repository(args.repo)
    else:
        repo = user_repository(args.repo, args.base, args.head, checkouts=not args.no_checkout)
    if args.cache_dir:
        os.environ[CACHE_ENV] = str(Path(args.cache_dir).expanduser().resolve())
    log(f"cache directory of the bench's store: {bench_cache_dir()}")
    log(repo.describe())
    log_load("start")
    atexit.register(log_load, "end")
    return repo


def log_load(when: str) -> None:
    """The load averages, so a figure can be read against what else ran on the machine."""
    one, five, fifteen = os.getloadavg()
    log(f"load average at the {when}: {one:.2f}, {five:.2f}, {fifteen:.2f}")


def runs_for(args: argparse.Namespace, full: int, quick: int = 3) -> int:
    if args.runs > 0:
        return int(args.runs)
    return quick if args.quick else full


def sample_file(pinned: Any) -> str:
    """A text file for a read or a diff: the largest the change modifies, else the largest it
    adds, else the largest at the head (the user's head may change none)."""
    from pr_review_api.errors import ToolError
    from pr_review_api.tools import ReadFileArguments, read_repository_file

    changed: dict[str, str] = {path: status for status, path in pinned.changed_files()}
    entries = pinned.snapshot.entries
    groups: list[list[str]] = [
        [path for path, status in changed.items() if status == "M"],
        [path for path, status in changed.items() if status == "A"],
        list(pinned.snapshot.files),
    ]
    for group in groups:
        files = [path for path in group if _is_file(entries, path)]
        for path in sorted(files, key=lambda name: int(entries[name].size), reverse=True)[:100]:
            try:
                read_repository_file(pinned, ReadFileArguments(path=path))
            except ToolError:  # binary, not UTF-8, or above the tool's size cap
                continue
            return path
    raise SystemExit("no text file to read at the head")


def _is_file(entries: Any, path: str) -> bool:
    entry = entries.get(path)
    return entry is not None and entry.kind == "file"
