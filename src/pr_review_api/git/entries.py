"""A tree's entries by path: the tuples an index holds, and a mapping that shares them."""

from __future__ import annotations

import gc
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Literal, NamedTuple, TypeVar, overload

EntryKind = Literal["file", "link", "submodule"]
_T = TypeVar("_T")

# A derived head's entries keep at most this many edits over a shared base (see Entries).
MAX_ENTRY_EDITS = 4096


class TreeEntry(NamedTuple):
    """A non-directory entry of the head tree (a tuple: a kernel tree makes 80,000 of them)."""

    kind: EntryKind
    oid: str
    size: int


class _PathsByBlob:
    """The paths of a base dict's entries by blob id, made on first use and shared by every
    Entries over that base: a search then finds the few paths of its candidate blobs without
    walking the tree. A blob at one path maps to the path, at several to a tuple of them."""

    __slots__ = ("_base", "_paths")

    def __init__(self, base: dict[str, TreeEntry]) -> None:
        self._base = base
        self._paths: dict[str, str | tuple[str, ...]] | None = None

    def get(self) -> dict[str, str | tuple[str, ...]]:
        paths = self._paths
        if paths is None:  # two threads may both build it: the same answer, once wasted
            paths = {}
            with collection_paused():
                for path, entry in self._base.items():
                    known = paths.get(entry.oid)
                    if known is None:
                        paths[entry.oid] = path
                    elif isinstance(known, tuple):
                        paths[entry.oid] = (*known, path)
                    else:
                        paths[entry.oid] = (known, path)
            self._paths = paths
        return paths


class Entries(Mapping[str, TreeEntry]):
    """A tree's entries by path: a dict shared with related trees plus this tree's own edits
    (None: removed), so a head derived from another costs its changes, not a copy of 80,000
    entries (nor the garbage collector's walks over one)."""

    __slots__ = ("_base", "_by_blob", "_edits", "_length")

    def __init__(
        self,
        base: dict[str, TreeEntry],
        edits: dict[str, TreeEntry | None] | None = None,
        by_blob: _PathsByBlob | None = None,
    ) -> None:
        self._base = base
        self._edits = edits or {}
        self._by_blob = by_blob if by_blob is not None else _PathsByBlob(base)
        self._length = len(base) + sum(
            (value is not None) - (path in base) for path, value in self._edits.items()
        )

    def edited(self, edits: dict[str, TreeEntry | None]) -> Entries:
        """These entries with `edits` applied; the base is rebuilt once edits pile up."""
        merged = {**self._edits, **edits}
        if len(merged) <= MAX_ENTRY_EDITS:
            return Entries(self._base, merged, self._by_blob)
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

    def paths_of(self, oids: Collection[str]) -> list[str]:
        """The paths whose entry is one of the blobs (or submodules) `oids`, in no order."""
        by_blob, edits = self._by_blob.get(), self._edits
        found: list[str] = []
        for oid in oids:
            paths = by_blob.get(oid)
            if paths is None:
                continue
            for path in (paths,) if isinstance(paths, str) else paths:
                if path not in edits:
                    found.append(path)
        found += [path for path, entry in edits.items() if entry is not None and entry.oid in oids]
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


@contextmanager
def collection_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while an index is built.

    Building one makes tens of thousands of tuples, and each few hundred allocations start a
    collection; the later, full ones walk the whole heap (every snapshot a process keeps)
    and cannot free any of it, since an index holds no cycles. On the kernel tree they cost
    as much as building the index itself. (Another thread pausing at the same time is
    harmless: the collector comes back when the first pauser is done.)
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
