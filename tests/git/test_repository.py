"""The repository layer: a pinned pair of commits read straight from git's object store.

Path rules (split_path), `.git` look-alikes, virtual symbolic-link resolution, the head-tree
index, blobs, grep parsing, the merge base and commit resolution; on real repositories.
"""

from __future__ import annotations

import io
import shutil
import threading
import time
import tracemalloc
from collections.abc import Generator
from pathlib import Path

import pytest

from pr_review_api.errors import ToolError
from pr_review_api.git.limits import Work
from pr_review_api.git.paths import is_dot_git, split_path
from pr_review_api.git.repository import PinnedRepository, Revisions, resolve_commit
from pr_review_api.git.search import GrepMatch
from pr_review_api.git.search import parse_grep as _parse_grep
from pr_review_api.git.store import RepositoryStore
from pr_review_api.git.symlinks import resolve_in
from pr_review_api.settings import MAX_PATH_BYTES, MAX_SOURCE_FILE_BYTES, MAX_SYMLINK_HOPS
from tests.gitrepo import EXECUTABLE, FILE, GITLINK, LINK, Entry, GitRepo, git, started_git
from tests.hostile.world import (
    APP_PY,
    HUGE_LINK_TARGET,
    LOOKALIKES,
    HostileWorld,
    build_hostile_world,
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def pinned(world: HostileWorld) -> PinnedRepository:
    return world.pinned()


def raw_commit(repo: GitRepo, entries: dict[str, Entry]) -> tuple[str, str]:
    """A base commit and a head built from raw entries on top of it."""
    base = repo.commit_files({"base.txt": "base\n"})
    return base, repo.commit_tree(entries, parent=base)


def code_of(raw: str) -> str:
    with pytest.raises(ToolError) as caught:
        split_path(raw)
    return caught.value.code


# --- split_path -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parts"),
    [
        ("", []),
        (".", []),
        ("./", []),
        ("src", ["src"]),
        ("src/app.py", ["src", "app.py"]),
        ("./src//app.py", ["src", "app.py"]),
        ("src/./app.py/", ["src", "app.py"]),
        ("a b/c:d/é 😀", ["a b", "c:d", "é 😀"]),
        (".github/workflows", [".github", "workflows"]),
        (".gitignore", [".gitignore"]),
        ("...", ["..."]),
        ("a/..b", ["a", "..b"]),
    ],
)
def test_split_path_normalizes_dots_and_empty_components(raw: str, parts: list[str]) -> None:
    assert split_path(raw) == parts


@pytest.mark.parametrize(
    "raw",
    ["/", "/etc/passwd", "//server/share", "C:x", "c:/x", "Z:", "..", "../x", "a/../b", "a/.."],
)
def test_split_path_absolute_drive_unc_and_parent_paths_are_outside(raw: str) -> None:
    assert code_of(raw) == "outside_repository"


@pytest.mark.parametrize(
    "raw",
    [
        "a\\b",
        "\\\\server\\share",
        "C\\x",
        "a\x00b",
        "a\x01",
        "a\nb",
        "a\rb",
        "a\tb",
        "a\x1f",
        "a\x7f",
        ".git",
        ".git/config",
        "src/.git",
        ".GIT",
        ".Git/HEAD",
        ".git ",
        ".git.",
        ".git. .",
        ".g\u200cit",
        "\ufeff.git",
        ".git\u200d",
        "\u202e.git",
    ],
)
def test_split_path_forbidden_characters_and_git_components_are_invalid(raw: str) -> None:
    assert code_of(raw) == "invalid_path"


@pytest.mark.parametrize("raw", ["\ud800", "src/\udcff.py", "a\udfffb"])
def test_split_path_lone_surrogates_are_invalid(raw: str) -> None:
    assert code_of(raw) == "invalid_path"


def test_split_path_length_is_counted_in_utf8_bytes() -> None:
    assert split_path("a" * MAX_PATH_BYTES) == ["a" * MAX_PATH_BYTES]
    assert split_path("é" * (MAX_PATH_BYTES // 2)) == ["é" * (MAX_PATH_BYTES // 2)]
    assert code_of("a" * (MAX_PATH_BYTES + 1)) == "invalid_path"
    assert code_of("é" * (MAX_PATH_BYTES // 2) + "a") == "invalid_path"


@pytest.mark.parametrize(
    "name",
    [".git", ".GIT", ".Git", ".git ", ".git.", ".git . ", ".g\u200cit", "\ufeff.git", ".git\u2060"],
)
def test_is_dot_git_catches_case_space_dot_and_ignorable_lookalikes(name: str) -> None:
    assert is_dot_git(name)


@pytest.mark.parametrize("name", [".github", "git", ".gitignore", "x.git", ".gi", "._git", "git."])
def test_is_dot_git_leaves_other_names_alone(name: str) -> None:
    assert not is_dot_git(name)


# --- pinning commits ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["HEAD", "abc123", "A" * 40, "g" * 40, "0" * 39, "0" * 41])
def test_pinned_repository_requires_full_lowercase_shas(world: HostileWorld, bad: str) -> None:
    with pytest.raises(ValueError, match="full SHAs"):
        PinnedRepository(world.repo.git_dir, Revisions(bad, world.head, world.base))


def test_open_pins_the_merge_base_of_base_and_head(repo: GitRepo) -> None:
    fork = repo.commit_files({"a.txt": "a\n"})
    git(repo.path, "checkout", "-q", "-b", "feature")
    head = repo.commit_files({"b.txt": "b\n"})
    repo.checkout("main")
    base = repo.commit_files({"c.txt": "c\n"})
    revisions = PinnedRepository.open(repo.git_dir, base, head).revisions
    assert revisions == Revisions(base_sha=base, head_sha=head, merge_base_sha=fork)


def test_open_falls_back_to_the_base_without_a_common_ancestor(repo: GitRepo) -> None:
    base = repo.commit_files({"a.txt": "a\n"})
    head = repo.commit_tree({"b.txt": (FILE, b"b\n")})  # a root commit of its own
    assert PinnedRepository.open(repo.git_dir, base, head).revisions.merge_base_sha == base


def test_changed_files_run_from_the_merge_base(repo: GitRepo) -> None:
    fork = repo.commit_files({"keep.txt": "k\n", "edit.txt": "e\n", "gone.txt": "g\n"})
    git(repo.path, "checkout", "-q", "-b", "feature")
    head = repo.commit_files({"edit.txt": "e2\n", "new.txt": "n\n"}, delete=("gone.txt",))
    repo.checkout("main")
    base = repo.commit_files({"base_only.txt": "b\n"})
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.revisions.merge_base_sha == fork
    assert pinned.changed_files() == [("M", "edit.txt"), ("D", "gone.txt"), ("A", "new.txt")]


def test_same_tree_compares_the_trees_through_the_stores_describer(
    repo: GitRepo, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.commit_files({"a.txt": "a\n"})
    empty = repo.commit_files({}, "the base's tree again")
    edited = repo.commit_files({"a.txt": "b\n"})
    mode_only = repo.commit_tree({"a.txt": (EXECUTABLE, b"a\n")}, parent=base)
    with RepositoryStore(threads=1) as store:
        pinned = {
            head: PinnedRepository.open(repo.git_dir, base, head, store=store)
            for head in (base, empty, edited, mode_only)
        }
        started = started_git(monkeypatch)
        answers = {head: one.same_tree() for head, one in pinned.items()}
        assert started == []  # the describer is running already: no process started
    assert answers == {base: True, empty: True, edited: False, mode_only: False}
    # Once the store is closed its readers tell nothing: rev-parse answers alike.
    assert {head: one.same_tree() for head, one in pinned.items()} == answers
    assert [argv[1] for argv in started] == ["rev-parse"] * 4


def test_diff_is_cut_at_max_bytes_and_says_so(repo: GitRepo) -> None:
    base = repo.commit_files({"a.txt": "a\n"})
    head = repo.commit_files({"a.txt": "a\n" + "line\n" * 1000})
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    full, more = pinned.diff([], 1_000_000)
    assert not more
    cut, more = pinned.diff([], 100)
    assert (cut, more) == (full[:100], True)
    assert pinned.diff(["other.txt"], 100) == (b"", False)


def test_snapshots_of_one_head_are_shared(world: HostileWorld) -> None:
    with RepositoryStore() as store:
        first = PinnedRepository.open(world.repo.git_dir, world.base, world.head, store=store)
        assert (
            first.snapshot
            is PinnedRepository.open(
                world.repo.git_dir, world.base, world.head, store=store
            ).snapshot
        )


# --- the head tree, never the working tree -------------------------------------------------


def test_uncommitted_changes_are_invisible(repo: GitRepo) -> None:
    base = repo.commit_files({"a.py": "committed\n"})
    head = repo.commit_files({"b.py": "b\n"})
    repo.write({"a.py": "MODIFIED\n", "untracked.py": "u\n", "staged.py": "s\n"})
    git(repo.path, "add", "staged.py")
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.read_source(pinned.resolve_file("a.py")) == "committed\n"
    for path in ("untracked.py", "staged.py"):
        with pytest.raises(ToolError, match="does not exist"):
            pinned.resolve(path)
    assert pinned.snapshot.files == ["a.py", "b.py"]


def test_the_working_tree_is_never_needed(repo: GitRepo) -> None:
    base = repo.commit_files({"a.py": "committed\n"})
    head = repo.commit_files({"src/b.py": "b\n"})
    for child in repo.path.iterdir():
        if child.is_dir() and child.name != ".git":
            shutil.rmtree(child)
        elif child.is_file():
            child.unlink()
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.read_source(pinned.resolve_file("src/b.py")) == "b\n"
    assert [m.path for m in pinned.grep("committed", "")] == ["a.py"]


def test_a_bare_repository_works(tmp_path: Path) -> None:
    work = GitRepo(tmp_path / "work")
    base = work.commit_files({"a.py": "a\n"})
    head = work.commit_files({"a.py": "a\nb\n"})
    bare = tmp_path / "bare.git"
    git(tmp_path, "clone", "-q", "--bare", str(work.path), str(bare))
    pinned = PinnedRepository.open(bare, base, head)
    assert pinned.read_source(pinned.resolve_file("a.py")) == "a\nb\n"
    assert b"+b" in pinned.diff([], 10_000)[0]


# --- the index of the head tree -------------------------------------------------------------


def test_listable_files_are_sorted_regular_files_and_links_to_them(world: HostileWorld) -> None:
    files = world.pinned().snapshot.files
    assert files == sorted(files)
    assert files == world.listable()


def test_tree_entries_with_non_utf8_names_are_absent(pinned: PinnedRepository) -> None:
    assert not [p for p in pinned.snapshot.entries if p.startswith("weird/") and "not-utf8" in p]


def test_entries_no_request_can_spell_exist_but_are_not_listable_or_searchable(
    pinned: PinnedRepository,
) -> None:
    for path in ("weird/new\nline.txt", "weird/tab\t.txt", "weird/back\\slash.txt", *LOOKALIKES):
        assert path in pinned.snapshot.entries
        assert path not in pinned.snapshot.files
        assert not pinned.is_searchable(path)


def test_dot_and_dot_dot_tree_entries_can_never_be_named(repo: GitRepo) -> None:
    base, head = raw_commit(
        repo, {"..": (FILE, b"dotdot\n"), "d/./x": (FILE, b"dot\n"), "ok": (FILE, b"ok\n")}
    )
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.snapshot.files == ["ok"]
    assert not pinned.is_searchable("..")
    assert not pinned.is_searchable("d/./x")


def test_entries_whose_blobs_are_missing_are_absent(repo: GitRepo) -> None:
    # `git ls-tree -l` prints the size "BAD" for an object the store does not hold.
    base = repo.commit_files({"ok.txt": "fine\n"})
    ok = git(repo.path, "rev-parse", "HEAD:ok.txt")
    tree = git(
        repo.path,
        "mktree",
        "--missing",
        input_bytes=(
            f"100644 blob {ok}\tok.txt\n"
            f"100644 blob {'1' * 40}\tgone.txt\n"
            f"120000 blob {'2' * 40}\tgone_link\n"
            f"120000 blob {git(repo.path, 'hash-object', '-w', '--stdin', input_bytes=b'gone.txt')}"
            "\tto_gone\n"
        ).encode(),
    )
    head = git(repo.path, "commit-tree", tree, "-p", base, "-m", "missing objects")
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.snapshot.files == ["ok.txt"]
    for path in ("gone.txt", "gone_link", "to_gone"):
        with pytest.raises(ToolError) as caught:
            pinned.resolve(path)
        assert caught.value.code == "path_not_found"
    assert pinned.read_source(pinned.resolve_file("ok.txt")) == "fine\n"
    assert [hit.path for hit in pinned.grep("fine", "")] in (["ok.txt"], [])
    pinned.diff([], 10_000)  # git fails on the missing blob; no exception reaches here


def test_files_under_a_directory_excludes_prefix_lookalikes(pinned: PinnedRepository) -> None:
    start, end = pinned.files_under("src")
    assert pinned.snapshot.files[start:end] == ["src/app.py", "src/lib/util.py", "src/run.sh"]
    assert pinned.files_under("") == (0, len(pinned.snapshot.files))
    start, end = pinned.files_under("nope")
    assert start == end


def test_page_start_is_just_after_the_cursor(pinned: PinnedRepository) -> None:
    files = pinned.snapshot.files
    index = pinned.page_start("src", "src/app.py")
    assert files[index] == "src/lib/util.py"
    assert pinned.page_start("src", "a") == pinned.files_under("src")[0]


# --- virtual symbolic links -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "real"),
    [
        ("links/to_app", "src/app.py"),
        ("links/chain", "src/app.py"),
        ("links/padded_ok", "src/app.py"),
        ("links/to_src/app.py", "src/app.py"),
        ("links/to_src/lib/util.py", "src/lib/util.py"),
    ],
)
def test_links_resolve_virtually_to_the_real_entry(
    pinned: PinnedRepository, raw: str, real: str
) -> None:
    resolved = pinned.resolve(raw)
    assert resolved.path == real
    assert resolved.entry is not None
    assert resolved.entry.kind == "file"


def test_a_directory_link_resolves_to_the_real_directory(pinned: PinnedRepository) -> None:
    resolved = pinned.resolve("links/to_src")
    assert (resolved.path, resolved.entry) == ("src", None)
    assert pinned.resolve_directory("links/to_src/lib") == "src/lib"


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ("links/to_passwd", "outside_repository"),
        ("links/up_out", "outside_repository"),
        ("links/into_git", "outside_repository"),
        ("links/into_git_upper", "outside_repository"),
        ("links/to_outside", "outside_repository"),
        ("links/drive", "outside_repository"),
        ("links/empty", "outside_repository"),
        ("escape_rel", "outside_repository"),
        ("deep/escape", "outside_repository"),
        ("links/backslash", "invalid_path"),
        ("links/loop_a", "invalid_path"),
        ("links/self", "invalid_path"),
        ("links/huge", "invalid_path"),
        ("links/padded_over", "invalid_path"),
        ("links/dangling", "path_not_found"),
        ("links/through_file", "path_not_found"),
        ("links/to_src/nope", "path_not_found"),
    ],
)
def test_links_that_leave_enter_git_loop_or_dangle_are_refused(
    pinned: PinnedRepository, raw: str, code: str
) -> None:
    with pytest.raises(ToolError) as caught:
        pinned.resolve(raw)
    assert caught.value.code == code


def _chain(length: int) -> dict[str, Entry]:
    """l0 -> l1 -> ... -> l{length-1} -> target.txt."""
    entries: dict[str, Entry] = {"target.txt": (FILE, b"end\n")}
    for index in range(length):
        nxt = f"l{index + 1}" if index + 1 < length else "target.txt"
        entries[f"l{index}"] = (LINK, nxt.encode())
    return entries


def test_at_most_40_symlink_hops_are_followed(repo: GitRepo) -> None:
    base, head = raw_commit(repo, _chain(MAX_SYMLINK_HOPS + 1))
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.resolve("l1").path == "target.txt"  # 40 hops
    with pytest.raises(ToolError, match="too many levels"):
        pinned.resolve("l0")  # 41 hops
    assert "l1" in pinned.snapshot.files
    assert "l0" not in pinned.snapshot.files


def test_link_targets_up_to_path_max_resolve_longer_ones_are_invalid(repo: GitRepo) -> None:
    def padded(total: int) -> bytes:
        return b"./" * ((total - len("a.txt")) // 2) + b"a.txt"

    fits, over = padded(MAX_PATH_BYTES - 1), padded(MAX_PATH_BYTES + 1)
    assert (len(fits), len(over)) == (MAX_PATH_BYTES - 1, MAX_PATH_BYTES + 1)
    base, head = raw_commit(
        repo, {"a.txt": (FILE, b"a\n"), "fits": (LINK, fits), "over": (LINK, over)}
    )
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.resolve("fits").path == "a.txt"
    with pytest.raises(ToolError) as caught:
        pinned.resolve("over")
    assert caught.value.code == "invalid_path"


def test_oversized_link_targets_are_never_loaded(pinned: PinnedRepository) -> None:
    assert len(HUGE_LINK_TARGET) > 1_000_000
    assert "links/huge" in pinned.snapshot.entries
    assert "links/huge" not in pinned.snapshot.link_targets
    assert max(map(len, pinned.snapshot.link_targets.values())) <= MAX_PATH_BYTES


def test_many_looping_links_cost_little(repo: GitRepo) -> None:
    # Each link re-enters itself with a PATH_MAX-sized target, and a few carry megabytes. The
    # cost is counted, not timed (it was ~7 s per megabyte-sized loop once): each looping link
    # is given up after at most MAX_SYMLINK_HOPS hops of at most PATH_MAX bytes each, and a
    # megabyte-sized target is never expanded at all.
    looping = b"self0/" + b"ab/" * ((MAX_PATH_BYTES - 6) // 3)
    entries: dict[str, Entry] = {
        f"self{i}": (LINK, looping.replace(b"self0", f"self{i}".encode())) for i in range(50)
    }
    entries.update({f"huge{i}": (LINK, HUGE_LINK_TARGET) for i in range(5)})
    base, head = raw_commit(repo, entries)
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    spent: dict[str, tuple[int, int]] = {}
    for name in entries:
        work = Work()
        with pytest.raises(ToolError):
            resolve_in(pinned.snapshot, name, work=work)
        spent[name] = (work.link_hops, work.link_bytes)
    for name, (hops, expanded) in spent.items():
        assert hops <= MAX_SYMLINK_HOPS + 1, name
        assert expanded <= hops * MAX_PATH_BYTES, name
    assert all(spent[f"self{i}"][0] > MAX_SYMLINK_HOPS // 2 for i in range(50))  # they loop
    assert all(spent[f"huge{i}"][1] == 0 for i in range(5))


def test_a_gitlink_is_a_submodule_entry_never_a_file_or_directory(repo: GitRepo) -> None:
    base = repo.commit_files({"a.txt": "a\n"})
    head = repo.commit_tree({"vendor/lib": (GITLINK, base.encode()), "a.txt": (FILE, b"a\n")})
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    resolved = pinned.resolve("vendor/lib")
    assert resolved.entry is not None
    assert resolved.entry.kind == "submodule"
    for method in (pinned.resolve_file, pinned.resolve_directory):
        with pytest.raises(ToolError):
            method("vendor/lib")
    with pytest.raises(ToolError, match="does not exist"):
        pinned.resolve("vendor/lib/README.md")  # never entered
    assert pinned.snapshot.files == ["a.txt"]


# --- blobs ----------------------------------------------------------------------------------


def test_read_source_returns_the_blob_text(pinned: PinnedRepository) -> None:
    assert pinned.read_source(pinned.resolve_file("links/to_app")) == APP_PY


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("bin/nul.bin", "binary_file"),
        ("bin/latin1.txt", "binary_file"),
        ("bin/mixed.txt", "binary_file"),
        ("big/over.txt", "file_too_large"),
    ],
)
def test_read_source_refuses_binary_non_utf8_and_oversized_blobs(
    pinned: PinnedRepository, path: str, code: str
) -> None:
    with pytest.raises(ToolError) as caught:
        pinned.read_source(pinned.resolve_file(path))
    assert caught.value.code == code


def test_read_source_reads_exactly_1_mib(pinned: PinnedRepository) -> None:
    text = pinned.read_source(pinned.resolve_file("big/exact.txt"))
    assert len(text.encode()) == MAX_SOURCE_FILE_BYTES


def test_line_counts_count_files_of_any_size(pinned: PinnedRepository) -> None:
    expected = {"big/over.txt": 3, "text/no_newline.txt": 2, "text/empty.txt": 0}
    expected |= {"text/crlf.txt": 3, "text/giant_line.txt": 1}
    files = {path: pinned.resolve_file(path) for path in expected}
    counts = pinned.line_counts(files.values())
    for path, file in files.items():
        assert file.entry is not None
        assert counts[file.entry.oid] == expected[path]


@pytest.mark.parametrize(
    ("path", "searchable"),
    [
        ("src/app.py", True),
        ("big/exact.txt", True),
        ("big/over.txt", False),
        ("links/to_app", False),
        ("vendor/lib", False),
        ("nope", False),
    ],
)
def test_is_searchable_means_regular_reachable_and_at_most_1_mib(
    pinned: PinnedRepository, path: str, searchable: bool
) -> None:
    assert pinned.is_searchable(path) is searchable


def test_is_binary_looks_at_the_whole_file(repo: GitRepo) -> None:
    base, head = raw_commit(
        repo,
        {
            "late.txt": (FILE, b"a\n" * 10_000 + b"\x00"),
            "early.bin": (FILE, b"\x00"),
            "text.txt": (FILE, b"a\n" * 10_000),
        },
    )
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.is_binary("late.txt")
    assert pinned.is_binary("early.bin")
    assert not pinned.is_binary("text.txt")


# --- grep -----------------------------------------------------------------------------------


def test_grep_reports_raw_literal_hits_at_the_head(pinned: PinnedRepository) -> None:
    hits = list(pinned.grep("validate_name", "src"))
    assert hits == [
        GrepMatch("src/app.py", 3, b"def validate_name(name: str) -> None:"),
        GrepMatch("src/app.py", 8, b"    validate_name(widget.name)"),
    ]


def test_grep_pathspec_is_literal(pinned: PinnedRepository) -> None:
    assert list(pinned.grep("needle", "src/*.py")) == []
    assert list(pinned.grep("needle", ":(glob)src/**")) == []


def test_grep_stops_reading_when_dropped(pinned: PinnedRepository) -> None:
    hits = pinned.grep("needle", "")
    first = next(hits)
    assert isinstance(hits, Generator)
    hits.close()  # kills git; no wait for the rest of the output
    assert first.line >= 1


class _Trickle(io.BytesIO):
    """A stream that hands out one byte per read, to split every record."""

    def read(self, size: int | None = -1) -> bytes:
        return super().read(1)


def test_grep_parser_survives_records_split_across_reads() -> None:
    prefix = b"f" * 40 + b":"
    data = (
        prefix + b"a.py\x0012\x00text one\n"
        + prefix + b"new\nline.py\x003\x00two\n"  # a newline in a path cannot shift records
        + b"other:rev.py\x001\x00foreign prefix\n"
        + prefix + b"b.py\x00x\x00not a line number\n"
        + prefix + b"\xff.py\x001\x00non-UTF-8 path\n"
        + prefix + b"c.py\x004\x00nul \x00 inside\n"
        + prefix + b"d.py\x005\x00unterminated"
    )  # fmt: skip
    assert list(_parse_grep(_Trickle(data), prefix)) == [
        GrepMatch("a.py", 12, b"text one"),
        GrepMatch("new\nline.py", 3, b"two"),
        GrepMatch("c.py", 4, b"nul \x00 inside"),
    ]


# --- commits --------------------------------------------------------------------------------


def test_resolve_commit_names_commits_only(repo: GitRepo) -> None:
    sha = repo.commit_files({"a.txt": "a\n"})
    tree = git(repo.path, "rev-parse", "HEAD^{tree}")
    assert resolve_commit(repo.git_dir, "HEAD") == sha
    assert resolve_commit(repo.git_dir, "main") == sha
    assert resolve_commit(repo.git_dir, sha[:10]) == sha
    assert resolve_commit(repo.git_dir, sha) == sha
    for bad in ("", "-", "--all", "--output=x", "a\x00b", "nope", tree, "0" * 40):
        assert resolve_commit(repo.git_dir, bad) is None
    assert not (repo.git_dir / "x").exists()


def test_line_counts_stream_and_stop_at_1_mib_of_a_huge_blob(repo: GitRepo) -> None:
    # 50 MB of NULs and newlines is a few hundred KB of git data; counting must not hold it.
    huge = (b"\0" * 99 + b"\n") * 500_000
    small = b"one\ntwo\n"
    head = repo.commit_files({"huge.bin": huge, "small.txt": small})
    del huge
    with RepositoryStore() as store:
        pinned = PinnedRepository.open(repo.git_dir, head, head, store=store)
        files = [pinned.resolve_file("huge.bin"), pinned.resolve_file("small.txt")]
        tracemalloc.start()
        try:
            counts = pinned.line_counts([files[0], files[1], files[0]])
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        oids = [file.entry.oid for file in files if file.entry is not None]
        # Lines that begin within the first 1 MiB (and the one the unread rest begins).
        assert counts == {oids[0]: MAX_SOURCE_FILE_BYTES // 100 + 1, oids[1]: 2}
        assert peak < 4 * 1024**2, f"peak {peak / 1024**2:.1f} MiB counting a 50 MB blob"
        # The reader stopped in the middle of the blob; the next read starts a new one.
        assert pinned.read_source(files[1]) == "one\ntwo\n"


# --- a store made for one pinned repository ---


def test_the_collector_closing_a_store_never_waits_on_a_lock_its_thread_holds(
    repo: GitRepo,
) -> None:
    """The collection that drops a pinned repository may run on a thread inside the store's own
    executor, holding its lock (concurrent.futures takes it around `submit`): closing the store
    there once waited on that lock forever, and a test hung with every executor of the
    process. The store is closed all the same, by another thread."""
    base = repo.commit_files({"a.txt": "a\n"})
    pinned = PinnedRepository.open(repo.git_dir, base, base)
    store = pinned._store
    dropped = threading.Event()

    def drop() -> None:
        nonlocal pinned
        with store.index_executor._shutdown_lock:  # as inside `submit`
            del pinned  # the last reference: its finalizer runs here, on this thread
        dropped.set()

    thread = threading.Thread(target=drop, daemon=True)  # a daemon: a regression hangs it
    thread.start()
    assert dropped.wait(10), "dropping the last reference waited on the executor's lock"
    deadline = time.monotonic() + 10
    while not store.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.closed
