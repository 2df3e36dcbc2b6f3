"""git/hunks.py: which right-side lines of the merge-base-to-head diff a comment may anchor to.

Every case runs real git on a real repository: renames, mode changes, binary files, no newline
at end of file, quoted paths, and content lines that look like headers.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from pr_review_api.git.hunks import FileHunks, diff_hunks, parse_hunks, unquote_path
from tests.conftest import examples
from tests.gitrepo import GitRepo, git

TEN = "".join(f"line {n}\n" for n in range(1, 11))


def _hunks(
    repo: GitRepo, base: str, head: str, wanted: set[str] | None = None
) -> dict[str, FileHunks]:
    return diff_hunks(repo.git_dir, base, head, wanted)


def test_added_and_context_lines_are_anchors(repo: GitRepo) -> None:
    base = repo.commit_files({"a.py": TEN})
    head = repo.commit_files({"a.py": TEN.replace("line 5\n", "line 5\nNEW\n")})
    hunk = _hunks(repo, base, head)["a.py"]
    assert hunk.added == {6}
    assert hunk.context == {3, 4, 5, 7, 8, 9}
    assert not hunk.anchors(1)
    assert not hunk.anchors(11)


def test_deleted_only_change_leaves_only_context(repo: GitRepo) -> None:
    base = repo.commit_files({"a.py": TEN})
    head = repo.commit_files({"a.py": TEN.replace("line 5\n", "")})
    hunk = _hunks(repo, base, head)["a.py"]
    assert hunk.added == set()
    assert hunk.deleted_lines == 1
    assert hunk.context == {2, 3, 4, 5, 6, 7}
    # GitLab positions name a context line on both sides: after the deleted line 5, the
    # head's line 5 is the base's line 6.
    assert hunk.context_old == {2: 2, 3: 3, 4: 4, 5: 6, 6: 7, 7: 8}


def test_deleted_file_has_no_right_side(repo: GitRepo) -> None:
    base = repo.commit_files({"a.py": TEN, "keep.py": "k\n"})
    head = repo.commit_files({}, delete=("a.py",))
    assert "a.py" not in _hunks(repo, base, head)


def test_new_file_is_all_added(repo: GitRepo) -> None:
    base = repo.commit_files({"keep.py": "k\n"})
    head = repo.commit_files({"new.py": "a\nb\nc\n"})
    assert _hunks(repo, base, head)["new.py"].added == {1, 2, 3}


def test_renamed_file_is_keyed_by_its_new_path(repo: GitRepo) -> None:
    base = repo.commit_files({"old/name.py": TEN})
    git(repo.path, "mv", "old/name.py", "new.py")
    head = repo.commit_files({"new.py": TEN.replace("line 9\n", "line nine\n")})
    files = _hunks(repo, base, head)
    assert "old/name.py" not in files
    assert files["new.py"].old_path == "old/name.py"
    assert files["new.py"].added == {9}
    assert 1 not in files["new.py"].context  # outside the rename's hunk


def test_pure_rename_and_mode_change_have_no_lines(repo: GitRepo) -> None:
    base = repo.commit_files({"a.py": TEN, "run.sh": "echo\n"})
    git(repo.path, "mv", "a.py", "b.py")
    os.chmod(repo.path / "run.sh", 0o755)
    head = repo.commit_files({})
    files = _hunks(repo, base, head)
    for name in ("b.py", "run.sh"):
        assert not files.get(name) or not (files[name].added or files[name].context)


def test_binary_file_is_marked_and_has_no_lines(repo: GitRepo) -> None:
    base = repo.commit_files({"img.bin": b"\x00\x01\x02"})
    head = repo.commit_files({"img.bin": b"\x00\x01\x03\x04"})
    hunk = _hunks(repo, base, head)["img.bin"]
    assert hunk.binary
    assert not hunk.added
    assert not hunk.context


def test_no_newline_at_end_of_file_does_not_shift_lines(repo: GitRepo) -> None:
    base = repo.commit_files({"a.txt": "one\ntwo"})
    head = repo.commit_files({"a.txt": "one\ntwo\nthree"})
    hunk = _hunks(repo, base, head)["a.txt"]
    assert hunk.added == {2, 3}
    assert hunk.context == {1}


def test_quoted_paths_are_unquoted(repo: GitRepo) -> None:
    names = ["tab\there.py", "naïve.py", 'quote".py', "space name.py"]
    base = repo.commit_files({"keep": "k\n"})
    head = repo.commit_files({name: "x\n" for name in names})
    files = _hunks(repo, base, head)
    for name in names:
        assert files[name].added == {1}, name


def test_content_lines_that_look_like_headers_stay_content(repo: GitRepo) -> None:
    tricky = "++ b/evil.py\n-- a/x\n@@ -1 +1 @@\ndiff --git a/q b/q\n"
    base = repo.commit_files({"a.txt": "start\n"})
    head = repo.commit_files({"a.txt": "start\n" + tricky})
    files = _hunks(repo, base, head)
    assert set(files) == {"a.txt"}
    assert files["a.txt"].added == {2, 3, 4, 5}


def test_only_wanted_files_are_kept(repo: GitRepo) -> None:
    base = repo.commit_files({"keep": "k\n"})
    head = repo.commit_files({"a.py": "a\n", "b.py": "b\n"})
    assert set(_hunks(repo, base, head, {"b.py"})) == {"b.py"}


def test_unquote_handles_escapes_and_octal_bytes() -> None:
    assert unquote_path(b'"a\\tb\\\\c\\"d"') == b'a\tb\\c"d'
    assert unquote_path(b'"na\\303\\257ve"') == "naïve".encode()
    assert unquote_path(b"plain") == b"plain"


def test_parse_ignores_a_malformed_hunk_header() -> None:
    lines = [b"diff --git a/x b/x\n", b"--- a/x\n", b"+++ b/x\n", b"@@ nonsense @@\n", b"+a\n"]
    assert parse_hunks(lines)["x"].added == set()


@hypothesis_settings(
    max_examples=examples(25),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    old=st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=30),
    new=st.lists(st.sampled_from(["a", "b", "c", "e"]), max_size=30),
)
def test_anchors_match_what_git_shows_line_by_line(
    tmp_path_factory: pytest.TempPathFactory, old: list[str], new: list[str]
) -> None:
    # Cross-check against git's own per-line view: `git blame` marks every head line that the
    # change added with the head commit; every added line we record must be one of them.
    repo = GitRepo(tmp_path_factory.mktemp("hunks"))
    base = repo.commit_files({"f.txt": "".join(x + "\n" for x in old) or "\n"})
    head = repo.commit_files({"f.txt": "".join(x + "\n" for x in new) or "\n"}, "head")
    hunk = _hunks(repo, base, head).get("f.txt")
    porcelain = git(repo.path, "blame", "--porcelain", head, "--", "f.txt")
    from_head = {
        int(line.split()[2])
        for line in porcelain.splitlines()
        if line.startswith(head) and len(line.split()) >= 3
    }
    added = set() if hunk is None else hunk.added
    assert added == from_head
    lines = len(new) or 1
    assert all(1 <= n <= lines for n in (set() if hunk is None else hunk.context))
    # A context line reads the same on both sides: its left-side number names the same text.
    old_lines = old or [""]
    new_lines = new or [""]
    for right, left in ({} if hunk is None else hunk.context_old).items():
        assert old_lines[left - 1] == new_lines[right - 1]
    assert set({} if hunk is None else hunk.context_old) == (
        set() if hunk is None else hunk.context
    )
