"""Search at a head commit: the strategy (the text store in memory, or `git grep`) and the
parsing of `git grep -z` output."""

from __future__ import annotations

import weakref
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pr_review_api.git.runner import GitConfig, check_exit, stream_git
from pr_review_api.git.texts import TextStore, TextStores
from pr_review_api.git.tree import Snapshot, files_under

# grep.column=true in a repository's config inserts a column field into `-z` records.
GREP_CONFIG = GitConfig(values=(("grep.column", "false"),))
# How long a search waits for a repository's text store being filled (see grep).
STORE_WAIT_SECONDS = 300.0


@dataclass(frozen=True)
class GrepMatch:
    """One raw `git grep` hit."""

    path: str
    line: int
    text: bytes


def grep(
    stores: TextStores,
    git_dir: Path,
    snapshot: Snapshot,
    head_sha: str,
    *,
    query: str,
    pathspec: str,
) -> Iterator[GrepMatch]:
    """Stream case-sensitive literal hits at the head commit; stop reading when dropped.

    On a large repository whose text store holds the head's blobs (texts.py) the hits come
    from memory: the lines `git grep -F -n -I` finds, in its order, in the files a search may
    report (regular, reachable, at most 1 MiB, no NUL byte; attributes do not hide a text
    file). Otherwise `git grep` runs, and the store is filled for next time.
    """
    store = text_store_for(stores, git_dir, snapshot)
    if store is None:
        with stores.git_grep_turn(git_dir) as turn:
            if turn:
                yield from git_grep(git_dir, head_sha, query, pathspec)
                return
        stores.wait(git_dir, STORE_WAIT_SECONDS)
        store = text_store_for(stores, git_dir, snapshot)
    if store is None:  # the store could not be filled: git grep after all
        yield from git_grep(git_dir, head_sha, query, pathspec)
        return
    yield from grep_store(store, snapshot, query, pathspec)


def text_store_for(stores: TextStores, git_dir: Path, snapshot: Snapshot) -> TextStore | None:
    """The repository's text store when it holds every blob a search of `snapshot` reads."""
    cached = snapshot._text_store() if snapshot._text_store is not None else None
    if cached is not None and not cached.dropped:
        return cached
    store = stores.ready(git_dir, snapshot.search_bytes(), snapshot.search_blobs, build=True)
    snapshot._text_store = None if store is None else weakref.ref(store)
    return store


def git_grep(git_dir: Path, head_sha: str, query: str, pathspec: str) -> Iterator[GrepMatch]:
    args = ["grep", "-F", "-n", "-I", "-z", "--no-color", "-e", query, head_sha]
    if pathspec:
        args += ["--", pathspec]
    prefix = head_sha.encode() + b":"
    with stream_git(git_dir, args, config=GREP_CONFIG) as process:
        assert process.stdout is not None
        yield from parse_grep(process.stdout, prefix)
        check_exit(process, ok=(0, 1))  # 1: no match; more: git failed (a corrupt object)


def grep_store(
    store: TextStore, snapshot: Snapshot, query: str, pathspec: str
) -> Iterator[GrepMatch]:
    files, oids = snapshot.files, snapshot.search_oids()
    scope = zip(files, oids, strict=True)
    if pathspec:  # a literal pathspec: the path itself, or everything under it
        start, end = files_under(files, pathspec)
        exact = bisect_left(files, pathspec)
        if exact < len(files) and files[exact] == pathspec:
            start, end = exact, exact + 1  # a file has nothing under it
        scope = zip(files[start:end], oids[start:end], strict=True)
    for path, line, text in store.search(scope, query.encode("utf-8", "surrogateescape")):
        snapshot.has_nul[snapshot.entries[path].oid] = False
        yield GrepMatch(path, line, text)


def parse_grep(stream: IO[bytes], prefix: bytes) -> Iterator[GrepMatch]:
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
