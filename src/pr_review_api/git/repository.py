"""A pinned pair of commits, read straight from git's object store.

Nothing here touches a working tree: paths resolve against an in-memory index of the head
commit's tree, file content comes from blobs, and symbolic links are resolved virtually,
inside that index. A link that leaves the tree, enters `.git` or loops never reaches the
file system, so a hostile repository cannot make a tool read a byte outside it, and an
uncommitted file can never be read.
"""

from __future__ import annotations

import re
import threading
import weakref
from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal, NamedTuple, TypeVar, overload

from pr_review_api.errors import ToolError
from pr_review_api.git.blobs import (
    TextStore,
    describer_for,
    git_grep_turn,
    reader_for,
    text_store,
    wait_for_text_store,
)
from pr_review_api.git.runner import GitConfig, GitError, is_sha, run_git, stream_git
from pr_review_api.settings import MAX_PATH_BYTES, MAX_SOURCE_FILE_BYTES, MAX_SYMLINK_HOPS

EntryKind = Literal["file", "link", "submodule"]
_V = TypeVar("_V")
_T = TypeVar("_T")

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# Code points that HFS+ ignores in names; ".g\u200cit" is ".git" there.
_IGNORABLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u206a-\u206f\ufeff]")

# Output settings a local repository's own config could change; reviews read one format.
DIFF_CONFIG = GitConfig(
    values=(
        ("diff.noprefix", "false"),
        ("diff.mnemonicPrefix", "false"),
        ("diff.relative", "false"),
        # color.ui=false (git.py) loses to a repository's own color.diff=always.
        ("color.diff", "false"),
        # diff.submodule=log/diff would print a submodule's history or content, read from
        # .git/modules, in place of the two gitlink SHAs.
        ("diff.submodule", "short"),
    )
)
# grep.column=true in a repository's config inserts a column field into `-z` records.
GREP_CONFIG = GitConfig(values=(("grep.column", "false"),))

SNAPSHOT_CACHE_SIZE = 8
# How long a search waits for a repository's text store being filled (see grep).
STORE_WAIT_SECONDS = 300.0
# A head whose tree differs from a cached one's by more entries than this is indexed afresh.
MAX_DERIVED_CHANGES = 20_000
# A derived head's entries keep at most this many edits over a shared base (see Entries).
MAX_ENTRY_EDITS = 4096


class TreeEntry(NamedTuple):
    """A non-directory entry of the head tree (a tuple: a kernel tree makes 80,000 of them)."""

    kind: EntryKind
    oid: str
    size: int


class Entries(Mapping[str, TreeEntry]):
    """A tree's entries by path: a dict shared with related trees plus this tree's own edits
    (None: removed), so a head derived from another costs its changes, not a copy of 80,000
    entries (nor the garbage collector's walks over one)."""

    __slots__ = ("_base", "_edits", "_length")

    def __init__(
        self, base: dict[str, TreeEntry], edits: dict[str, TreeEntry | None] | None = None
    ) -> None:
        self._base = base
        self._edits = edits or {}
        self._length = len(base) + sum(
            (value is not None) - (path in base) for path, value in self._edits.items()
        )

    def edited(self, edits: dict[str, TreeEntry | None]) -> Entries:
        """These entries with `edits` applied; the base is rebuilt once edits pile up."""
        merged = {**self._edits, **edits}
        if len(merged) <= MAX_ENTRY_EDITS:
            return Entries(self._base, merged)
        base = dict(self._base)
        for path, entry in merged.items():
            if entry is None:
                base.pop(path, None)
            else:
                base[path] = entry
        return Entries(base)

    def many(self, paths: Iterable[str]) -> list[TreeEntry]:
        """The entries of `paths`, all present (a fast loop for whole-tree walks)."""
        base, edits = self._base, self._edits
        if not edits:
            return [base[path] for path in paths]
        found: list[TreeEntry] = []
        for path in paths:
            entry = edits[path] if path in edits else base[path]
            if entry is None:
                raise KeyError(path)
            found.append(entry)
        return found

    @overload
    def get(self, key: str, /) -> TreeEntry | None: ...
    @overload
    def get(self, key: str, /, default: TreeEntry | _T) -> TreeEntry | _T: ...
    def get(self, key: str, /, default: object = None) -> object:
        edits = self._edits
        if key in edits:
            value = edits[key]
            return default if value is None else value
        return self._base.get(key, default)

    def __getitem__(self, key: str) -> TreeEntry:
        entry = self.get(key)
        if entry is None:
            raise KeyError(key)
        return entry

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.get(key) is not None

    def __iter__(self) -> Iterator[str]:
        edits = self._edits
        yield from (path for path in self._base if path not in edits)
        yield from (path for path, entry in edits.items() if entry is not None)

    def __len__(self) -> int:
        return self._length


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """Where a requested path lands after symbolic links: a directory or an entry."""

    path: str  # repository-relative, "" for the root
    entry: TreeEntry | None  # None for a directory


@dataclass(frozen=True, slots=True)
class Revisions:
    """The three commits of a review; all full SHAs."""

    base_sha: str
    head_sha: str
    merge_base_sha: str


def is_dot_git(component: str) -> bool:
    """Whether a name is `.git` or a look-alike a case- or space-folding file system takes as it."""
    return _IGNORABLE.sub("", component).rstrip(" .").casefold() == ".git"


def split_path(raw: str) -> list[str]:
    """Check a requested repository path and split it into components.

    Absolute, drive, UNC and `..` paths point outside the repository; NULs, control
    characters, backslashes and `.git` components are invalid. `.` and empty components
    are dropped, so "./src//a.py" names "src/a.py" and "" names the root.
    """
    try:
        # A lone surrogate cannot become a git argument (UnicodeEncodeError in Popen) nor a
        # tree path, so it is refused here rather than raised from a tool.
        size = len(raw.encode("utf-8"))
    except UnicodeEncodeError:
        raise ToolError("invalid_path", "The path is not valid UTF-8.") from None
    if size > MAX_PATH_BYTES:
        raise ToolError("invalid_path", "The path is too long.")
    if raw.startswith("/") or _DRIVE.match(raw):
        raise ToolError("outside_repository", "Absolute paths are not allowed.")
    if _CONTROL.search(raw) or "\\" in raw:
        raise ToolError("invalid_path", "The path contains a forbidden character.")
    parts = [part for part in raw.split("/") if part not in ("", ".")]
    for part in parts:
        if part == "..":
            raise ToolError("outside_repository", "Parent-directory components are not allowed.")
        if is_dot_git(part):
            raise ToolError("invalid_path", "Git's internal directory cannot be read.")
    return parts


# Paths of these characters, no component starting with ".", pass split_path unchanged: the
# fast path of _reachable, which nearly every path of a real tree takes.
_PLAIN_PATH = re.compile(r"[\w+,=@~-][\w.+,=@~-]*(?:/[\w+,=@~-][\w.+,=@~-]*)*", re.ASCII)


def _reachable(path: str) -> bool:
    """Whether a path stored in the tree could be named by a request (and so shown)."""
    if len(path) <= MAX_PATH_BYTES and _PLAIN_PATH.fullmatch(path):
        return True
    try:
        return split_path(path) == path.split("/")
    except ToolError:
        return False


@dataclass
class Snapshot:
    """An index of the head commit's tree."""

    entries: Entries
    directories: set[str]
    link_targets: dict[str, bytes] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # listable, sorted
    has_nul: dict[str, bool] = field(default_factory=dict)  # by blob oid, filled by searches
    _search_oids: list[str | None] | None = field(default=None, repr=False)
    _search_bytes: int | None = field(default=None, repr=False)
    _text_store: weakref.ref[TextStore] | None = field(default=None, repr=False)
    _links: set[str] | None = field(default=None, repr=False)
    _link_deps: dict[str, frozenset[str]] | None = field(default=None, repr=False)

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
                _is_listable(self, path, self.entries[path], deps)
            self._link_deps = deps
        return self._link_deps

    def search_oids(self) -> list[str | None]:
        """For each of `files`, the blob a search reads, or None: a search reads regular files
        of at most 1 MiB (a link is found at its real path)."""
        if self._search_oids is None:
            self._search_oids = [
                entry.oid if entry.kind == "file" and entry.size <= MAX_SOURCE_FILE_BYTES else None
                for entry in self.entries.many(self.files)
            ]
        return self._search_oids

    def search_blobs(self) -> Iterator[tuple[str, int]]:
        """(blob id, size) of each file a search of the whole tree reads."""
        entries = self.entries.many(self.files)
        for entry, oid in zip(entries, self.search_oids(), strict=True):
            if oid is not None:
                yield oid, entry.size

    def search_bytes(self) -> int:
        """The size of the distinct blobs a search of the whole tree reads."""
        if self._search_bytes is None:
            self._search_bytes = sum(dict(self.search_blobs()).values())
        return self._search_bytes


# One `ls-tree -l -z` record: mode, type, id, size ("-" for trees, "BAD" when missing), path.
_LS_TREE_RECORD = re.compile(rb"([0-7]+) ([a-z]+) ([0-9a-f]+) +([^\t ]+)\t([^\0]*)\0")


def _parse_ls_tree(output: bytes) -> tuple[dict[str, TreeEntry], set[str]]:
    entries: dict[str, TreeEntry] = {}
    directories: set[str] = {""}
    position = 0
    for record in _LS_TREE_RECORD.finditer(output):
        if record.start() != position:  # never from git; a path cannot open a record
            raise GitError(["ls-tree"], 0, b"unexpected ls-tree output")
        position = record.end()
        mode, kind, raw_oid, size, raw_path = record.groups()
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a name no JSON request can spell is simply absent
        oid = raw_oid.decode()
        if kind == b"tree":
            directories.add(path)
        elif kind == b"commit":
            entries[path] = TreeEntry("submodule", oid, -1)
        elif not size.isdigit():
            continue  # "BAD": the blob is missing from the object store, so unavailable
        elif mode == b"120000":
            entries[path] = TreeEntry("link", oid, int(size))
        else:
            entries[path] = TreeEntry("file", oid, int(size))
    if position != len(output):
        raise GitError(["ls-tree"], 0, b"unexpected ls-tree output")
    return entries, directories


def read_blobs(git_dir: Path, oids: Iterable[str]) -> dict[str, bytes]:
    """Read blobs through the repository's long-lived `git cat-file --batch` (see blobs.py)."""
    return reader_for(git_dir).read(oids)


def blob_sizes(git_dir: Path, oids: Iterable[str]) -> dict[str, int]:
    """The size of each blob that exists, through the repository's `cat-file --batch-check`."""
    return {oid: size for oid, (_, size) in describer_for(git_dir).describe(oids).items()}


def load_snapshot(git_dir: Path, head_sha: str) -> Snapshot:
    """Index the head tree: entries, directories, symlink targets and the listable files."""
    listing = run_git(git_dir, ["ls-tree", "-r", "-t", "-l", "-z", "--full-tree", head_sha])
    entries, directories = _parse_ls_tree(listing.stdout)
    # A link target longer than PATH_MAX is never loaded: it cannot be valid (see
    # _link_parts), and a hostile multi-megabyte target would otherwise sit in memory.
    links = {
        path: entry.oid
        for path, entry in entries.items()
        if entry.kind == "link" and entry.size <= MAX_PATH_BYTES
    }
    blobs = read_blobs(git_dir, links.values())
    targets = {path: blobs.get(oid, b"") for path, oid in links.items()}
    snapshot = Snapshot(Entries(entries), directories, targets)
    snapshot.files = sorted(_listable(snapshot))
    return snapshot


def derive_snapshot(
    git_dir: Path, known: Snapshot, known_sha: str, head_sha: str
) -> Snapshot | None:
    """The head's index made from the index of another commit and the difference of the two
    trees, which costs milliseconds where a full load costs seconds on a large tree.

    The result equals `load_snapshot(git_dir, head_sha)`; None when the trees differ by too
    much for this to pay, or git cannot compare them.
    """
    changes = _tree_changes(git_dir, known_sha, head_sha)
    if changes is None:
        return None
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
    sizes = blob_sizes(git_dir, (oid for _, _, oid in added))
    for path, mode, oid in added:
        if oid in sizes:  # a missing blob is absent, as in a full load
            edits[path] = TreeEntry("link" if mode == b"120000" else "file", oid, sizes[oid])
    entries = known.entries.edited(edits)
    touched = {change[0] for change in changes}
    links = {path for path in touched if path in entries and entries[path].kind == "link"}
    fresh = {path: entries[path].oid for path in links if entries[path].size <= MAX_PATH_BYTES}
    blobs = read_blobs(git_dir, fresh.values())
    link_targets.update({path: blobs.get(oid, b"") for path, oid in fresh.items()})
    snapshot = Snapshot(entries, directories, link_targets, has_nul=known.has_nul)
    snapshot._links = links | (known.link_paths() - touched)
    # What a resolution or a listing sees of a path is whether it is a directory, the kind of
    # its entry and, for a link, its target: a file whose content changed is the same to both.
    reshaped = {path for path in touched if _shape(known, path) != _shape(snapshot, path)}
    snapshot.files = _derived_files(known, snapshot, reshaped)
    return snapshot


def _shape(snapshot: Snapshot, path: str) -> tuple[bool, str | None, str | None]:
    entry = snapshot.entries.get(path)
    if entry is None:
        return path in snapshot.directories, None, None
    return path in snapshot.directories, entry.kind, entry.oid if entry.kind == "link" else None


def _tree_changes(
    git_dir: Path, known_sha: str, head_sha: str
) -> list[tuple[str, bytes, bytes, str]] | None:
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


def _derived_files(known: Snapshot, snapshot: Snapshot, touched: set[str]) -> list[str]:
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
        if path in entries and _is_listable(snapshot, path, entries[path], deps)
    )
    snapshot._link_deps = deps
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


def _listable(snapshot: Snapshot) -> Iterator[str]:
    deps: dict[str, frozenset[str]] = {}
    for path, entry in snapshot.entries.items():
        if _is_listable(snapshot, path, entry, deps):
            yield path
    snapshot._link_deps = deps


def _is_listable(
    snapshot: Snapshot, path: str, entry: TreeEntry, deps: dict[str, frozenset[str]]
) -> bool:
    """Whether `path` is a listable file; for a link, notes in `deps` the paths it looked at."""
    if entry.kind == "submodule" or not _reachable(path):
        return False
    if entry.kind == "file":
        return True
    visited: list[str] = []
    try:
        resolved = resolve_in(snapshot, path, visited)
    except ToolError:
        return False  # links out of the tree, into .git, dangling or looping are skipped
    finally:
        deps[path] = frozenset(visited)
    return resolved.entry is not None and resolved.entry.kind == "file"


def resolve_in(snapshot: Snapshot, raw: str, visited: list[str] | None = None) -> ResolvedPath:
    """Resolve a requested path inside the tree, following symbolic links virtually.

    `visited`, when given, receives every tree path looked up on the way: the result depends
    on the entries, directories and link targets at those paths and on nothing else.
    """
    pending = deque(split_path(raw))
    resolved: list[str] = []
    hops = 0
    while pending:
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":  # only a link target can bring one here
            if not resolved:
                raise ToolError("outside_repository", "The path resolves outside the repository.")
            resolved.pop()
            continue
        if is_dot_git(part):
            raise ToolError("outside_repository", "The path resolves into Git's internal data.")
        candidate = "/".join([*resolved, part])
        if visited is not None:
            visited.append(candidate)
        entry = snapshot.entries.get(candidate)
        if entry is None:
            if candidate not in snapshot.directories:
                raise ToolError("path_not_found", "The requested path does not exist.")
            resolved.append(part)
        elif entry.kind == "link":
            hops += 1
            if hops > MAX_SYMLINK_HOPS:
                raise ToolError("invalid_path", "The path has too many levels of symbolic links.")
            pending.extendleft(reversed(_link_parts(snapshot.link_targets.get(candidate))))
        elif pending:
            raise ToolError("path_not_found", "The requested path does not exist.")
        else:
            return ResolvedPath(candidate, entry)
    return ResolvedPath("/".join(resolved), None)


def _link_parts(target: bytes | None) -> list[str]:
    # As Linux, refuse a target longer than PATH_MAX (None: too long to have been loaded).
    # Without this bound one looping multi-megabyte link cost seconds on every resolution
    # (and on every snapshot load, which resolves each link to list it).
    if target is None or len(target) > MAX_PATH_BYTES:
        raise ToolError("invalid_path", "A symbolic link on the path is not valid.")
    try:
        text = target.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError("invalid_path", "A symbolic link on the path is not valid.") from None
    if not text or text.startswith("/") or _DRIVE.match(text):
        raise ToolError("outside_repository", "The path resolves outside the repository.")
    if _CONTROL.search(text) or "\\" in text:
        raise ToolError("invalid_path", "A symbolic link on the path is not valid.")
    return text.split("/")


class _SnapshotCache:
    """Recently used snapshots, so a head reviewed again needs no new index.

    A head of a repository with a cached snapshot is derived from it (`derive_snapshot`);
    concurrent requests for one head wait for a single load, and while a repository's first
    full load runs, its other new heads wait for it rather than each loading in full.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        self._loading: dict[tuple[str, str], threading.Event] = {}
        self._full_loads: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def get(self, git_dir: Path, head_sha: str) -> Snapshot:
        key = (str(git_dir), head_sha)
        while True:
            with self._lock:
                if key in self._items:
                    self._items.move_to_end(key)
                    return self._items[key]
                pending = self._loading.get(key)
                if pending is None:
                    self._loading[key] = threading.Event()
                    break
            pending.wait()
        try:
            snapshot = self._load(git_dir, head_sha)
            with self._lock:
                self._items[key] = snapshot
                while len(self._items) > self._size:
                    self._items.popitem(last=False)
            return snapshot
        finally:
            with self._lock:
                self._loading.pop(key).set()

    def _load(self, git_dir: Path, head_sha: str) -> Snapshot:
        repository = str(git_dir)
        with self._lock:
            related = self._latest(repository)
            running = self._full_loads.get(repository) if related is None else None
            if related is None and running is None:
                self._full_loads[repository] = threading.Event()
        if running is not None:
            running.wait()
            with self._lock:
                related = self._latest(repository)
        if related is not None:
            derived = derive_snapshot(git_dir, related[1], related[0], head_sha)
            return derived if derived is not None else load_snapshot(git_dir, head_sha)
        if running is not None:  # that full load failed: this one goes on its own
            return load_snapshot(git_dir, head_sha)
        try:
            return load_snapshot(git_dir, head_sha)
        finally:
            with self._lock:
                self._full_loads.pop(repository).set()

    def _latest(self, repository: str) -> tuple[str, Snapshot] | None:
        for (directory, sha), snapshot in reversed(self._items.items()):
            if directory == repository:
                return sha, snapshot
        return None

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_snapshots = _SnapshotCache(SNAPSHOT_CACHE_SIZE)
# Merge bases and changed files of recently pinned pairs: commits never change.
_merge_bases: OrderedDict[tuple[str, str, str], str] = OrderedDict()
_changes: OrderedDict[tuple[str, str, str], list[tuple[str, str]]] = OrderedDict()
_PAIR_CACHE_SIZE = 256
_pair_lock = threading.Lock()


def _remember(
    cache: OrderedDict[tuple[str, str, str], _V], key: tuple[str, str, str], value: _V
) -> None:
    with _pair_lock:
        cache[key] = value
        while len(cache) > _PAIR_CACHE_SIZE:
            cache.popitem(last=False)


def _recall(cache: OrderedDict[tuple[str, str, str], _V], key: tuple[str, str, str]) -> _V | None:
    with _pair_lock:
        value = cache.get(key)
        if value is not None:
            cache.move_to_end(key)
        return value


@dataclass(frozen=True)
class GrepMatch:
    """One raw `git grep` hit."""

    path: str
    line: int
    text: bytes


class PinnedRepository:
    """The repository a review reads: a git directory and three pinned commits."""

    def __init__(self, git_dir: Path, revisions: Revisions) -> None:
        for sha in (revisions.base_sha, revisions.head_sha, revisions.merge_base_sha):
            if not is_sha(sha):
                raise ValueError("revisions must be full SHAs")
        self.git_dir = git_dir
        self.revisions = revisions
        self.snapshot = _snapshots.get(git_dir, revisions.head_sha)

    @classmethod
    def open(cls, git_dir: Path, base_sha: str, head_sha: str) -> PinnedRepository:
        """Pin a base and a head commit; the diff will run from their merge base."""
        key = (str(git_dir), base_sha, head_sha)
        merge_base = _recall(_merge_bases, key)
        if merge_base is None:
            found = run_git(git_dir, ["merge-base", base_sha, head_sha], check=False)
            merge_base = found.stdout.decode().strip() if found.returncode == 0 else base_sha
            if found.returncode == 0 and is_sha(merge_base):
                _remember(_merge_bases, key, merge_base)
        return cls(
            git_dir, Revisions(base_sha, head_sha, merge_base if is_sha(merge_base) else base_sha)
        )

    # --- paths ---

    def resolve(self, raw: str) -> ResolvedPath:
        """Resolve a requested path at the head commit."""
        return resolve_in(self.snapshot, raw)

    def resolve_directory(self, raw: str) -> str:
        """The real directory a requested path names, or a tool error."""
        resolved = self.resolve(raw)
        if resolved.entry is not None:
            raise ToolError("not_a_directory", "The requested path is not a directory.")
        return resolved.path

    def resolve_file(self, raw: str) -> ResolvedPath:
        """The regular file a requested path names, or a tool error."""
        resolved = self.resolve(raw)
        if resolved.entry is None or resolved.entry.kind != "file":
            raise ToolError("not_a_file", "The requested path is not a regular file.")
        return resolved

    def files_under(self, directory: str) -> tuple[int, int]:
        """The slice of `snapshot.files` inside a real directory ("" is the root)."""
        files = self.snapshot.files
        if not directory:
            return 0, len(files)
        prefix = directory + "/"
        # "/" sorts just before "0": every path under `prefix` lies below prefix[:-1] + "0".
        return bisect_left(files, prefix), bisect_left(files, directory + "0")

    def page_start(self, directory: str, cursor: str) -> int:
        """Index of the first listable path after `cursor` in the directory's slice."""
        start, _ = self.files_under(directory)
        return max(start, bisect_right(self.snapshot.files, cursor))

    # --- content ---

    def read_source(self, file: ResolvedPath) -> str:
        """A regular file's text, or binary_file / file_too_large."""
        assert file.entry is not None
        if file.entry.size > MAX_SOURCE_FILE_BYTES:
            raise ToolError("file_too_large", "The file is larger than 1 MiB.")
        data = read_blobs(self.git_dir, [file.entry.oid]).get(file.entry.oid, b"")
        if b"\0" in data:
            raise ToolError("binary_file", "The file is binary.")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError("binary_file", "The file is not UTF-8 text.") from None

    def line_counts(self, files: Iterable[ResolvedPath]) -> dict[str, int]:
        """Lines of regular files of any size, as an editor numbers them, by blob id."""
        blobs = read_blobs(self.git_dir, (file.entry.oid for file in files if file.entry))
        return {
            oid: data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
            for oid, data in blobs.items()
        }

    def is_searchable(self, path: str) -> bool:
        """Whether a search may report a hit in `path` (regular, reachable, not oversized)."""
        entry = self.snapshot.entries.get(path)
        return (
            entry is not None
            and entry.kind == "file"
            and entry.size <= MAX_SOURCE_FILE_BYTES
            and _reachable(path)
        )

    def is_binary(self, path: str) -> bool:
        """Whether a file holds a NUL byte anywhere, as `read_source` judges binary files.

        `git grep -I` sniffs only the first 8000 bytes and obeys the repository's own
        attributes (`* text` in .git/info/attributes turns the check off), so a search
        asks here before it reports a hit.
        """
        oid = self.snapshot.entries[path].oid
        known = self.snapshot.has_nul.get(oid)
        if known is None:
            known = b"\0" in read_blobs(self.git_dir, [oid]).get(oid, b"")
            self.snapshot.has_nul[oid] = known
        return known

    def grep(self, query: str, pathspec: str) -> Iterator[GrepMatch]:
        """Stream case-sensitive literal hits at the head commit; stop reading when dropped.

        On a large repository whose text store holds the head's blobs (blobs.py) the hits
        come from memory: the lines `git grep -F -n -I` finds, in its order, in the files a
        search may report (regular, reachable, at most 1 MiB, no NUL byte; attributes do not
        hide a text file). Otherwise `git grep` runs, and the store is filled for next time.
        """
        store = self._text_store()
        if store is None:
            with git_grep_turn(self.git_dir) as turn:
                if turn:
                    yield from self._git_grep(query, pathspec)
                    return
            wait_for_text_store(self.git_dir, STORE_WAIT_SECONDS)
            store = self._text_store()
        if store is None:  # the store could not be filled: git grep after all
            yield from self._git_grep(query, pathspec)
            return
        yield from self._grep_store(store, query, pathspec)

    def _git_grep(self, query: str, pathspec: str) -> Iterator[GrepMatch]:
        args = ["grep", "-F", "-n", "-I", "-z", "--no-color", "-e", query, self.revisions.head_sha]
        if pathspec:
            args += ["--", pathspec]
        prefix = self.revisions.head_sha.encode() + b":"
        with stream_git(self.git_dir, args, config=GREP_CONFIG) as process:
            assert process.stdout is not None
            yield from _parse_grep(process.stdout, prefix)

    def _text_store(self) -> TextStore | None:
        snapshot = self.snapshot
        cached = snapshot._text_store() if snapshot._text_store is not None else None
        if cached is not None and not cached.dropped:
            return cached
        store = text_store(self.git_dir, snapshot.search_bytes(), snapshot.search_blobs)
        snapshot._text_store = None if store is None else weakref.ref(store)
        return store

    def _grep_store(self, store: TextStore, query: str, pathspec: str) -> Iterator[GrepMatch]:
        snapshot = self.snapshot
        files, oids = snapshot.files, snapshot.search_oids()
        scope = zip(files, oids, strict=True)
        if pathspec:  # a literal pathspec: the path itself, or everything under it
            start, end = self.files_under(pathspec)
            exact = bisect_left(files, pathspec)
            if exact < len(files) and files[exact] == pathspec:
                start, end = exact, exact + 1  # a file has nothing under it
            scope = zip(files[start:end], oids[start:end], strict=True)
        for path, line, text in store.search(scope, query.encode("utf-8", "surrogateescape")):
            snapshot.has_nul[snapshot.entries[path].oid] = False
            yield GrepMatch(path, line, text)

    def diff(self, paths: list[str], max_bytes: int) -> tuple[bytes, bool]:
        """At most `max_bytes` of the merge-base-to-head diff and whether there was more."""
        args = [
            "-c",
            "core.pager=cat",
            "-c",
            "diff.external=",
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            self.revisions.merge_base_sha,
            self.revisions.head_sha,
            "--",
            *paths,
        ]
        with stream_git(self.git_dir, args, config=DIFF_CONFIG) as process:
            assert process.stdout is not None
            data = process.stdout.read(max_bytes + 1)
        return data[:max_bytes], len(data) > max_bytes

    def changed_files(self) -> list[tuple[str, str]]:
        """(status letter, path) for each file changed from merge base to head."""
        key = (str(self.git_dir), self.revisions.merge_base_sha, self.revisions.head_sha)
        known = _recall(_changes, key)
        if known is None:
            known = self._changed_files()
            _remember(_changes, key, known)
        return list(known)

    def _changed_files(self) -> list[tuple[str, str]]:
        output = run_git(
            self.git_dir,
            [
                "diff",
                "--name-status",
                "-z",
                "--no-renames",
                "--no-ext-diff",
                self.revisions.merge_base_sha,
                self.revisions.head_sha,
            ],
            config=DIFF_CONFIG,
        ).stdout
        fields = output.split(b"\0")
        changes = []
        for status, path in zip(fields[0::2], fields[1::2], strict=False):
            if status and path:
                changes.append((status.decode(errors="replace"), path.decode(errors="replace")))
        return changes


def _parse_grep(stream: IO[bytes], prefix: bytes) -> Iterator[GrepMatch]:
    """Parse `git grep -z` output: `<rev>:<path>\\0<line>\\0<text>\\n`.

    The path is read up to its NUL and the text up to its newline, so a newline in a path or
    a NUL in a line cannot shift the records that follow.
    """
    buffer = b""
    while chunk := stream.read(65536):
        buffer += chunk
        position = 0
        while True:
            path_end = buffer.find(b"\0", position)
            line_end = buffer.find(b"\0", path_end + 1) if path_end >= 0 else -1
            text_end = buffer.find(b"\n", line_end + 1) if line_end >= 0 else -1
            if text_end < 0:
                break
            raw_path = buffer[position:path_end]
            line = buffer[path_end + 1 : line_end]
            text = buffer[line_end + 1 : text_end]
            position = text_end + 1
            if not raw_path.startswith(prefix) or not line.isdigit():
                continue
            try:
                path = raw_path[len(prefix) :].decode("utf-8")
            except UnicodeDecodeError:
                continue
            yield GrepMatch(path, int(line), text)
        buffer = buffer[position:]


def resolve_commit(git_dir: Path, revision: str) -> str | None:
    """The full SHA of the commit `revision` names, or None."""
    if not revision or revision.startswith("-") or "\0" in revision:
        return None
    if is_sha(revision):  # the common case needs no new process; a tag is peeled below
        try:
            kind = describer_for(git_dir).describe([revision]).get(revision, ("missing", 0))[0]
        except GitError:
            kind = "tag"
        if kind != "tag":
            return revision if kind == "commit" else None
    try:
        found = run_git(
            git_dir,
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"],
        )
    except GitError:
        return None
    sha = found.stdout.decode(errors="replace").strip()
    return sha if is_sha(sha) else None
