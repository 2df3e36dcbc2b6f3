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
from bisect import bisect_left, bisect_right
from collections import OrderedDict, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Literal

from pr_review_api.errors import ToolError
from pr_review_api.git import GitConfig, GitError, is_sha, run_git, stream_git
from pr_review_api.settings import MAX_PATH_BYTES, MAX_SOURCE_FILE_BYTES, MAX_SYMLINK_HOPS

EntryKind = Literal["file", "link", "submodule"]

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


@dataclass(frozen=True, slots=True)
class TreeEntry:
    """A non-directory entry of the head tree."""

    kind: EntryKind
    oid: str
    size: int


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


def _reachable(path: str) -> bool:
    """Whether a path stored in the tree could be named by a request (and so shown)."""
    try:
        return split_path(path) == path.split("/")
    except ToolError:
        return False


@dataclass
class Snapshot:
    """An index of the head commit's tree."""

    entries: dict[str, TreeEntry]
    directories: set[str]
    link_targets: dict[str, bytes] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # listable, sorted
    has_nul: dict[str, bool] = field(default_factory=dict)  # by blob oid, filled by searches


def _parse_ls_tree(output: bytes) -> tuple[dict[str, TreeEntry], set[str]]:
    entries: dict[str, TreeEntry] = {}
    directories: set[str] = {""}
    for record in output.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        try:
            path = raw_path.decode("utf-8")
        except UnicodeDecodeError:
            continue  # a name no JSON request can spell is simply absent
        mode, kind, oid, size = meta.split()
        if kind == b"tree":
            directories.add(path)
        elif kind == b"commit":
            entries[path] = TreeEntry("submodule", oid.decode(), -1)
        elif not size.isdigit():
            continue  # "BAD": the blob is missing from the object store, so unavailable
        elif mode == b"120000":
            entries[path] = TreeEntry("link", oid.decode(), int(size))
        else:
            entries[path] = TreeEntry("file", oid.decode(), int(size))
    return entries, directories


def read_blobs(git_dir: Path, oids: Iterable[str]) -> dict[str, bytes]:
    """Read blobs through one `git cat-file --batch`."""
    wanted = list(dict.fromkeys(oids))
    if not wanted:
        return {}
    output = run_git(
        git_dir, ["cat-file", "--batch"], input_bytes="\n".join(wanted).encode() + b"\n"
    )
    data = output.stdout
    blobs: dict[str, bytes] = {}
    offset = 0
    for oid in wanted:
        header_end = data.index(b"\n", offset)
        header = data[offset:header_end].split()
        if len(header) != 3:  # "<oid> missing"
            offset = header_end + 1
            continue
        size = int(header[2])
        start = header_end + 1
        blobs[oid] = data[start : start + size]
        offset = start + size + 1
    return blobs


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
    snapshot = Snapshot(entries, directories, {p: blobs.get(oid, b"") for p, oid in links.items()})
    snapshot.files = sorted(_listable(snapshot))
    return snapshot


def _listable(snapshot: Snapshot) -> Iterator[str]:
    for path, entry in snapshot.entries.items():
        if entry.kind == "submodule" or not _reachable(path):
            continue
        if entry.kind == "file":
            yield path
            continue
        try:
            resolved = resolve_in(snapshot, path)
        except ToolError:
            continue  # links out of the tree, into .git, dangling or looping are skipped
        if resolved.entry is not None and resolved.entry.kind == "file":
            yield path


def resolve_in(snapshot: Snapshot, raw: str) -> ResolvedPath:
    """Resolve a requested path inside the tree, following symbolic links virtually."""
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
    """Recently used snapshots, so a head reviewed again needs no new index."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[tuple[str, str], Snapshot] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, git_dir: Path, head_sha: str) -> Snapshot:
        key = (str(git_dir), head_sha)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        snapshot = load_snapshot(git_dir, head_sha)
        with self._lock:
            self._items[key] = snapshot
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return snapshot


_snapshots = _SnapshotCache(SNAPSHOT_CACHE_SIZE)


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
        found = run_git(git_dir, ["merge-base", base_sha, head_sha], check=False)
        merge_base = found.stdout.decode().strip() if found.returncode == 0 else base_sha
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
        """Stream case-sensitive literal hits at the head commit; stop reading when dropped."""
        args = ["grep", "-F", "-n", "-I", "-z", "--no-color", "-e", query, self.revisions.head_sha]
        if pathspec:
            args += ["--", pathspec]
        prefix = self.revisions.head_sha.encode() + b":"
        with stream_git(self.git_dir, args, config=GREP_CONFIG) as process:
            assert process.stdout is not None
            yield from _parse_grep(process.stdout, prefix)

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
    try:
        found = run_git(
            git_dir,
            ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}"],
        )
    except GitError:
        return None
    sha = found.stdout.decode(errors="replace").strip()
    return sha if is_sha(sha) else None
