"""The one git error edge: a git failure while a review reads its pinned repository.

A `GitError`, an `OSError` or a timeout raised while a tool runs, or while the final review's
paths and lines are checked, becomes a contract error (`tools.map_git_errors`):
`invalid_repository` for a local `--repo` review, `github_unavailable` (502) for a pull request.
Never an exception outside the contract, never a 500, never a path. A real corrupt loose object
(its zlib checksum broken after committing, so git still reads the header and the size but not
the content) proves the same for the real readers.
"""

from __future__ import annotations

import errno
import json
import subprocess
from typing import Any

import pytest

from pr_review_api import errors
from pr_review_api.errors import GitHubUnavailable, InvalidRepository, ReviewError
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.git_runner import GIT_FAILURES, GitError
from pr_review_api.loop import repo_config
from pr_review_api.loop.final_review import parse_final_review
from pr_review_api.tools import (
    ToolOutcome,
    map_git_errors,
)
from tests.gitrepo import GitRepo, git
from tests.tools.git_failures import (
    BIG,
    FAILURES,
    NEEDLE,
    REVIEW_WITH_A_LINE,
    SECRET_PATH,
    TOOL_CALLS,
    assert_contract_error,
    blob_id,
    call,
    corrupt_loose_object,
    failing,
)


@pytest.fixture
def pinned(widget: tuple[GitRepo, str, str]) -> PinnedRepository:
    repo, base, head = widget
    return PinnedRepository.open(repo.git_dir, base, head)


# --- the mapping --------------------------------------------------------------------------


def test_the_git_failures_mapped_are_git_errors_os_errors_and_timeouts() -> None:
    assert set(GIT_FAILURES) == {GitError, OSError, subprocess.TimeoutExpired}
    for make in FAILURES.values():
        assert isinstance(make(), GIT_FAILURES)


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("expected", [InvalidRepository, GitHubUnavailable])
def test_map_git_errors_turns_each_failure_into_the_given_contract_error(
    failure: str, expected: type[ReviewError]
) -> None:
    with pytest.raises(ReviewError) as raised, map_git_errors(expected):
        raise FAILURES[failure]()
    assert_contract_error(raised, expected)


def test_map_git_errors_passes_tool_and_review_errors_through_unchanged() -> None:
    tool_error = errors.ToolError("path_not_found", "The requested path does not exist.")
    with pytest.raises(errors.ToolError) as raised_tool, map_git_errors():
        raise tool_error
    assert raised_tool.value is tool_error
    timeout_error = errors.ReviewTimeout()
    with pytest.raises(errors.ReviewTimeout) as raised_review, map_git_errors():
        raise timeout_error
    assert raised_review.value is timeout_error


def test_map_git_errors_logs_the_kind_of_failure_never_a_path(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for make in FAILURES.values():
        with pytest.raises(InvalidRepository), map_git_errors():
            raise make()
    text = caplog.text
    assert "git cat-file exited with status 128" in text
    assert f"errno {errno.EMFILE}" in text
    assert "TimeoutExpired" in text
    assert SECRET_PATH not in text
    assert "secret" not in text


# --- each tool --------------------------------------------------------------------------------


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("tool", TOOL_CALLS)
def test_a_git_failure_in_each_tool_is_a_contract_error_not_an_exception(
    pinned: PinnedRepository, monkeypatch: pytest.MonkeyPatch, tool: str, failure: str
) -> None:
    method, arguments = TOOL_CALLS[tool]
    assert call(pinned, tool, arguments).ok  # the call works before git is broken
    monkeypatch.setattr(PinnedRepository, method, failing(method, FAILURES[failure]))
    with pytest.raises(ReviewError) as raised:
        call(pinned, tool, arguments)
    assert_contract_error(raised, InvalidRepository)


@pytest.mark.parametrize("failure", FAILURES)
def test_a_git_failure_in_a_tool_of_a_pull_request_review_is_github_unavailable(
    pinned: PinnedRepository, monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    monkeypatch.setattr(PinnedRepository, "read_source", failing("read_source", FAILURES[failure]))
    with pytest.raises(ReviewError) as raised:
        call(pinned, "read_repository_file", {"path": "src/app.py"}, unreadable=GitHubUnavailable)
    assert_contract_error(raised, GitHubUnavailable)


def test_a_tool_error_is_still_an_ok_false_result(pinned: PinnedRepository) -> None:
    outcome: ToolOutcome = call(pinned, "read_repository_file", {"path": "missing.py"})
    assert outcome.result == {
        "ok": False,
        "error": {"code": "path_not_found", "message": "The requested path does not exist."},
    }


# --- the final-review checks ----------------------------------------------------------------


@pytest.mark.parametrize("failure", FAILURES)
@pytest.mark.parametrize("method", ["resolve_file", "line_counts"])
@pytest.mark.parametrize("expected", [InvalidRepository, GitHubUnavailable])
def test_a_git_failure_in_the_final_review_checks_is_a_contract_error(
    *,
    pinned: PinnedRepository,
    monkeypatch: pytest.MonkeyPatch,
    method: str,
    failure: str,
    expected: type[ReviewError],
) -> None:
    content = json.dumps(REVIEW_WITH_A_LINE)
    assert parse_final_review(content, pinned).findings[0].line == 2  # valid before
    monkeypatch.setattr(PinnedRepository, method, failing(method, FAILURES[failure]))
    with pytest.raises(ReviewError) as raised:
        parse_final_review(content, pinned, unreadable=expected)
    assert_contract_error(raised, expected)


# --- a real corrupt loose object -------------------------------------------------------------


@pytest.fixture
def corrupt(widget: tuple[GitRepo, str, str]) -> PinnedRepository:
    """The widget with the head's src/app.py blob corrupted on disk, pinned afterwards."""
    repo, base, head = widget
    corrupt_loose_object(repo.git_dir, blob_id(BIG))
    return PinnedRepository.open(repo.git_dir, base, head)


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("read_repository_file", {"path": "src/app.py"}),
        ("search_repository", {"query": NEEDLE}),
        ("search_repository", {"query": NEEDLE, "path": "src/app.py"}),
        ("inspect_git_diff", {}),
        ("inspect_git_diff", {"paths": ["src/app.py"]}),
    ],
)
def test_a_corrupt_loose_object_read_by_a_tool_is_a_contract_error(
    corrupt: PinnedRepository, tool: str, arguments: dict[str, Any]
) -> None:
    with pytest.raises(ReviewError) as raised:
        call(corrupt, tool, arguments)
    assert_contract_error(raised, InvalidRepository)


def test_a_corrupt_loose_object_leaves_the_other_files_readable(corrupt: PinnedRepository) -> None:
    outcome = call(corrupt, "read_repository_file", {"path": "README.md"})
    assert outcome.ok
    assert outcome.result["content"] == "1: # widget"
    assert call(corrupt, "list_repository_files", {}).result["paths"] == ["README.md", "src/app.py"]


def test_a_corrupt_loose_object_named_by_a_finding_line_is_a_contract_error(
    corrupt: PinnedRepository,
) -> None:
    with pytest.raises(ReviewError) as raised:
        parse_final_review(json.dumps(REVIEW_WITH_A_LINE), corrupt)
    assert_contract_error(raised, InvalidRepository)


def test_a_diff_over_a_blob_missing_from_the_store_stays_an_ok_result(repo: GitRepo) -> None:
    # A missing blob is absent from the head's index (ls-tree says BAD), not corrupt: the
    # model cannot read it either, and the diff is what git could show (tests/hostile).
    base = repo.commit_files({"ok.txt": "fine\n"})
    ok = git(repo.path, "rev-parse", "HEAD:ok.txt")
    listing = f"100644 blob {ok}\tok.txt\n100644 blob {'1' * 40}\tgone.txt\n"
    tree = git(repo.path, "mktree", "--missing", input_bytes=listing.encode())
    head = git(repo.path, "commit-tree", tree, "-p", base, "-m", "a missing blob")
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    for arguments in ({}, {"paths": ["gone.txt"]}):
        assert call(pinned, "inspect_git_diff", arguments).ok


@pytest.mark.parametrize("failure", FAILURES)
def test_a_git_failure_reading_the_repository_config_ignores_the_file_with_its_note(
    widget: tuple[GitRepo, str, str], monkeypatch: pytest.MonkeyPatch, failure: str
) -> None:
    # A sibling: .pr-review.toml is read from the base with git before the loop; a failure
    # there (a timeout included) ignores the file with the fixed note, never a 500.
    repo, base, _ = widget
    monkeypatch.setattr(repo_config, "run_git", failing("run_git", FAILURES[failure]))
    loaded = repo_config.load_repo_config(repo.git_dir, base)
    assert loaded.config == repo_config.RepoConfig()
    assert loaded.note is not None
    assert repo_config.REASON_UNREADABLE in loaded.note
