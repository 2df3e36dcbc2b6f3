"""read_repository_file, rule by rule (seed/tool-calling.md, specification §7)."""

from __future__ import annotations

import json

import pytest

from pr_review_api.git.repository import PinnedRepository
from pr_review_api.settings import MAX_TOOL_RESULT_BYTES
from tests.gitrepo import GitRepo, git
from tests.hostile.world import (
    APP_PY,
    GIANT_LINE_CHARS,
    LINKS,
)
from tests.tools.support import (
    call,
    error_code,
    numbered,
    size,
)

# --- read_repository_file -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/etc/passwd", "outside_repository"),
        ("/src/app.py", "outside_repository"),
        ("C:x", "outside_repository"),
        ("c:/Windows/win.ini", "outside_repository"),
        ("//server/share", "outside_repository"),
        ("\\\\server\\share", "invalid_path"),
        ("src\\app.py", "invalid_path"),
        ("src/app.py\x00", "invalid_path"),
        ("src/app.py\x00.png", "invalid_path"),
        ("src/\x01app.py", "invalid_path"),
        ("src/app.py\n", "invalid_path"),
        ("src/app.py\x7f", "invalid_path"),
        ("..", "outside_repository"),
        ("../x", "outside_repository"),
        ("src/../README.md", "outside_repository"),
        ("src/lib/../../README.md", "outside_repository"),
        (".git/config", "invalid_path"),
        (".git", "invalid_path"),
        (".GIT/config", "invalid_path"),
        (".Git/HEAD", "invalid_path"),
        (".git /config", "invalid_path"),
        (".git./config", "invalid_path"),
        (".g\u200cit/config", "invalid_path"),
        ("\ufeff.git/config", "invalid_path"),
        ("sub/.git/config", "invalid_path"),
        ("a" * 4097, "invalid_path"),
    ],
)
def test_read_rejects_unsafe_paths(pinned: PinnedRepository, path: str, code: str) -> None:
    assert error_code(call(pinned, "read_repository_file", path=path)) == code


@pytest.mark.parametrize("path", ["src/app.py/", "links/to_app/", "src/app.py//"])
def test_read_of_a_file_path_with_a_trailing_slash_names_no_file(
    pinned: PinnedRepository, path: str
) -> None:
    """As POSIX's ENOTDIR: `a.py/` is no file name, for the tools as for the final review."""
    assert error_code(call(pinned, "read_repository_file", path=path)) == "not_a_file"


@pytest.mark.parametrize("path", ["links/to_app", "links/chain", "links/padded_ok"])
def test_read_follows_a_symlink_to_a_file_inside(pinned: PinnedRepository, path: str) -> None:
    result = call(pinned, "read_repository_file", path=path).result
    assert result["content"] == numbered(APP_PY)
    assert result["path"] == path


def test_read_follows_a_directory_symlink_inside(pinned: PinnedRepository) -> None:
    result = call(pinned, "read_repository_file", path="links/to_src/lib/util.py").result
    assert result["content"] == numbered("def helper() -> int:\n    return 42  # needle\n")


@pytest.mark.parametrize(
    "path",
    [
        "links/to_passwd",
        "links/up_out",
        "links/into_git",
        "links/into_git_upper",
        "links/to_outside",
        "links/drive",
        "links/empty",
        "escape_rel",
        "deep/escape",
    ],
)
def test_read_resolves_symlinks_before_the_containment_check(
    pinned: PinnedRepository, path: str
) -> None:
    assert error_code(call(pinned, "read_repository_file", path=path)) == "outside_repository"


@pytest.mark.parametrize(
    "path", ["links/loop_a", "links/loop_b", "links/self", "links/huge", "links/padded_over"]
)
def test_read_symlink_loops_and_oversized_links_are_errors_without_hanging(
    pinned: PinnedRepository, path: str
) -> None:
    assert error_code(call(pinned, "read_repository_file", path=path)) == "invalid_path"


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("links/dangling", "path_not_found"),
        ("links/through_file", "path_not_found"),
        ("links/backslash", "invalid_path"),
        ("README.md/x", "path_not_found"),
        ("missing.py", "path_not_found"),
    ],
)
def test_read_other_symlink_and_missing_path_errors(
    pinned: PinnedRepository, path: str, code: str
) -> None:
    assert error_code(call(pinned, "read_repository_file", path=path)) == code


@pytest.mark.parametrize("path", ["", ".", "src", "src/lib", "links/to_src", "vendor/lib"])
def test_read_directories_and_gitlinks_are_not_files(pinned: PinnedRepository, path: str) -> None:
    assert error_code(call(pinned, "read_repository_file", path=path)) == "not_a_file"


@pytest.mark.parametrize("path", ["bin/nul.bin", "bin/latin1.txt", "bin/mixed.txt"])
def test_read_binary_and_non_utf8_files_are_binary_file(
    pinned: PinnedRepository, path: str
) -> None:
    assert error_code(call(pinned, "read_repository_file", path=path)) == "binary_file"


def test_read_file_over_1_mib_is_file_too_large(pinned: PinnedRepository) -> None:
    assert error_code(call(pinned, "read_repository_file", path="big/over.txt")) == (
        "file_too_large"
    )


def test_read_file_of_exactly_1_mib_is_read(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "read_repository_file", path="big/exact.txt")
    assert outcome.ok
    assert outcome.result["content"] == "1: needle exact"
    assert outcome.result["total_lines"] == 2
    assert outcome.result["truncated"] is True  # line 2 alone is ~1 MiB
    assert size(outcome) <= MAX_TOOL_RESULT_BYTES


def test_read_result_has_the_contract_shape(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "read_repository_file", path="src/app.py")
    assert outcome.result == {
        "ok": True,
        "path": "src/app.py",
        "start_line": 1,
        "end_line": 8,
        "total_lines": 8,
        "content": numbered(APP_PY),
        "truncated": False,
    }
    assert outcome.content == json.dumps(outcome.result, separators=(",", ":"), ensure_ascii=False)


def test_read_content_is_numbered_n_colon_space_text(pinned: PinnedRepository) -> None:
    content = call(pinned, "read_repository_file", path="src/app.py").result["content"]
    assert content.splitlines()[:3] == [
        "1: from __future__ import annotations",
        "2: ",
        "3: def validate_name(name: str) -> None:",
    ]


def test_read_path_is_echoed_normalized(pinned: PinnedRepository) -> None:
    assert call(pinned, "read_repository_file", path="./src//app.py").result["path"] == (
        "src/app.py"
    )


def test_read_returns_at_most_400_lines(pinned: PinnedRepository) -> None:
    result = call(pinned, "read_repository_file", path="text/lines500.txt").result
    lines = result["content"].split("\n")
    assert len(lines) == 400
    assert (lines[0], lines[-1]) == ("1: line 1", "400: line 400")
    assert (result["end_line"], result["total_lines"], result["truncated"]) == (400, 500, True)


def test_read_400_lines_from_start_line_to_the_end(pinned: PinnedRepository) -> None:
    result = call(pinned, "read_repository_file", path="text/lines500.txt", start_line=101).result
    lines = result["content"].split("\n")
    assert (lines[0], lines[-1], len(lines)) == ("101: line 101", "500: line 500", 400)
    assert (result["start_line"], result["end_line"], result["truncated"]) == (101, 500, False)


def test_read_end_line_beyond_400_lines_is_still_capped(pinned: PinnedRepository) -> None:
    result = call(
        pinned, "read_repository_file", path="text/lines500.txt", start_line=1, end_line=500
    ).result
    assert (result["end_line"], result["truncated"]) == (400, True)


def test_read_range_returns_exactly_those_lines(pinned: PinnedRepository) -> None:
    result = call(pinned, "read_repository_file", path="src/app.py", start_line=3, end_line=5)
    assert result.result["content"] == (
        "3: def validate_name(name: str) -> None:\n"
        "4:     if not name:\n"
        '5:         raise ValueError("empty")'
    )
    assert (result.result["start_line"], result.result["end_line"]) == (3, 5)
    assert result.result["truncated"] is True  # lines past end_line


def test_read_end_line_past_the_end_is_clipped_and_not_truncated(
    pinned: PinnedRepository,
) -> None:
    result = call(pinned, "read_repository_file", path="src/app.py", start_line=7, end_line=99)
    assert (
        result.result["content"]
        == "7: def save(widget) -> None:\n8:     validate_name(widget.name)"
    )
    assert (result.result["end_line"], result.result["truncated"]) == (8, False)


def test_read_last_line_alone(pinned: PinnedRepository) -> None:
    result = call(pinned, "read_repository_file", path="src/app.py", start_line=8).result
    assert result["content"] == "8:     validate_name(widget.name)"
    assert (result["end_line"], result["truncated"]) == (8, False)


@pytest.mark.parametrize(
    ("path", "start_line", "end_line"),
    [
        ("src/app.py", 9, None),  # past the last line
        ("src/app.py", 100, 200),
        ("src/app.py", 5, 4),  # end before start
        ("text/empty.txt", 2, None),
    ],
)
def test_read_invalid_range(
    pinned: PinnedRepository, path: str, start_line: int, end_line: int | None
) -> None:
    outcome = call(
        pinned, "read_repository_file", path=path, start_line=start_line, end_line=end_line
    )
    assert error_code(outcome) == "invalid_range"


def test_read_empty_file_is_an_empty_result(pinned: PinnedRepository) -> None:
    result = call(pinned, "read_repository_file", path="text/empty.txt").result
    assert (result["content"], result["total_lines"], result["truncated"]) == ("", 0, False)


def test_read_crlf_lines_are_numbered_without_carriage_returns(pinned: PinnedRepository) -> None:
    result = call(pinned, "read_repository_file", path="text/crlf.txt").result
    assert result["content"] == "1: one\n2: two needle\n3: three"
    assert result["total_lines"] == 3


def test_read_last_line_without_newline_counts(pinned: PinnedRepository) -> None:
    result = call(pinned, "read_repository_file", path="text/no_newline.txt").result
    assert (result["content"], result["total_lines"]) == ("1: first\n2: last", 2)


def test_read_non_bmp_unicode_round_trips(pinned: PinnedRepository) -> None:
    result = call(pinned, "read_repository_file", path="text/unicode.txt").result
    assert result["content"] == "1: ascii\n2: non-BMP 😀 𝄞 needle\n3: \u2028 sep"


def test_read_single_giant_line_is_cut_to_the_cap(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "read_repository_file", path="text/giant_line.txt")
    result = outcome.result
    assert (result["start_line"], result["end_line"], result["total_lines"]) == (1, 1, 1)
    assert result["truncated"] is True
    full = "1: needle" + "x" * (GIANT_LINE_CHARS - 6)
    assert full.startswith(result["content"])
    assert len(result["content"]) > 60_000  # the beginning is shown, not nothing
    assert size(outcome) <= MAX_TOOL_RESULT_BYTES


def test_read_escaping_heavy_content_stays_within_64_kib(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "read_repository_file", path="text/escaping.txt")
    result = outcome.result
    assert size(outcome) <= MAX_TOOL_RESULT_BYTES
    assert result["truncated"] is True
    lines = result["content"].split("\n")
    assert len(lines) == result["end_line"] < 400  # the byte cap, not the line cap, cut it
    line = '"\\\x01\x1f\u2028😀' * 40
    assert lines == [f"{n}: {line}{n - 1}" for n in range(1, result["end_line"] + 1)]


def test_read_escaping_heavy_content_from_a_later_start_stays_within_64_kib(
    pinned: PinnedRepository,
) -> None:
    outcome = call(pinned, "read_repository_file", path="text/escaping.txt", start_line=300)
    assert size(outcome) <= MAX_TOOL_RESULT_BYTES
    assert outcome.result["content"].startswith("300: ")


def test_read_shows_the_committed_head_never_the_working_tree(repo: GitRepo) -> None:
    base = repo.commit_files({"a.py": "committed = 1\n"})
    head = repo.commit_files({"b.py": "committed = 2\n"})
    repo.write({"a.py": "MODIFIED in worktree\n", "untracked.py": "new\n", "staged.py": "s\n"})
    git(repo.path, "add", "staged.py")
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert call(pinned, "read_repository_file", path="a.py").result["content"] == (
        "1: committed = 1"
    )
    for path in ("untracked.py", "staged.py"):
        assert error_code(call(pinned, "read_repository_file", path=path)) == "path_not_found"
    assert call(pinned, "list_repository_files").result["paths"] == ["a.py", "b.py"]
    assert call(pinned, "search_repository", query="MODIFIED").result["matches"] == []


def test_links_in_the_hostile_world_are_all_exercised() -> None:
    # A guard for this file: each planted link has a read expectation above.
    exercised = {
        "links/to_app",
        "links/chain",
        "links/padded_ok",
        "links/to_src",
        "links/to_passwd",
        "links/up_out",
        "links/into_git",
        "links/into_git_upper",
        "links/drive",
        "links/empty",
        "links/loop_a",
        "links/loop_b",
        "links/self",
        "links/huge",
        "links/padded_over",
        "links/dangling",
        "links/through_file",
        "links/backslash",
    }
    assert set(LINKS) == exercised
