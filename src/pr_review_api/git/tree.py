"""The index of a head commit's tree: entries, directories, link targets, listable files.

`load_snapshot` reads `git ls-tree` as a stream and indexes it within the budgets of a
`limits.Work` (entries, memory, link hops and target bytes) and its deadline;
`derive_snapshot` makes a head's index from a related one's and the trees' difference.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from pr_review_api.errors import ToolError
from pr_review_api.git.blobs import ask_once
from pr_review_api.git.entries import MAX_ENTRY_EDITS, Entries, TreeEntry, collection_paused
from pr_review_api.git.hunks import DIFF_CONFIG
from pr_review_api.git.limits import Work
from pr_review_api.git.ls_tree import ls_tree
from pr_review_api.git.paths import reachable
from pr_review_api.git.symlinks import TreeView, resolve_in
from pr_review_api.git_runner import run_git
from pr_review_api.settings import MAX_PATH_BYTES, MAX_SOURCE_FILE_BYTES

# A head whose tree differs from a cached one's by more entries than this is indexed afresh.
MAX_DERIVED_CHANGES = 20_000
# What differs between two trees: (path, old mode, new mode, new blob id) per entry.
Changes = list[tuple[str, bytes, bytes, str]]


class BlobSource(Protocol):
    """Where an index reads link targets and blob sizes (blobs.BlobReaders)."""

    def read(self, oids: Iterable[str]) -> dict[str, bytes]: ...
    def describe(self, oids: Iterable[str]) -> dict[str, tuple[str, int]]: ...


class OneShotBlobs:
    """A BlobSource of short-lived `git cat-file` processes (no store at hand)."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir

    def read(self, oids: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(oids))
        answers = ask_once(self.git_dir, wanted, contents=True) if wanted else {}
        return {oid: data for oid, (_, _, data) in answers.items()}

    def describe(self, oids: Iterable[str]) -> dict[str, tuple[str, int]]:
        wanted = list(dict.fromkeys(oids))
        answers = ask_once(self.git_dir, wanted, contents=False) if wanted else {}
        return {oid: (kind, size) for oid, (kind, size, _) in answers.items()}


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a derived head's line of derivations starts (`sha`), and each file a search reads
    that differs from that head's (path: blob id and size): a head complete in a search index
    makes the derived head complete once it holds these blobs, however many heads lie between."""

    sha: str
    changed: dict[str, tuple[str, int]]

    def blobs(self) -> list[tuple[str, int]]:
        """The changed files' blobs, once each."""
        return list(dict(self.changed.values()).items())


@dataclass
class Snapshot:
    """An index of the head commit's tree."""

    entries: Entries
    directories: set[str]
    link_targets: dict[str, bytes] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # listable, sorted
    has_nul: dict[str, bool] = field(default_factory=dict)  # by blob oid, filled by searches
    origin: Origin | None = field(default=None, compare=False)  # a derived head's
    _search_bytes: int | None = field(default=None, repr=False, compare=False)
    _links: set[str] | None = field(default=None, repr=False)
    _link_deps: dict[str, frozenset[str]] | None = field(default=None, repr=False)

    def note_links(self, links: set[str], deps: dict[str, frozenset[str]] | None = None) -> None:
        """What its maker already knows of the tree's links (their paths, and for each
        reachable one the paths its resolution looked at), so they are not found again."""
        self._links = links
        if deps is not None:
            self._link_deps = deps

    def note_link_deps(self, deps: dict[str, frozenset[str]]) -> None:
        """The paths each reachable link's resolution looked at, as a listing found them."""
        self._link_deps = deps

    def note_search_bytes(self, total: int | None) -> None:
        """What a search of the whole tree reads, when its maker counted it (None: not yet)."""
        self._search_bytes = total

    def counted_search_bytes(self) -> int | None:
        """`search_bytes()` once it has been counted, else None (nothing is counted here)."""
        return self._search_bytes

    def link_paths(self) -> set[str]:
        """The paths of every symbolic link of the tree."""
        if self._links is None:
            self._links = {path for path, entry in self.entries.items() if entry.kind == "link"}
        return self._links

    def link_deps(self) -> dict[str, frozenset[str]]:
        """For each reachable link, the tree paths its resolution looked at."""
        if self._link_deps is None:
            deps: dict[str, frozenset[str]] = {}
            for path in self.link_paths():
                is_listable(self, path, self.entries[path], deps)
            self._link_deps = deps
        return self._link_deps

    def search_blobs(self) -> Iterator[tuple[str, int]]:
        """(blob id, size) of each file a search of the whole tree reads: regular files of at
        most 1 MiB (a link is searched at its real path; every listed path is reachable)."""
        for entry in self.entries.many(self.files):
            if entry.kind == "file" and entry.size <= MAX_SOURCE_FILE_BYTES:
                yield entry.oid, entry.size

    def search_bytes(self) -> int:
        """The size of the distinct blobs a search of the whole tree reads (for a derived
        head, counted from the snapshot it was derived from and its changes, so a blob added
        at one path while another path holds it counts twice)."""
        if self._search_bytes is None:
            self._search_bytes = sum(dict(self.search_blobs()).values())
        return self._search_bytes


def load_snapshot(
    git_dir: Path, head_sha: str, *, blobs: BlobSource | None = None, work: Work | None = None
) -> Snapshot:
    """Index the head tree: entries, directories, symlink targets and the listable files."""
    work = work if work is not None else Work()
    source = blobs if blobs is not None else OneShotBlobs(git_dir)
    with collection_paused():
        entries, directories = ls_tree(git_dir, head_sha, work)
    # A link target longer than PATH_MAX is never loaded: it cannot be valid (see
    # symlinks.link_parts), and a hostile multi-megabyte target would otherwise sit in memory.
    links = {
        path: entry.oid
        for path, entry in entries.items()
        if entry.kind == "link" and entry.size <= MAX_PATH_BYTES
    }
    work.add_entries(0, sum(entries[path].size for path in links))
    work.check()
    targets = source.read(links.values())
    snapshot = Snapshot(
        Entries(entries), directories, {path: targets.get(oid, b"") for path, oid in links.items()}
    )
    with collection_paused():
        snapshot.files = sorted(_listable(snapshot, entries, work))
    return snapshot


def derive_snapshot(  # noqa: C901  (each early None is a case a full load must handle instead)
    git_dir: Path,
    known: Snapshot,
    known_sha: str,
    head_sha: str,
    *,
    blobs: BlobSource | None = None,
    work: Work | None = None,
    changes: Changes | Literal["compare"] | None = "compare",
) -> Snapshot | None:
    """The head's index made from the index of another commit and the difference of the two
    trees, which costs milliseconds where a full load costs seconds on a large tree.

    The result equals `load_snapshot(git_dir, head_sha)`; None when the trees differ by too
    much for this to pay, or git cannot compare them. `changes`, when given, is what
    `tree_changes(git_dir, known_sha, head_sha)` answered.
    """
    work = work if work is not None else Work()
    source = blobs if blobs is not None else OneShotBlobs(git_dir)
    if changes == "compare":
        changes = tree_changes(git_dir, known_sha, head_sha)
    if changes is None:
        return None
    work.check()
    edits: dict[str, TreeEntry | None] = {}
    directories = set(known.directories)
    link_targets = dict(known.link_targets)
    added: list[tuple[str, bytes, str]] = []
    for path, old_mode, new_mode, new_oid in changes:
        if old_mode == b"040000":
            directories.discard(path)
        elif old_mode != b"000000":
            edits[path] = None
            link_targets.pop(path, None)
        if new_mode == b"040000":
            directories.add(path)
        elif new_mode == b"160000":
            edits[path] = TreeEntry("submodule", new_oid, -1)
        elif new_mode != b"000000":
            added.append((path, new_mode, new_oid))
    sizes = {oid: size for oid, (_, size) in source.describe(oid for _, _, oid in added).items()}
    for path, mode, oid in added:
        if oid in sizes:  # a missing blob is absent, as in a full load
            edits[path] = TreeEntry("link" if mode == b"120000" else "file", oid, sizes[oid])
    entries = known.entries.edited(edits)
    work.add_entries(len(entries) + len(directories), 0)
    touched = {change[0] for change in changes}
    links = {path for path in touched if path in entries and entries[path].kind == "link"}
    fresh = {path: entries[path].oid for path in links if entries[path].size <= MAX_PATH_BYTES}
    targets = source.read(fresh.values())
    link_targets.update({path: targets.get(oid, b"") for path, oid in fresh.items()})
    snapshot = Snapshot(entries, directories, link_targets, has_nul=known.has_nul)
    snapshot.note_links(links | (known.link_paths() - touched))
    snapshot.origin = _origin_of(known, known_sha, edits)
    snapshot.note_search_bytes(_search_bytes_after(known, edits))
    # What a resolution or a listing sees of a path is whether it is a directory, the kind of
    # its entry and, for a link, its target: a file whose content changed is the same to both.
    reshaped = {path for path in touched if _shape(known, path) != _shape(snapshot, path)}
    snapshot.files = _derived_files(known, snapshot, reshaped, work)
    return snapshot


def _search_bytes_after(known: Snapshot, edits: dict[str, TreeEntry | None]) -> int | None:
    """What a search of the head derived from `known` by `edits` reads, counted from what one
    of `known` reads (None while that is not counted yet): a whole-tree walk spared for each
    derived head."""
    total = known.counted_search_bytes()
    if total is None:
        return None
    for path, entry in edits.items():
        old = known.entries.get(path)
        if old is not None and is_searchable(path, old):
            total -= old.size
        if entry is not None and is_searchable(path, entry):
            total += entry.size
    return total


def _origin_of(known: Snapshot, known_sha: str, edits: dict[str, TreeEntry | None]) -> Origin:
    """The origin of a head derived from `known` by `edits`: known's own origin, carried on
    (heads derived one from another, as a busy service's are, all start from one head that
    the index has noted), or `known` itself once the changes since then pile up."""
    carried = known.origin
    if carried is not None and len(carried.changed) + len(edits) <= MAX_ENTRY_EDITS:
        sha, changed = carried.sha, dict(carried.changed)
    else:
        sha, changed = known_sha, {}
    for path, entry in edits.items():
        if entry is not None and is_searchable(path, entry):
            changed[path] = (entry.oid, entry.size)
        else:
            changed.pop(path, None)  # removed, or no longer read by a search
    return Origin(sha, changed)


def _shape(snapshot: Snapshot, path: str) -> tuple[bool, str | None, str | None]:
    entry = snapshot.entries.get(path)
    if entry is None:
        return path in snapshot.directories, None, None
    return path in snapshot.directories, entry.kind, entry.oid if entry.kind == "link" else None


def tree_changes(git_dir: Path, known_sha: str, head_sha: str) -> Changes | None:
    """(path, old mode, new mode, new blob id) of each entry, directories included, that
    differs between two commits' trees; None when there are too many or git fails."""
    found = run_git(
        git_dir,
        [
            "diff",
            "--raw",
            "-r",
            "-t",
            "-z",
            "--no-renames",
            "--no-abbrev",
            "--ignore-submodules=none",
            "--no-ext-diff",
            known_sha,
            head_sha,
        ],
        config=DIFF_CONFIG,
        check=False,
    )
    fields = found.stdout.split(b"\0")
    if found.returncode != 0 or len(fields) > 2 * MAX_DERIVED_CHANGES:
        return None
    changes = []
    for meta, raw_path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta[1:].split()
        if len(parts) != 5 or not meta.startswith(b":"):
            return None
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            continue  # absent from both indexes, as from any
        changes.append((path, parts[0], parts[1], parts[3].decode()))
    return changes


def _derived_files(known: Snapshot, snapshot: Snapshot, touched: set[str], work: Work) -> list[str]:
    """The listable files of `snapshot`, from those of `known` and the paths whose kind or
    link target changed (`touched`)."""
    # A path is judged again when it changed; a link also when a path its resolution looked
    # at changed (a resolution depends on nothing else: see resolve_in's `visited`).
    entries = snapshot.entries
    known_deps = known.link_deps()
    deps: dict[str, frozenset[str]] = {}
    stale = set(touched)
    for link in snapshot.link_paths():
        looked_at = known_deps.get(link)
        if link in touched or looked_at is None or not looked_at.isdisjoint(touched):
            stale.add(link)
        else:
            deps[link] = looked_at
    listable = sorted(
        path
        for path in stale
        if path in entries and is_listable(snapshot, path, entries[path], deps, work)
    )
    snapshot.note_link_deps(deps)
    if len(stale) + len(listable) > 1000:
        files = [path for path in known.files if path not in stale] + listable
        files.sort()
        return files
    files = list(known.files)  # a few edits: cheaper than filtering and sorting them all
    for path in stale:
        index = bisect_left(files, path)
        if index < len(files) and files[index] == path:
            del files[index]
    for path in listable:
        insort(files, path)
    return files


def _listable(snapshot: Snapshot, entries: dict[str, TreeEntry], work: Work) -> Iterator[str]:
    """The listable paths of a freshly loaded snapshot, whose entries are the dict `entries`
    (read directly: the Entries mapping costs a call per lookup)."""
    deps: dict[str, frozenset[str]] = {}
    for count, (path, entry) in enumerate(entries.items()):
        if count % 4096 == 0:
            work.check()
        if entry.kind == "file":
            if reachable(path):
                yield path
        elif is_listable(snapshot, path, entry, deps, work):
            yield path
    snapshot.note_link_deps(deps)


def is_listable(
    snapshot: TreeView,
    path: str,
    entry: TreeEntry,
    deps: dict[str, frozenset[str]],
    work: Work | None = None,
) -> bool:
    """Whether `path` is a listable file; for a link, notes in `deps` the paths it looked at."""
    if entry.kind == "submodule" or not reachable(path):
        return False
    if entry.kind == "file":
        return True
    visited: list[str] = []
    try:
        resolved = resolve_in(snapshot, path, visited, work)
    except ToolError:
        return False  # links out of the tree, into .git, dangling or looping are skipped
    finally:
        deps[path] = frozenset(visited)
    return resolved.entry is not None and resolved.entry.kind == "file"


def is_searchable(path: str, entry: TreeEntry) -> bool:
    """Whether a search reads the entry at `path`: a reachable regular file of at most 1 MiB
    (a link is searched at the path it resolves to)."""
    return entry.kind == "file" and entry.size <= MAX_SOURCE_FILE_BYTES and reachable(path)


def files_under(files: list[str], directory: str) -> tuple[int, int]:
    """The slice of a sorted listing inside a real directory ("" is the root)."""
    if not directory:
        return 0, len(files)
    # "/" sorts just before "0": every path under `directory/` lies below `directory` + "0".
    return bisect_left(files, directory + "/"), bisect_left(files, directory + "0")
