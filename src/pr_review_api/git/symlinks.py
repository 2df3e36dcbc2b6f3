"""Virtual symbolic links: a requested path resolved inside the index of a tree.

A link is never followed on a file system: its target is read from the blob and resolved
against the index, so a link that leaves the tree, enters `.git` or loops is refused without a
byte outside the repository being read. Resolving the links of a whole tree while indexing it
counts its hops and the bytes of the targets it expands against the preparation's budgets
(`limits.Work`), so a tree of looping 4 KB targets costs what the budget allows and no more.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Container
from dataclasses import dataclass
from typing import Protocol, TypeVar

from pr_review_api.errors import ToolError
from pr_review_api.git.entries import TreeEntry
from pr_review_api.git.limits import Work
from pr_review_api.git.paths import CONTROL, DRIVE, is_dot_git, split_path
from pr_review_api.settings import MAX_PATH_BYTES, MAX_SYMLINK_HOPS

_V_co = TypeVar("_V_co", covariant=True)


class _Lookup(Protocol[_V_co]):
    def get(self, path: str, /) -> _V_co | None: ...


class TreeView(Protocol):
    """What resolution reads of an index (tree.Snapshot, or first_page.HeadTree)."""

    @property
    def entries(self) -> _Lookup[TreeEntry]: ...
    @property
    def directories(self) -> Container[str]: ...
    @property
    def link_targets(self) -> _Lookup[bytes]: ...


@dataclass(frozen=True, slots=True)
class ResolvedPath:
    """Where a requested path lands after symbolic links: a directory or an entry."""

    path: str  # repository-relative, "" for the root
    entry: TreeEntry | None  # None for a directory


def resolve_in(  # noqa: C901, PLR0912  (one walk over the path's parts; each branch is a rule of git's tree)
    snapshot: TreeView,
    raw: str,
    visited: list[str] | None = None,
    work: Work | None = None,
) -> ResolvedPath:
    """Resolve a requested path inside the tree, following symbolic links virtually.

    `visited`, when given, receives every tree path looked up on the way: the result depends
    on the entries, directories and link targets at those paths and on nothing else. `work`,
    when given, is charged for each hop and the bytes of each target expanded.
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
            target = snapshot.link_targets.get(candidate)
            if work is not None:
                work.add_hop(len(target) if target is not None else 0)
            pending.extendleft(reversed(link_parts(target)))
        elif pending:
            raise ToolError("path_not_found", "The requested path does not exist.")
        else:
            return ResolvedPath(candidate, entry)
    return ResolvedPath("/".join(resolved), None)


def link_parts(target: bytes | None) -> list[str]:
    """A link target's components, or a tool error for a target no resolution may follow."""
    # As Linux, refuse a target longer than PATH_MAX (None: too long to have been loaded).
    # Without this bound one looping multi-megabyte link cost seconds on every resolution
    # (and on every snapshot load, which resolves each link to list it).
    if target is None or len(target) > MAX_PATH_BYTES:
        raise ToolError("invalid_path", "A symbolic link on the path is not valid.")
    try:
        text = target.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError("invalid_path", "A symbolic link on the path is not valid.") from None
    if not text or text.startswith("/") or DRIVE.match(text):
        raise ToolError("outside_repository", "The path resolves outside the repository.")
    if CONTROL.search(text) or "\\" in text:
        raise ToolError("invalid_path", "A symbolic link on the path is not valid.")
    return text.split("/")
