"""A repository's latest snapshot on disk, so a new process need not index a head in full.

A process that indexed a head writes it, off the critical path, to one file per repository
(in `RepositoryStore.index_dir`); the next process reviewing a head of that repository reads
the file (tens of milliseconds on the kernel tree, against a few hundred for a full
`ls-tree`) and derives the head from it with `tree.derive_snapshot`, whose result equals a
fresh load.

Only this program writes the file, but it is read as if anything could have: it must be a
regular file of this user that nobody else may write (not followed through a link), no larger
than the index budget, with a header whose length and SHA-256 match the payload, and the
payload must have the expected shape. Anything else, a truncated or corrupt file included,
is ignored (the head is then loaded in full). `marshal` holds plain lists, tuples and strings
only, and decodes in C; it runs no code on load. A write goes to a temporary file in the same
folder, is synced and then renamed over the old one, so a killed writer leaves either the old
file or the new one, and at worst a stray temporary file, which a later write removes. The
payload is the fields one after another, each marshalled on its own after its length, so a
write holds one field's bytes at a time, never the whole payload.
"""

from __future__ import annotations

import contextlib
import hashlib
import marshal
import os
import stat
import struct
import tempfile
import time
from collections.abc import Iterable, Iterator
from functools import partial
from itertools import compress
from pathlib import Path
from typing import Any, cast

from pr_review_api.git.entries import Entries, TreeEntry, collection_paused
from pr_review_api.git.tree import Snapshot
from pr_review_api.git_runner import is_sha

FILE_NAME = "head-snapshot"
_TEMPORARY_PREFIX = ".head-snapshot-"
_TEMPORARY_SUFFIX = ".tmp"
# A temporary file this old belongs to a writer that was killed.
STALE_TEMPORARY_SECONDS = 3600.0
# The payload's layout; bump on any change, so an old file is ignored rather than misread.
FORMAT = 3  # 3: each field marshalled on its own, after its length
_MAGIC = b"PRSNAP\0\3"
# Magic, the saved head (readable before the payload, so git can compare trees meanwhile),
# the payload's length and SHA-256.
_HEADER = struct.Struct("<8s40sQ32s")
_FRAME = struct.Struct("<Q")  # a field's length, before its marshal data
_KIND_LETTERS = {"file": "f", "link": "l", "submodule": "s"}
_KIND_NAMES = {letter: kind for kind, letter in _KIND_LETTERS.items()}
_entry = cast("Any", partial(tuple.__new__, TreeEntry))  # a TreeEntry made in C, no __new__


def save(directory: Path, head_sha: str, snapshot: Snapshot) -> None:
    """Write `snapshot` (the index of `head_sha`) as the repository's latest, atomically."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        prefix=_TEMPORARY_PREFIX, suffix=_TEMPORARY_SUFFIX, dir=directory
    )
    try:
        with os.fdopen(descriptor, "wb") as out:
            out.write(bytes(_HEADER.size))  # written once the payload's length and digest are
            digest, length = hashlib.sha256(), 0
            for frame in _frames(_fields(head_sha, snapshot)):
                digest.update(frame)
                out.write(frame)
                length += len(frame)
                del frame  # before the next field is marshalled
            out.seek(0)
            out.write(_HEADER.pack(_MAGIC, head_sha.encode(), length, digest.digest()))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, directory / FILE_NAME)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    _sync_directory(directory)
    _remove_stale_temporaries(directory)


def _frames(fields: Iterable[Any]) -> Iterator[bytes]:
    """Each field marshalled on its own, after its length: only one field's lists and bytes
    are held at a time (a 1,000,000-entry tree's columns, all at once and in one payload,
    were most of its peak memory)."""
    for field in fields:
        data = marshal.dumps(field)
        del field  # the column's list goes while its bytes are written
        yield _FRAME.pack(len(data))
        yield data
        del data  # before the next field's are made


def encode_payload(fields: Iterable[Any]) -> bytes:
    """A payload of `fields` as `save` writes it (tests)."""
    return b"".join(_frames(fields))


def decode_payload(payload: bytes | memoryview) -> tuple[Any, ...] | None:
    """The fields of a payload, or None when its frames or their marshal data are damaged."""
    view, fields, start = memoryview(payload), list[Any](), 0
    while start < len(view):
        if len(view) - start < _FRAME.size:
            return None
        (length,) = _FRAME.unpack_from(view, start)
        start += _FRAME.size
        if length > len(view) - start:
            return None
        try:
            fields.append(marshal.loads(view[start : start + length]))  # noqa: S302 - see load
        except (ValueError, EOFError, TypeError, OverflowError):
            return None
        start += length
    return tuple(fields)


def load(directory: Path, max_bytes: int) -> tuple[str, Snapshot] | None:
    """The repository's latest saved head and its snapshot, or None when there is no usable
    file (missing, foreign, larger than `max_bytes`, truncated, corrupt, or of another
    format)."""
    data = _read_own_file(directory / FILE_NAME, max_bytes)
    if data is None or len(data) < _HEADER.size:
        return None
    magic, head, length, digest = _HEADER.unpack_from(data)
    payload = memoryview(data)[_HEADER.size :]
    if magic != _MAGIC or length != len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    with collection_paused():  # our own file, checked above; its fields are checked below
        fields = decode_payload(payload)
        return None if fields is None else _snapshot(fields, head.decode("ascii", errors="replace"))


def saved_head(directory: Path) -> str | None:
    """The head the saved file names, from its header alone (the payload unchecked: `load`
    says whether the file is usable), or None."""
    data = _read_own_file(directory / FILE_NAME, _HEADER.size, whole=False)
    if data is None or len(data) < _HEADER.size:
        return None
    magic, head, _, _ = _HEADER.unpack_from(data)
    sha = head.decode("ascii", errors="replace")
    return sha if magic == _MAGIC and is_sha(sha) else None


def _fields(head_sha: str, snapshot: Snapshot) -> Iterator[Any]:
    """The payload's fields, each made when asked for. Columns, not a tuple per entry:
    marshal decodes them faster, and each checks in C."""
    yield FORMAT
    yield head_sha
    paths = sorted(snapshot.entries)
    yield paths
    entries = snapshot.entries.many(paths)
    yield "".join(_KIND_LETTERS[entry.kind] for entry in entries)
    yield [entry.oid for entry in entries]
    yield [entry.size for entry in entries]
    del entries
    yield _listed_flags(paths, snapshot.files)
    del paths
    yield sorted(snapshot.directories)
    yield dict(snapshot.link_targets)
    yield sorted(snapshot.link_paths())
    yield dict(snapshot.link_deps())


def _listed_flags(paths: list[str], files: list[str]) -> bytes:
    """One byte per path of `paths`, 1 when it is listed: both lists are sorted and `files`
    is a subset, so one walk does it (a set of a wide tree's files would cost tens of MB)."""
    flags = bytearray(len(paths))
    listed = iter(files)
    following = next(listed, None)
    for number, path in enumerate(paths):
        if path == following:
            flags[number] = 1
            following = next(listed, None)
    return bytes(flags)


def _snapshot(fields: object, header_head: str) -> tuple[str, Snapshot] | None:
    """The snapshot a payload holds, or None when it has not the shape `_fields` writes or
    names another head than its header."""
    if type(fields) is not tuple or len(fields) != 11 or fields[0] != FORMAT:
        return None
    _, head_sha, paths, kinds, oids, sizes, listable, directories, targets, links, deps = fields
    count = len(paths) if isinstance(paths, list) else -1
    if not (
        is_sha(head_sha)
        and head_sha == header_head
        and _all_of(paths, str)
        and isinstance(kinds, str)
        and len(kinds) == count
        and set(kinds) <= _KIND_NAMES.keys()
        and _all_of(oids, str)
        and len(oids) == count
        and set(map(len, oids)) <= {len(head_sha)}
        and _all_of(sizes, int)
        and len(sizes) == count
        and isinstance(listable, bytes)
        and len(listable) == count
        and _all_of(directories, str)
        and _all_of(links, str)
        and _mapping(targets, bytes)
        and _mapping(deps, frozenset)
        and all(_all_of(looked_at, str) for looked_at in deps.values())
    ):
        return None
    values = map(_entry, zip(map(_KIND_NAMES.__getitem__, kinds), oids, sizes, strict=True))
    snapshot = Snapshot(
        Entries(dict(zip(paths, values, strict=True))),
        set(directories),
        targets,
        list(compress(paths, listable)),
    )
    snapshot.note_links(set(links), deps)
    return head_sha, snapshot


def _all_of(values: object, kind: type) -> bool:
    """Whether `values` is a list or frozenset of exactly `kind` (marshal makes exact types)."""
    return isinstance(values, list | frozenset) and set(map(type, values)) <= {kind}


def _mapping(value: object, kind: type) -> bool:
    return (
        isinstance(value, dict)
        and set(map(type, value)) <= {str}
        and set(map(type, value.values())) <= {kind}
    )


def _read_own_file(path: Path, max_bytes: int, *, whole: bool = True) -> bytes | None:
    """The bytes of a regular file this user owns and only this user may write (the first
    `max_bytes` of it when not `whole`), or None."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        status = os.fstat(descriptor)
        if (
            not stat.S_ISREG(status.st_mode)
            or status.st_uid != os.geteuid()
            or status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            or (whole and status.st_size > max_bytes)
        ):
            return None
        with os.fdopen(descriptor, "rb", closefd=False) as file:
            return file.read(min(status.st_size, max_bytes) + 1 if whole else max_bytes)
    except OSError:
        return None
    finally:
        os.close(descriptor)


def _sync_directory(directory: Path) -> None:
    """Make the rename durable (a crash after it must not bring the old name back empty)."""
    with contextlib.suppress(OSError):
        descriptor = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def _remove_stale_temporaries(directory: Path) -> None:
    cutoff = time.time() - STALE_TEMPORARY_SECONDS
    for leftover in directory.glob(f"{_TEMPORARY_PREFIX}*{_TEMPORARY_SUFFIX}"):
        with contextlib.suppress(OSError):
            if leftover.lstat().st_mtime < cutoff:
                leftover.unlink()
