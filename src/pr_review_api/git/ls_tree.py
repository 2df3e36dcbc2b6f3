"""Reading `git ls-tree` into a tree's entries and directories, within a `limits.Work`.

Split from `git.tree`, which indexes what this reads: here is only the stream of records,
charged to the budgets before it is parsed, and the records' fields made into entries.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from pr_review_api.git.entries import TreeEntry
from pr_review_api.git.limits import Work
from pr_review_api.git_runner import GitError, stream_git

_LS_TREE_CHUNK = 1 << 20
# A tree past this share (1/8) of its entry or memory budget is read and counted whole before
# the rest is parsed: a tree over budget is refused having parsed at most this share.
LOOK_AHEAD_SHARE = 8


def parse_ls_tree(chunks: Iterable[bytes], work: Work) -> tuple[dict[str, TreeEntry], set[str]]:
    """Index a stream of `ls-tree -r -t -l -z` output, charging `work` as it goes.

    Every record is charged to the budgets as it is read, before it is parsed (counting NULs
    costs git's speed, parsing costs Python's). A tree is parsed as it streams in while it
    stays within a small share of its budgets; past that, the rest is read and counted first,
    so a tree over a budget is refused having parsed at most that share (a million-entry
    tree of a few megabytes costs the time git takes to list it, not Python's to index it)."""
    entries: dict[str, TreeEntry] = {}
    directories: set[str] = {""}
    shared: dict[bytes, TreeEntry | bool] | None = {}
    ahead: list[bytes] = []  # whole records read ahead of the parse, once the tree is large
    limits = work.limits
    buffer = b""
    for chunk in chunks:
        buffer += chunk
        end = buffer.rfind(b"\0") + 1
        if not end:
            continue
        records, buffer = buffer[:end], buffer[end:]
        work.add_entries(records.count(b"\0"), len(records))
        work.check()
        if ahead or (
            work.entries * LOOK_AHEAD_SHARE > limits.max_tree_entries
            or work.index_bytes * LOOK_AHEAD_SHARE > limits.max_index_bytes
        ):
            ahead.append(records)
        else:
            shared = parse_records(records, entries, directories, shared)
    if buffer:
        raise GitError(["ls-tree"], 0, b"unexpected ls-tree output")
    ahead.reverse()
    while ahead:  # each chunk let go once parsed: the raw output and the index never both peak
        shared = parse_records(ahead.pop(), entries, directories, shared)
        work.check()
    return entries, directories


def parse_records(
    output: bytes,
    entries: dict[str, TreeEntry],
    directories: set[str],
    shared: dict[bytes, TreeEntry | bool] | None,
) -> dict[bytes, TreeEntry | bool] | None:
    """Index whole `ls-tree -l -z` records: mode, type, id, size ("-" for trees, "BAD" when
    missing), a tab, the path (any bytes but NUL), each ending in a NUL.

    `shared` maps the fields before the tab to what they made (an entry; True for a
    directory; False for a missing blob), so the many paths of one blob share one entry and
    its id: a tree of a million copies of a file holds one tuple, not a million. It is
    returned for the next records while it pays (most records repeat fields seen before, as
    in such a tree); in a tree of distinct blobs, as a source tree is, it costs more than it
    saves, and None is returned: the next records are parsed one by one."""
    records = output.split(b"\0")
    if records.pop():
        raise GitError(["ls-tree"], 0, b"unexpected ls-tree output")
    if shared is None:
        for record in records:
            meta, tab, raw_path = record.partition(b"\t")  # no tab in the fields before it
            if not tab:  # never from git
                raise GitError(["ls-tree"], 0, b"unexpected ls-tree output")
            _add(_entry_of(meta), raw_path, entries, directories)
        return None
    before = len(shared)
    for record in records:
        meta, tab, raw_path = record.partition(b"\t")
        if not tab:
            raise GitError(["ls-tree"], 0, b"unexpected ls-tree output")
        made = shared.get(meta)
        if made is None:
            made = shared[meta] = _entry_of(meta)
        _add(made, raw_path, entries, directories)
    return shared if (len(shared) - before) * 2 < len(records) else None


def _add(
    made: TreeEntry | bool, raw_path: bytes, entries: dict[str, TreeEntry], directories: set[str]
) -> None:
    try:
        path = raw_path.decode("utf-8")
    except UnicodeDecodeError:
        return  # a name no JSON request can spell is simply absent
    if made is True:
        directories.add(path)
    elif made is not False:
        entries[path] = made


def _entry_of(meta: bytes) -> TreeEntry | bool:
    """What a record's fields make: an entry, True for a tree, False for a missing blob."""
    fields = meta.split()
    if len(fields) != 4:  # never from git
        raise GitError(["ls-tree"], 0, b"unexpected ls-tree output")
    mode, kind, raw_oid, size = fields
    if kind == b"tree":
        return True
    if kind == b"commit":
        return TreeEntry("submodule", raw_oid.decode(), -1)
    if not size.isdigit():
        return False  # "BAD": the blob is missing from the object store, so unavailable
    return TreeEntry("link" if mode == b"120000" else "file", raw_oid.decode(), int(size))


def ls_tree(git_dir: Path, head_sha: str, work: Work) -> tuple[dict[str, TreeEntry], set[str]]:
    args = ["ls-tree", "-r", "-t", "-l", "-z", "--full-tree", head_sha]
    with stream_git(git_dir, args) as process:
        assert process.stdout is not None
        stdout = process.stdout
        indexed = parse_ls_tree(iter(lambda: stdout.read(_LS_TREE_CHUNK), b""), work)
        if process.wait() != 0:
            raise GitError(["ls-tree"], process.returncode, b"")
    return indexed
