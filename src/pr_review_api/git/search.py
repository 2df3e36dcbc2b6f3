"""Search at a head commit: the strategy (the repository's search index, or `git grep`), the
queries a search makes of the index, and the parsing of `git grep -z` output.

The index (git/search_index/) stores blobs and answers two reads: the blobs whose text holds
every trigram of a literal, and the text of given blobs. Which files a search reads, in
which order, how many at a time, and which lines match are decided here.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from pr_review_api.git.search_index.reader import MAX_QUERY_VARIABLES, SearchIndex
from pr_review_api.git.search_index.schedule import Partial, SearchIndexes
from pr_review_api.git.search_index.schema import IndexUnavailable
from pr_review_api.git.tree import Snapshot, files_under, is_searchable
from pr_review_api.git_runner import GitConfig, GitError, check_exit, stream_git

# Files a search reads before it asks the trigram index (see grep_index), unless one of the
# literal's trigrams is listed in so few bodies (a byte or so each) that the index answers
# at once: estimated from a few segments (RARE_SAMPLE_SEGMENTS), which a common literal's
# search pays for.
PROBE_FILES = 128
RARE_LIST_BYTES = 4096
RARE_SAMPLE_SEGMENTS = 3
# A literal gives at most this many trigrams to the index: more would narrow little more.
MAX_QUERY_GRAMS = 16
# Up to this many candidate blobs, their paths are looked up by blob id; more (a common
# literal) are met walking the files in order, which stops as soon as the cap is full.
MAX_LOOKED_UP_CANDIDATES = 16384
# While at least one file in this many holds the literal, a search reads on in path order
# rather than asking the trigram index (see grep_index).
DENSE_FILES = 16
# At most this many files are read at a time by a search of a head stored in part.
PARTIAL_WINDOW_FILES = 1024
PARTIAL_WINDOW_BYTES = 8 * 1024**2
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

    When the head is complete in the repository's search index (git/search_index/), the
    hits come from it: the lines `git grep -F -n -I` finds, in its order, in the files a
    search may report (regular, reachable, at most 1 MiB, no NUL byte; attributes do not hide
    a text file). Otherwise the index is completed for next time, and meanwhile, when at
    least PARTIAL_MIN_SHARE of the head's text is stored already (a build under way), the
    stored part is read from the index and only the rest from git (`grep_partial`); with
    less, `git grep` runs.
    """
    index = indexes.complete_index(git_dir, snapshot, head_sha)
    if index is not None:
        answered, hits = _answered(grep_index(index, snapshot, query, pathspec))
        if answered:
            yield from hits
            return
    partial = indexes.partial_index(git_dir, snapshot)
    with indexes.searching(git_dir, snapshot):
        if partial is not None:
            answered, hits = _answered(grep_partial(partial, snapshot, query, pathspec))
            if answered:
                yield from hits
                return
        yield from git_grep(git_dir, head_sha, query, pathspec)


def _answered(hits: Iterator[GrepMatch]) -> tuple[bool, Iterator[GrepMatch]]:
    """Whether an index search got as far as its first hit (or its end), and its hits. An
    index unreadable before anything was shown lets `git grep` answer instead; after, the
    search fails as git would (a part shown cannot be taken back)."""
    try:
        first = next(hits, None)
    except IndexUnavailable:
        return False, iter(())
    return True, _after(first, hits)


def _after(first: GrepMatch | None, hits: Iterator[GrepMatch]) -> Iterator[GrepMatch]:
    if first is not None:
        yield first
    try:
        yield from hits
    except IndexUnavailable:
        raise GitError(["search index"], -1, b"") from None


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
    """The index's hits in the listed files of `pathspec`, in path order."""
    start, end = _pathspec_range(snapshot.files, pathspec)
    needle = query.encode("utf-8", "surrogateescape")
    for path, line, text in _index_hits(index, snapshot, start, end, needle):
        snapshot.has_nul[snapshot.entries[path].oid] = False
        yield GrepMatch(path, line, text)


def grep_partial(
    partial: Partial, snapshot: Snapshot, query: str, pathspec: str
) -> Iterator[GrepMatch]:
    """The hits of a head stored in part in its index, in path order, as `grep_index` finds
    them: the stored blobs the trigram index names are read from it, every other search blob
    from git (its text holds a NUL byte: skipped, as the index skips it), each file once."""
    files = snapshot.files
    start, end = _pathspec_range(files, pathspec)
    needle = query.encode("utf-8", "surrogateescape")
    grams = trigram_query(needle)
    candidates = partial.index.candidates(grams) if grams is not None else None
    if candidates is not None and len(candidates) <= MAX_LOOKED_UP_CANDIDATES:
        # Only the candidates and the blobs not stored are read: found by blob id, not by a
        # walk over the tree's every file (most of them stored and not candidates).
        found = snapshot.entries.paths_of(candidates | partial.missing)
        paths = sorted(path for path in found if start <= _listed_at(files, path) < end)
    else:  # too short for a trigram, or common: walked in order until the cap is full
        paths = files[start:end]
    position, window = 0, 1
    while position < len(paths):  # windows that double: a common literal fills the cap early
        part = _window(snapshot, paths, position, min(len(paths), position + window))
        position, window = position + len(part), min(2 * window, PARTIAL_WINDOW_FILES)
        oids = [oid for _, oid in part if oid is not None]
        wanted = [oid for oid in oids if candidates is None or oid in candidates]
        bodies = partial.index.bodies([oid for oid in wanted if oid in partial.stored])
        read = partial.read([oid for oid in oids if oid not in partial.stored])
        for path, oid in part:
            if oid is None:
                continue
            data = bodies.get(oid) if oid in partial.stored else read.get(oid)
            if data is None or (oid not in partial.stored and b"\0" in data):
                continue
            for line, text in matching_lines(data, needle):
                snapshot.has_nul[snapshot.entries[path].oid] = False
                yield GrepMatch(path, line, text)


def _window(
    snapshot: Snapshot, files: list[str], start: int, end: int
) -> list[tuple[str, str | None]]:
    """`_scope` of files[start:end], cut once its search blobs reach PARTIAL_WINDOW_BYTES
    (at least one file): a window's text is held in memory at once."""
    part: list[tuple[str, str | None]] = []
    size = 0
    for path, oid in _scope(snapshot, files[start:end]):
        part.append((path, oid))
        size += snapshot.entries[path].size if oid is not None else 0
        if size >= PARTIAL_WINDOW_BYTES:
            break
    return part


def _pathspec_range(files: list[str], pathspec: str) -> tuple[int, int]:
    """The slice of the listing a literal pathspec searches: the path itself, or all under it."""
    start, end = files_under(files, pathspec)
    if pathspec:
        exact = _listed_at(files, pathspec)
        if exact >= 0:
            start, end = exact, exact + 1  # a file has nothing under it
    return start, end


def _index_hits(
    index: SearchIndex, snapshot: Snapshot, start: int, end: int, needle: bytes
) -> Iterator[tuple[str, int, bytes]]:
    """(path, line number, line) of each hit in `snapshot.files[start:end]`, in order.

    The first PROBE_FILES files are read without asking the trigram index, and the next
    ones too (in windows that double) while at least one file in DENSE_FILES holds the
    literal: a common literal fills a search's cap there, where its candidates would be most
    of the tree. After them, only the candidate blobs are read; when they are few, their
    paths are found by blob id (Entries.paths_of) rather than by walking the tree. A literal
    with a rare trigram (RARE_LIST_BYTES) skips the first files: its candidates are few."""
    files = snapshot.files
    grams = trigram_query(needle)
    rare = False
    if grams is not None and end - start > PROBE_FILES:  # fewer files are read at once anyway
        rare = min(index.posting_sizes(grams, RARE_SAMPLE_SEGMENTS).values()) <= RARE_LIST_BYTES
    position, window = start, 0 if rare else PROBE_FILES
    while window and position < end:  # PROBE_FILES 0: the index at once
        stop = min(end, start + window)
        hit_files, last = 0, None
        scope = _scope(snapshot, files[position:stop])
        for hit in index_lines(index, scope, needle, read=position - start):
            if hit[0] != last:
                hit_files, last = hit_files + 1, hit[0]
            yield hit
        sparse = hit_files * DENSE_FILES < stop - position
        position, window = stop, window * 2
        if sparse:
            break  # the index narrows the rest
    if position >= end:
        return
    candidates = index.candidates(grams) if grams is not None else None
    if candidates is not None and len(candidates) <= MAX_LOOKED_UP_CANDIDATES:
        found = snapshot.entries.paths_of(candidates)
        rest = sorted(path for path in found if position <= _listed_at(files, path) < end)
    else:  # too short for a trigram, or common: walked in order until the cap is full
        rest = files[position:end]
    yield from index_lines(index, _scope(snapshot, rest, candidates), needle, read=position - start)


def index_lines(
    index: SearchIndex, files: Iterable[tuple[str, str | None]], query: bytes, *, read: int = 0
) -> Iterator[tuple[str, int, bytes]]:
    """(path, line number, line) of each line holding `query`, as `git grep -F -n` finds
    them, in the order of `files` (path, blob id or None to skip). Bodies are read one
    first, then more at a time, `read` files having been read before these: a common
    literal fills a search's cap in its first files. A chunk never reaches past a power of
    two (then a multiple of MAX_QUERY_VARIABLES), where a window of `_index_hits` ends."""
    files = iter(files)
    while part := list(itertools.islice(files, min(max(read, 1), MAX_QUERY_VARIABLES))):
        read += len(part)
        bodies = index.bodies([oid for _, oid in part if oid is not None])
        for path, oid in part:
            data = bodies[oid] if oid is not None else None
            if data is not None:
                for line, text in matching_lines(data, query):
                    yield path, line, text


def trigram_query(query: bytes) -> list[int] | None:
    """The trigrams whose blobs a search of `query` reads (search_index/postings.py), or None
    when the literal is too short to have one."""
    from pr_review_api.git.search_index.postings import query_grams  # noqa: PLC0415  (numpy)

    grams = query_grams(query)
    if not grams:
        return None
    if len(grams) > MAX_QUERY_GRAMS:  # spread over the literal: both ends and between
        step = (len(grams) - 1) / (MAX_QUERY_GRAMS - 1)
        grams = [grams[round(i * step)] for i in range(MAX_QUERY_GRAMS)]
    return grams


def matching_lines(data: bytes, query: bytes) -> Iterator[tuple[int, bytes]]:
    """(line number, line without its newline) of each line of `data` holding `query`, as
    `git grep -F -n` numbers and cuts them; each line once."""
    position = data.find(query)
    line, counted = 1, 0
    while position >= 0:
        start = data.rfind(b"\n", 0, position) + 1
        end = data.find(b"\n", position)
        if end < 0:
            end = len(data)
        line += data.count(b"\n", counted, start)
        counted = start
        yield line, data[start:end]
        position = data.find(query, end + 1)


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
