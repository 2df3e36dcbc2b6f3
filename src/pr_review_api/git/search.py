"""Search at a head commit: the strategy (the repository's search index, or `git grep`) and
the parsing of `git grep -z` output."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pr_review_api.git import search_index
from pr_review_api.git.runner import GitConfig, GitError, check_exit, stream_git
from pr_review_api.git.search_index import IndexUnavailable, SearchIndex, SearchIndexes
from pr_review_api.git.tree import Snapshot, files_under, is_searchable

# Up to this many candidate blobs, their paths are looked up by blob id; more (a common
# literal) are met walking the files in order, which stops as soon as the cap is full.
MAX_LOOKED_UP_CANDIDATES = 16384
# While at least one file in this many holds the literal, a search reads on in path order
# rather than asking the trigram index (see grep_index).
DENSE_FILES = 16
# grep.column=true in a repository's config inserts a column field into `-z` records.
GREP_CONFIG = GitConfig(values=(("grep.column", "false"),))


@dataclass(frozen=True)
class GrepMatch:
    """One raw `git grep` hit."""

    path: str
    line: int
    text: bytes


def grep(
    indexes: SearchIndexes,
    git_dir: Path,
    snapshot: Snapshot,
    head_sha: str,
    *,
    query: str,
    pathspec: str,
) -> Iterator[GrepMatch]:
    """Stream case-sensitive literal hits at the head commit; stop reading when dropped.

    When the repository's search index holds every blob of the head (search_index.py), the
    hits come from it: the lines `git grep -F -n -I` finds, in its order, in the files a
    search may report (regular, reachable, at most 1 MiB, no NUL byte; attributes do not hide
    a text file). Otherwise `git grep` runs, and the index is completed for next time.
    """
    index = indexes.ready(git_dir, snapshot, head_sha)
    if index is not None:
        hits = grep_index(index, snapshot, query, pathspec)
        try:
            first = next(hits, None)
        except IndexUnavailable:
            index = None  # unreadable before anything was shown: git grep answers instead
        else:
            if first is not None:
                yield first
            try:
                yield from hits
            except IndexUnavailable:
                raise GitError(["search index"], -1, b"") from None
            return
    with indexes.searching(git_dir, snapshot):
        yield from git_grep(git_dir, head_sha, query, pathspec)


def git_grep(git_dir: Path, head_sha: str, query: str, pathspec: str) -> Iterator[GrepMatch]:
    args = ["grep", "-F", "-n", "-I", "-z", "--no-color", "-e", query, head_sha]
    if pathspec:
        args += ["--", pathspec]
    prefix = head_sha.encode() + b":"
    with stream_git(git_dir, args, config=GREP_CONFIG) as process:
        assert process.stdout is not None
        yield from parse_grep(process.stdout, prefix)
        check_exit(process, ok=(0, 1))  # 1: no match; more: git failed (a corrupt object)


def grep_index(
    index: SearchIndex, snapshot: Snapshot, query: str, pathspec: str
) -> Iterator[GrepMatch]:
    """The index's hits in the listed files of `pathspec`, in path order.

    The first PROBE_FILES files are read without asking the trigram index, and the next
    ones too (in windows that double) while at least one file in DENSE_FILES holds the
    literal: a common literal fills a search's cap there, where its candidates would be most
    of the tree. After them, only the candidate blobs are read; when they are few, their
    paths are found by blob id (Entries.paths_of) rather than by walking the tree."""
    files = snapshot.files
    start, end = files_under(files, pathspec)
    if pathspec:  # a literal pathspec: the path itself, or everything under it
        exact = _listed_at(files, pathspec)
        if exact >= 0:
            start, end = exact, exact + 1  # a file has nothing under it
    needle = query.encode("utf-8", "surrogateescape")
    hit_files = [0]  # files that held the literal so far: how dense it is
    searched = _searched(index, snapshot, start, end, needle, hit_files=hit_files)
    last = None
    for path, line, text in index.lines(searched, needle):
        if path != last:
            hit_files[0] += 1
            last = path
        snapshot.has_nul[snapshot.entries[path].oid] = False
        yield GrepMatch(path, line, text)


def _searched(
    index: SearchIndex,
    snapshot: Snapshot,
    start: int,
    end: int,
    needle: bytes,
    *,
    hit_files: list[int],
) -> Iterator[tuple[str, str | None]]:
    """The files a search of `snapshot.files[start:end]` reads, in order (see grep_index).

    `hit_files` counts the files that held the literal among those read. It is up to date
    whenever a window ends: `SearchIndex.lines` reads in chunks that end at powers of two
    (then at multiples of 512), and so do the windows, from `start`."""
    files = snapshot.files
    position, window = start, search_index.PROBE_FILES
    while window and position < end:  # PROBE_FILES 0: the index at once
        stop = min(end, start + window)
        before = hit_files[0]
        yield from _scope(snapshot, files[position:stop])
        if (hit_files[0] - before) * DENSE_FILES < stop - position:
            position = stop
            break  # sparse here: the index narrows the rest
        position, window = stop, window * 2
    if position >= end:
        return
    candidates = index.candidates(needle)
    if candidates is not None and len(candidates) <= MAX_LOOKED_UP_CANDIDATES:
        found = snapshot.entries.paths_of(candidates)
        rest = sorted(path for path in found if position <= _listed_at(files, path) < end)
    else:  # too short for a trigram, or common: walked in order until the cap is full
        rest = files[position:end]
    yield from _scope(snapshot, rest, candidates)


def _scope(
    snapshot: Snapshot, paths: Iterable[str], candidates: set[str] | None = None
) -> Iterator[tuple[str, str | None]]:
    """(path, the blob a search reads or None) of each path, lazily: a search that fills its
    cap stops early. Only `candidates` (when given) are read."""
    entries = snapshot.entries
    for path in paths:
        entry = entries[path]
        wanted = is_searchable(path, entry) and (candidates is None or entry.oid in candidates)
        yield path, entry.oid if wanted else None


def _listed_at(files: list[str], path: str) -> int:
    """The position of `path` in a sorted listing, or -1."""
    position = bisect_left(files, path)
    return position if position < len(files) and files[position] == path else -1


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
