"""Reading `git ls-tree -r -t -l -z`: every record git can write, and nothing else.

A path may hold spaces, tabs and newlines (only NUL ends it); a missing blob ("BAD") and a
name that is not UTF-8 are absent; output that is not whole records is an error.
"""

from __future__ import annotations

import pytest

from pr_review_api.git.entries import TreeEntry
from pr_review_api.git.limits import Work
from pr_review_api.git.ls_tree import parse_ls_tree
from pr_review_api.git.tree import load_snapshot
from pr_review_api.git_runner import GitError
from tests.gitrepo import FILE, GITLINK, LINK, GitRepo

A = "a" * 40
B = "b" * 40


def parsed(*records: bytes) -> tuple[dict[str, TreeEntry], set[str]]:
    return parse_ls_tree([b"".join(records)], Work())


def test_every_kind_of_record_is_read() -> None:
    entries, directories = parsed(
        b"040000 tree " + A.encode() + b"       -\tdir\0",
        b"100644 blob " + A.encode() + b"      12\tdir/a file\twith tab\nand newline\0",
        b"100755 blob " + B.encode() + b" 1234567\tdir/run.sh\0",
        b"120000 blob " + B.encode() + b"       5\tlink\0",
        b"160000 commit " + A.encode() + b"       -\tsub\0",
        b"100644 blob " + B.encode() + b"     BAD\tmissing.txt\0",
        b"100644 blob " + B.encode() + b"       3\tnot-utf8-\xff\0",
    )
    assert directories == {"", "dir"}
    assert entries == {
        "dir/a file\twith tab\nand newline": TreeEntry("file", A, 12),
        "dir/run.sh": TreeEntry("file", B, 1234567),
        "link": TreeEntry("link", B, 5),
        "sub": TreeEntry("submodule", A, -1),
    }


def test_records_split_across_chunks_are_read_whole() -> None:
    record = b"100644 blob " + A.encode() + b"       7\tsome/path.txt\0"
    chunks = [record[:10], record[10:30], record[30:] + record[:5], record[5:]]
    entries, _ = parse_ls_tree(chunks, Work())
    assert entries == {"some/path.txt": TreeEntry("file", A, 7)}


def test_the_paths_of_one_blob_share_one_entry() -> None:
    record = b"100644 blob " + A.encode() + b"       7\t"
    entries, _ = parsed(*(record + f"f{n}".encode() + b"\0" for n in range(1000)))
    assert len(entries) == 1000
    assert len({id(entry) for entry in entries.values()}) == 1


@pytest.mark.parametrize(
    "output",
    [
        b"100644 blob " + A.encode() + b"       7\tcut short",  # no final NUL
        b"100644 blob " + A.encode() + b"       7 no tab\0",
        b"100644 blob " + A.encode() + b"\tno size\0",
        b"garbage\0",
    ],
)
def test_output_that_is_not_whole_records_is_an_error(output: bytes) -> None:
    with pytest.raises(GitError):
        parsed(output)


def test_a_loaded_tree_has_what_git_holds(repo: GitRepo) -> None:
    base = repo.commit_files({"x.txt": "x\n"})
    head = repo.commit_tree(
        {
            "a b/c\td.txt": (FILE, b"tabbed\n"),
            "to_c": (LINK, b"a b/c\td.txt"),
            "sub": (GITLINK, base.encode()),
        },
        parent=base,
    )
    snapshot = load_snapshot(repo.git_dir, head)
    assert snapshot.directories == {"", "a b"}
    assert snapshot.entries["a b/c\td.txt"].size == len(b"tabbed\n")
    assert snapshot.entries["sub"].kind == "submodule"
    assert snapshot.link_targets == {"to_c": b"a b/c\td.txt"}
