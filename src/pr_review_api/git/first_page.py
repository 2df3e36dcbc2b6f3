"""The first page of a listing read from the head's tree objects, while its index is built.

A never-seen head's index (tree.load_snapshot) reads the whole tree: on the kernel that is
`ls-tree -r` and the parse of 80,000 records, several times `ls-tree -r` alone. A first page
needs only the few tree objects it covers: the directory's ancestors and the trees the page
walks into. `HeadTree` reads those on demand through the repository's `cat-file` processes
and answers what the index would (it is a `symlinks.TreeView`, so links resolve in it by the
same code), and `HeadTree.listed` walks a directory in git's tree order.

Why the walk's order is the index's: git lists a tree recursively in its entries' stored
order, which is sorted when every entry's name compares as itself and a subtree's as its name
plus "/"; for names without "/" or NUL that order is exactly the sorted order of the full
paths (as bytes, which is UTF-8 text's code-point order, the order of `Snapshot.files`). So
when every tree read is strictly in that order, with no name git's own checks reject (empty,
or holding "/"), the page's paths are the index's first ones, and every path after the page
lies in a tree not yet read, which sorts after the page's last path as a whole. Anything else
(a tree out of order, such a name, an object missing or of the wrong kind, a tree larger than
MAX_TREE_BYTES, a walk past MAX_TREES trees) raises `Uncertain`: the caller waits for the
index instead. What the index alone knows (the preparation's budgets over the whole tree, a
corrupt object anywhere) is not checked here: the next call that needs the index raises it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from pr_review_api.git.entries import TreeEntry
from pr_review_api.git.paths import reachable
from pr_review_api.git.tree import BlobSource, is_listable
from pr_review_api.settings import MAX_PATH_BYTES

# A tree object larger than this (about 25,000 entries) is left to the index, whose budgets
# judge a wide tree before any of it is parsed.
MAX_TREE_BYTES = 1 << 20
# A page that needs more tree objects than this (directories of submodules or unlistable
# names, one after another) waits for the index instead.
MAX_TREES = 256
_OID_BYTES = 20  # SHA-1, as everywhere in the project (git_runner.is_sha)
_TYPE_BITS = 0o170000
_REGULAR, _LINK, _DIRECTORY = 0o100000, 0o120000, 0o040000


class Uncertain(Exception):
    """The tree objects read cannot show the index's answer: wait for the index."""


@dataclass(slots=True)
class _Tree:
    """One tree object: its non-directories and subtrees by name, and every name in order."""

    entries: dict[str, TreeEntry] = field(default_factory=dict)
    trees: dict[str, str] = field(default_factory=dict)  # name -> tree id
    order: list[tuple[str, bool]] = field(default_factory=list)  # (name, is a tree)


class HeadTree:
    """The head commit's tree as an index would see it, read a tree object at a time."""

    def __init__(self, objects: BlobSource, head_sha: str) -> None:
        self._objects = objects
        self._head_sha = head_sha
        self._trees: dict[str, _Tree | None] = {}  # by directory path; None: not a directory
        self._kinds: dict[str, tuple[str, int]] = {}  # subtree id -> (type, size), as described
        self._targets: dict[str, bytes | None] = {}
        self.entries = _Entries(self)
        self.directories = _Directories(self)
        self.link_targets = _LinkTargets(self)

    def listed(self, directory: str, count: int) -> list[str]:
        """The first `count` listable paths under a real directory, in the index's order."""
        listed: list[str] = []
        for path in self._walk(directory):
            listed.append(path)
            if len(listed) == count:
                break
        return listed

    def _walk(self, directory: str) -> Iterator[str]:
        tree = self.tree(directory)
        if tree is None:
            raise Uncertain()  # resolved as a directory, so read before: never happens
        prefix = f"{directory}/" if directory else ""
        for name, is_tree in tree.order:
            path = prefix + name
            if is_tree:
                if reachable(path):  # every path under an unreachable one is unreachable too
                    yield from self._walk(path)
                continue
            entry = tree.entries.get(name)
            # A link's resolution looks only at what it names (symlinks.resolve_in).
            if entry is not None and is_listable(self, path, entry, {}):
                yield path

    def tree(self, directory: str) -> _Tree | None:
        """The tree object at a directory path ("" is the root), or None for no directory."""
        if directory in self._trees:
            return self._trees[directory]
        if not directory:
            oid: str | None = self._root()
        else:
            parent_path, _, name = directory.rpartition("/")
            parent = self.tree(parent_path)
            oid = parent.trees.get(name) if parent is not None else None
        tree = self._load(oid) if oid is not None else None
        self._trees[directory] = tree
        return tree

    def target(self, entry: TreeEntry) -> bytes | None:
        """A link's target, as the index loads it (None when too long to be valid)."""
        if entry.size > MAX_PATH_BYTES:
            return None
        if entry.oid not in self._targets:
            self._targets[entry.oid] = self._objects.read([entry.oid]).get(entry.oid, b"")
        return self._targets[entry.oid]

    def _root(self) -> str:
        commit = self._objects.read([self._head_sha]).get(self._head_sha, b"")
        line, _, _ = commit.partition(b"\n")
        kind, _, oid = line.partition(b" ")
        if kind != b"tree" or len(oid) != 2 * _OID_BYTES:
            raise Uncertain()
        root = oid.decode("ascii", "replace")
        self._kinds[root] = self._objects.describe([root]).get(root, ("missing", 0))
        return root

    def _load(self, oid: str) -> _Tree:
        kind, size = self._kinds.get(oid, ("missing", 0))
        if kind != "tree" or size > MAX_TREE_BYTES or len(self._trees) >= MAX_TREES:
            raise Uncertain()
        data = self._objects.read([oid]).get(oid)
        if data is None or len(data) != size:
            raise Uncertain()
        records = _records(data)
        described = self._objects.describe(oid for _, _, oid in records)
        tree = _Tree()
        for name_bytes, mode, child in records:
            try:
                name = name_bytes.decode("utf-8")
            except UnicodeDecodeError:
                continue  # a name no request can spell is absent from the index (ls_tree)
            type_bits = mode & _TYPE_BITS
            if type_bits == _DIRECTORY:
                self._kinds[child] = described.get(child, ("missing", 0))
                tree.trees[name] = child
                tree.order.append((name, True))
                continue
            if type_bits in (_REGULAR, _LINK):
                found = described.get(child)
                if found is None:
                    continue  # a missing blob ("BAD" in ls-tree -l) is absent from the index
                is_link = type_bits == _LINK
                tree.entries[name] = TreeEntry("link" if is_link else "file", child, found[1])
            else:  # git takes any other mode for a submodule (canon_mode)
                tree.entries[name] = TreeEntry("submodule", child, -1)
            tree.order.append((name, False))
        return tree


def _records(data: bytes) -> list[tuple[bytes, int, str]]:
    """(name, mode, id) of each entry of a tree object, checked to be in git's order."""
    records: list[tuple[bytes, int, str]] = []
    previous = b""
    position = 0
    while position < len(data):
        space = data.find(b" ", position)
        nul = data.find(b"\0", space + 1)
        end = nul + 1 + _OID_BYTES
        if space < 0 or nul < 0 or end > len(data):
            raise Uncertain()
        try:
            mode = int(data[position:space], 8)
        except ValueError:
            raise Uncertain() from None
        name = data[space + 1 : nul]
        if not name or b"/" in name:
            raise Uncertain()
        key = name + b"/" if mode & _TYPE_BITS == _DIRECTORY else name
        if records and key <= previous:
            raise Uncertain()  # out of order, or a name twice: the index keeps the last one
        previous = key
        records.append((name, mode, data[nul + 1 : end].hex()))
        position = end
    return records


class _Entries:
    """`TreeView.entries`: the non-directory entry at a path."""

    def __init__(self, head: HeadTree) -> None:
        self._head = head

    def get(self, path: str, /) -> TreeEntry | None:
        parent_path, _, name = path.rpartition("/")
        parent = self._head.tree(parent_path)
        return parent.entries.get(name) if parent is not None else None


class _Directories:
    """`TreeView.directories`: whether a path is a directory."""

    def __init__(self, head: HeadTree) -> None:
        self._head = head

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        if not path:
            return True
        parent_path, _, name = path.rpartition("/")
        parent = self._head.tree(parent_path)
        return parent is not None and name in parent.trees


class _LinkTargets:
    """`TreeView.link_targets`: a link's target by path."""

    def __init__(self, head: HeadTree) -> None:
        self._head = head

    def get(self, path: str, /) -> bytes | None:
        entry = self._head.entries.get(path)
        if entry is None or entry.kind != "link":
            return None
        return self._head.target(entry)
