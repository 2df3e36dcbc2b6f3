"""A pinned pair of commits, read straight from git's object store: the narrow, read-only view
tools and the final-review checks see (`PinnedRepository`).

Nothing here touches a working tree: paths resolve against an in-memory index of the head
commit's tree (tree.py), file content comes from blobs (blobs.py), and symbolic links are
resolved virtually, inside that index (symlinks.py). A link that leaves the tree, enters
`.git` or loops never reaches the file system, so a hostile repository cannot make a tool read
a byte outside it, and an uncommitted file can never be read. What is cached between reviews
(indexes, readers, search text) belongs to a `RepositoryStore` (store.py).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pr_review_api.errors import ToolError
from pr_review_api.git.blobs import ask_once
from pr_review_api.git.first_page import HeadTree, Uncertain
from pr_review_api.git.hunks import DIFF_CONFIG
from pr_review_api.git.limits import Work
from pr_review_api.git.search import GrepMatch, grep
from pr_review_api.git.search_index.reader import SearchIndex
from pr_review_api.git.snapshots import Background
from pr_review_api.git.store import RepositoryStore, close_when_collected
from pr_review_api.git.symlinks import ResolvedPath, resolve_in
from pr_review_api.git.tree import Snapshot, files_under, is_searchable
from pr_review_api.git_runner import (
    GIT_FAILURES,
    GitError,
    check_exit,
    is_sha,
    run_git,
    stream_git,
)
from pr_review_api.settings import MAX_SOURCE_FILE_BYTES


@dataclass(frozen=True, slots=True)
class Revisions:
    """The three commits of a review; all full SHAs."""

    base_sha: str
    head_sha: str
    merge_base_sha: str


class PinnedRepository:
    """The repository a review reads: a git directory and three pinned commits.

    Made by a `RepositoryStore` (`store.open`); without one, a private store is made for
    this view and closed when the view is collected (tests, one-off scripts)."""

    def __init__(
        self,
        git_dir: Path,
        revisions: Revisions,
        *,
        store: RepositoryStore | None = None,
        work: Work | None = None,
        early: bool = False,
    ) -> None:
        for sha in (revisions.base_sha, revisions.head_sha, revisions.merge_base_sha):
            if not is_sha(sha):
                raise ValueError("revisions must be full SHAs")
        if store is None:
            store = RepositoryStore(threads=1)
            close_when_collected(self, store)
        self.git_dir = git_dir
        self.revisions = revisions
        self._store = store
        self._work = work if work is not None else store.work()
        self._snapshot: Snapshot | None = None
        self._building: Background[Snapshot] | None = None
        if early:
            self._building = Background(store.snapshot, git_dir, revisions.head_sha, self._work)
        else:
            self._snapshot = store.snapshot(git_dir, revisions.head_sha, self._work)

    @property
    def store(self) -> RepositoryStore:
        """The store this view reads through (its caches, its long-lived readers)."""
        return self._store

    @property
    def snapshot(self) -> Snapshot:
        """The head's index (for an `early` view, waited for: its error is raised here)."""
        if self._snapshot is None:
            assert self._building is not None
            self._snapshot = self._building.result(self._work)
        return self._snapshot

    @classmethod
    def open(
        cls,
        git_dir: Path,
        base_sha: str,
        head_sha: str,
        *,
        store: RepositoryStore | None = None,
        work: Work | None = None,
        early: bool = False,
    ) -> PinnedRepository:
        """Pin a base and a head commit; the diff will run from their merge base.

        With `early`, return before the head's index is made: it is made on a thread, the
        first use of `snapshot` waits for it (and raises what made it fail, a budget's
        `invalid_repository` too), and a first list page may be read before it is done
        (`first_listed`)."""
        if store is None:
            store = RepositoryStore(threads=1)
            pinned = cls.open(git_dir, base_sha, head_sha, store=store, work=work, early=early)
            close_when_collected(pinned, store)
            return pinned
        merge_base = store.merge_base(git_dir, base_sha, head_sha)
        revisions = Revisions(base_sha, head_sha, merge_base)
        return cls(git_dir, revisions, store=store, work=work, early=early)

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
        """The regular file a requested path names, or a tool error.

        A trailing `/` names a directory's contents, never a file (as POSIX's ENOTDIR), so
        `a.py/` is refused by every tool and by the final-review check alike.
        """
        resolved = self.resolve(raw)  # every path rule first: a bad path says so
        if raw.endswith("/") or resolved.entry is None or resolved.entry.kind != "file":
            raise ToolError("not_a_file", "The requested path is not a regular file.")
        return resolved

    def first_listed(self, raw: str, count: int) -> tuple[str, list[str]] | None:
        """While the head's index is still being made: the real directory a requested path
        names and its first `count` listable files, read from the tree objects they lie in
        (first_page.py), as the index will list them. None once the index is made, or when
        those trees cannot show its answer (then the index is waited for, as it is for an
        error: the path's own, or one the whole tree would raise)."""
        if self._building is None or self._building.done():
            return None
        head = HeadTree(self._store.readers.source(self.git_dir), self.revisions.head_sha)
        try:
            resolved = resolve_in(head, raw)
            if resolved.entry is not None:
                return None  # not a directory: the index says so
            return resolved.path, head.listed(resolved.path, count)
        except (Uncertain, ToolError):
            return None
        except GIT_FAILURES:
            return None

    def files_under(self, directory: str) -> tuple[int, int]:
        """The slice of `snapshot.files` inside a real directory ("" is the root)."""
        return files_under(self.snapshot.files, directory)

    def page_start(self, directory: str, cursor: str) -> int:
        """Index of the first listable path after `cursor` in the directory's slice."""
        start, _ = self.files_under(directory)
        return max(start, bisect_right(self.snapshot.files, cursor))

    # --- content ---

    def _read(self, oids: Iterable[str]) -> dict[str, bytes]:
        return self._store.readers.reader(self.git_dir).read(oids)

    def read_source(self, file: ResolvedPath) -> str:
        """A regular file's text, or binary_file / file_too_large."""
        assert file.entry is not None
        if file.entry.size > MAX_SOURCE_FILE_BYTES:
            raise ToolError("file_too_large", "The file is larger than 1 MiB.")
        data = self._read([file.entry.oid]).get(file.entry.oid, b"")
        if b"\0" in data:
            raise ToolError("binary_file", "The file is binary.")
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ToolError("binary_file", "The file is not UTF-8 text.") from None

    def line_counts(self, files: Iterable[ResolvedPath]) -> dict[str, int]:
        """Lines of regular files, as an editor numbers them, by blob id.

        A file is read as a stream and no further than the tools may read (1 MiB, specification
        §8): a larger file counts the lines that begin within its first 1 MiB + 1 bytes."""
        oids = (file.entry.oid for file in files if file.entry)
        reader = self._store.readers.reader(self.git_dir)
        return reader.count_lines(oids, MAX_SOURCE_FILE_BYTES)

    def is_searchable(self, path: str) -> bool:
        """Whether a search may report a hit in `path` (regular, reachable, not oversized)."""
        entry = self.snapshot.entries.get(path)
        return entry is not None and is_searchable(path, entry)

    def is_binary(self, path: str) -> bool:
        """Whether a file holds a NUL byte anywhere, as `read_source` judges binary files.

        `git grep -I` sniffs only the first 8000 bytes and obeys the repository's own
        attributes (`* text` in .git/info/attributes turns the check off), so a search
        asks here before it reports a hit.
        """
        oid = self.snapshot.entries[path].oid
        known = self.snapshot.has_nul.get(oid)
        if known is None:
            known = b"\0" in self._read([oid]).get(oid, b"")
            self.snapshot.has_nul[oid] = known
        return known

    def grep(self, query: str, pathspec: str) -> Iterator[GrepMatch]:
        """Stream case-sensitive literal hits at the head commit (search.grep)."""
        return grep(
            self._store.indexes,
            self.git_dir,
            self.snapshot,
            self.revisions.head_sha,
            query=query,
            pathspec=pathspec,
        )

    def _search_index(self) -> SearchIndex | None:
        """The repository's search index if this head is complete in it (else completed)."""
        return self._store.indexes.complete_index(
            self.git_dir, self.snapshot, self.revisions.head_sha
        )

    def diff(self, paths: list[str], max_bytes: int, *, check: bool = False) -> tuple[bytes, bool]:
        """At most `max_bytes` of the merge-base-to-head diff and whether there was more.

        With `check` (the diff tool), a git that failed before the cap (a corrupt object)
        raises `GitError` rather than passing off the part it wrote as the whole diff.
        """
        args = [
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
            if check and len(data) <= max_bytes:  # read to the end: did git finish?
                check_exit(process)
        return data[:max_bytes], len(data) > max_bytes

    def same_tree(self) -> bool:
        """Whether the merge base and the head have the same tree: nothing to review.

        Asked of the store's long-lived `cat-file --batch-check` (`<commit>^{tree}`, as
        `rev-parse` peels it); when it cannot tell, `rev-parse` answers, or says why not."""
        pair = [self.revisions.merge_base_sha, self.revisions.head_sha]
        trees = self._store.readers.describer(self.git_dir).trees(pair)
        if all(sha in trees for sha in pair):  # one entry when the head is the merge base
            return trees[pair[0]] == trees[pair[1]]
        found = run_git(
            self.git_dir, ["rev-parse", *(f"{sha}^{{tree}}" for sha in pair)], timeout=30
        )
        named = found.stdout.split()
        return len(named) == 2 and named[0] == named[1]

    def changed_files(self) -> list[tuple[str, str]]:
        """(status letter, path) for each file changed from merge base to head."""
        key = (str(self.git_dir), self.revisions.merge_base_sha, self.revisions.head_sha)
        known = self._store.changes.recall(key)
        if known is None:
            known = self._changed_files()
            self._store.changes.remember(key, known)
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


def resolve_commit(
    git_dir: Path, revision: str, store: RepositoryStore | None = None
) -> str | None:
    """The full SHA of the commit `revision` names, or None."""
    if not revision or revision.startswith("-") or "\0" in revision:
        return None
    if is_sha(revision):  # the common case needs no rev-parse; a tag is peeled below
        try:
            if store is not None:
                described = store.readers.describer(git_dir).describe([revision])
                kind = described.get(revision, ("missing", 0))[0]
            else:
                answers = ask_once(git_dir, [revision], contents=False)
                kind = answers[revision][0] if revision in answers else "missing"
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
