"""Review coverage (specification §5): which changed files the model actually looked at.

The rules are tested with real tool results over real git repositories: each test runs the
tools as the loop does and hands their results to the tracker. The renderings use the shared
review document of tests/results.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.git.repository import PinnedRepository
from pr_review_api.github.layout import render_review_body
from pr_review_api.loop.coverage import CoverageTracker, diff_paths
from pr_review_api.loop.run import run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.model import Coverage, ReviewResult
from pr_review_api.output import formats
from pr_review_api.output.common import coverage_line
from pr_review_api.output.inert_markdown import escape_inline
from pr_review_api.output.markdown import render_markdown
from pr_review_api.output.sarif import sarif_document
from pr_review_api.output.text import render_text
from pr_review_api.publishing.placement import Placement
from pr_review_api.settings import MAX_DIFF_BYTES, MAX_NOT_INSPECTED, load_settings
from pr_review_api.tools import TOOLS_BY_NAME, execute_tool
from tests.builders import final_turn
from tests.conftest import PROVIDER_KEY, examples
from tests.fakes.provider_server import ScriptedProvider, tool_call_turn
from tests.gitrepo import GitRepo
from tests.results import review_result

FIVE = [f"f{n}.py" for n in range(1, 6)]


def lines(tag: str, count: int = 30) -> str:
    return "".join(f"{tag} line {n}\n" for n in range(1, count + 1))


def pinned(repo: GitRepo, base: str, head: str) -> tuple[PinnedRepository, CoverageTracker]:
    repository = PinnedRepository.open(repo.git_dir, base, head)
    return repository, CoverageTracker(repository, repository.changed_files())


def call(
    repository: PinnedRepository, tracker: CoverageTracker, name: str, **arguments: Any
) -> dict[str, Any]:
    """Run one tool as the loop does and show its result to the tracker."""
    validated = TOOLS_BY_NAME[name].arguments.model_validate(arguments)
    outcome = execute_tool(repository, name, validated)
    tracker.saw_tool_result(name, json.loads(outcome.content))
    return outcome.result


def full_diff(repository: PinnedRepository) -> str:
    """The whole diff, as a result the model was never sent."""
    validated = TOOLS_BY_NAME["inspect_git_diff"].arguments.model_validate({})
    return str(execute_tool(repository, "inspect_git_diff", validated).result["diff"])


def inspected(tracker: CoverageTracker) -> set[str]:
    """The changed files the tracker counts as seen (for repositories of few files)."""
    coverage = tracker.coverage()
    assert coverage.changed_files <= MAX_NOT_INSPECTED
    return set(changed(tracker)) - set(coverage.not_inspected)


def changed(tracker: CoverageTracker) -> list[str]:
    return tracker.changed_paths


@pytest.fixture
def five(repo: GitRepo) -> tuple[PinnedRepository, CoverageTracker]:
    """Five changed files of thirty changed lines each, f1.py to f5.py."""
    base = repo.commit_files({path: lines("old") for path in FIVE})
    head = repo.commit_files({path: lines("new") for path in FIVE})
    return pinned(repo, base, head)


# --- diffs -------------------------------------------------------------------------------------


def test_a_diff_cut_in_the_middle_of_the_third_file_covers_files_one_to_three_only(
    five: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = five
    full = full_diff(repository)
    third = full.index("diff --git a/f3.py")
    cut = full.index("@@", third) + 200  # well inside f3.py's one hunk
    assert cut < full.index("diff --git a/f4.py")
    result = call(repository, tracker, "inspect_git_diff", max_bytes=cut)
    assert result["truncated"] is True
    assert inspected(tracker) == {"f1.py", "f2.py", "f3.py"}
    coverage = tracker.coverage()
    assert (coverage.changed_files, coverage.inspected_files) == (5, 3)
    assert coverage.not_inspected == ["f4.py", "f5.py"]


def test_a_diff_cut_inside_a_files_header_lines_does_not_cover_it(
    five: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = five
    full = full_diff(repository)
    cut = full.index("+++ b/f3.py") + 3  # f3.py's header is there, none of its change
    call(repository, tracker, "inspect_git_diff", max_bytes=cut)
    assert inspected(tracker) == {"f1.py", "f2.py"}


def test_a_diff_cut_inside_the_third_files_header_line_covers_files_one_and_two(
    five: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = five
    full = full_diff(repository)
    call(repository, tracker, "inspect_git_diff", max_bytes=full.index("diff --git a/f3.py") + 15)
    assert inspected(tracker) == {"f1.py", "f2.py"}


def test_a_whole_diff_covers_every_changed_file(
    five: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = five
    assert (
        call(repository, tracker, "inspect_git_diff", max_bytes=MAX_DIFF_BYTES)["truncated"]
        is False
    )
    assert tracker.coverage() == Coverage(changed_files=5, inspected_files=5, not_inspected=[])


def test_a_diff_narrowed_to_paths_covers_only_those_files(
    five: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = five
    call(repository, tracker, "inspect_git_diff", paths=["f2.py", "f5.py"])
    assert inspected(tracker) == {"f2.py", "f5.py"}


def test_a_header_inside_a_files_changed_lines_is_not_a_section(repo: GitRepo) -> None:
    base = repo.commit_files({"a.py": "a\n", "b.py": "b\n"})
    head = repo.commit_files({"a.py": "diff --git a/b.py b/b.py\n", "b.py": "B\n"})
    repository, tracker = pinned(repo, base, head)
    result = call(repository, tracker, "inspect_git_diff", paths=["a.py"])
    assert "\n+diff --git a/b.py b/b.py\n" in result["diff"]
    assert inspected(tracker) == {"a.py"}


def test_unusual_path_names_in_diff_headers_are_unquoted(repo: GitRepo) -> None:
    names = ["sp ace.py", 'quo"te.py', "tab\there.py", "back\\slash.py", "ünï.py", "x b/x.py"]
    base = repo.commit_files({"keep.py": "k\n"})
    head = repo.commit_files({name: f"{name!r}\n" for name in names})
    repository, tracker = pinned(repo, base, head)
    assert sorted(changed(tracker)) == sorted(names)
    call(repository, tracker, "inspect_git_diff")
    assert inspected(tracker) == set(names)


DIFF_TOKENS = [
    "diff --git ",
    "a/",
    " b/",
    "x",
    '"',
    "\\",
    "\\t",
    "\\07",
    "\n",
    "@@ ",
    "rename from ",
]


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.sampled_from(DIFF_TOKENS) | st.text(max_size=3)).map("".join), st.booleans())
def test_any_diff_text_parses_without_error(text: str, truncated: bool) -> None:
    paths = diff_paths(text, truncated=truncated)
    assert all(isinstance(path, str) and path for path in paths)
    # Inside a hunk every line starts with a prefix: none of them can open a section.
    prefixed = "\n".join("+" + line for line in text.split("\n"))
    assert diff_paths(prefixed, truncated=truncated) == set()


# --- reads, listings, searches -----------------------------------------------------------------


def test_a_read_of_one_line_covers_that_file(
    five: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = five
    result = call(repository, tracker, "read_repository_file", path="f4.py", end_line=1)
    assert (result["start_line"], result["end_line"], result["truncated"]) == (1, 1, True)
    assert inspected(tracker) == {"f4.py"}


def test_a_failed_read_covers_nothing(five: tuple[PinnedRepository, CoverageTracker]) -> None:
    repository, tracker = five
    result = call(repository, tracker, "read_repository_file", path="f4.py", start_line=99)
    assert result["ok"] is False
    assert inspected(tracker) == set()


def test_a_file_only_listed_is_not_inspected(
    five: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = five
    listed = call(repository, tracker, "list_repository_files")
    assert listed["paths"] == FIVE
    assert tracker.coverage().inspected_files == 0


def test_a_search_match_is_not_inspected(five: tuple[PinnedRepository, CoverageTracker]) -> None:
    repository, tracker = five
    found = call(repository, tracker, "search_repository", query="new line 7")
    assert {match["path"] for match in found["matches"]} == set(FIVE)
    assert tracker.coverage().inspected_files == 0


def test_a_read_through_a_symlink_covers_the_file_itself(repo: GitRepo) -> None:
    repo.write({"real.py": "old\n"})
    repo.symlink("link.py", "real.py")
    base = repo.commit_files({})
    head = repo.commit_files({"real.py": "new\n"})
    repository, tracker = pinned(repo, base, head)
    assert changed(tracker) == ["real.py"]
    call(repository, tracker, "read_repository_file", path="link.py")
    assert inspected(tracker) == {"real.py"}


def test_a_changed_link_is_covered_by_a_diff_not_by_a_read_through_it(repo: GitRepo) -> None:
    base = repo.commit_files({"real.py": "text\n"})
    repo.symlink("link.py", "real.py")
    head = repo.commit_files({})
    repository, tracker = pinned(repo, base, head)
    assert changed(tracker) == ["link.py"]
    assert call(repository, tracker, "read_repository_file", path="link.py")["ok"] is True
    assert inspected(tracker) == set()  # the read showed real.py's text, not where link.py points
    call(repository, tracker, "inspect_git_diff")
    assert inspected(tracker) == {"link.py"}


def test_a_read_of_a_spelling_of_a_path_covers_the_file(
    five: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = five
    call(repository, tracker, "read_repository_file", path="./f2.py")
    assert inspected(tracker) == {"f2.py"}


# --- renames and deletions ---------------------------------------------------------------------


@pytest.fixture
def moved(repo: GitRepo) -> tuple[PinnedRepository, CoverageTracker]:
    """old.py renamed to new.py (one line added), gone.py deleted, other.py edited."""
    base = repo.commit_files({"old.py": lines("x"), "gone.py": "gone\n", "other.py": "a\n"})
    repo.write({"new.py": lines("x") + "added\n", "other.py": "b\n"})
    head = repo.commit_files({}, delete=("old.py", "gone.py"))
    return pinned(repo, base, head)


def test_renames_and_deletions_are_changed_files_by_their_paths(
    moved: tuple[PinnedRepository, CoverageTracker],
) -> None:
    _, tracker = moved
    assert sorted(changed(tracker)) == ["gone.py", "new.py", "old.py", "other.py"]
    assert tracker.coverage().not_inspected == ["gone.py", "new.py", "old.py", "other.py"]


def test_a_renamed_file_read_at_the_head_counts_by_its_head_path(
    moved: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = moved
    assert call(repository, tracker, "read_repository_file", path="old.py")["ok"] is False
    call(repository, tracker, "read_repository_file", path="new.py")
    assert inspected(tracker) == {"new.py"}  # the old path's removal was never shown


def test_a_renamed_files_diff_section_covers_both_its_paths(
    moved: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = moved
    result = call(repository, tracker, "inspect_git_diff")
    assert "rename from old.py\nrename to new.py\n" in result["diff"]
    assert inspected(tracker) == {"gone.py", "new.py", "old.py", "other.py"}


def test_a_deleted_file_counts_when_its_removal_was_in_a_diff_seen(
    moved: tuple[PinnedRepository, CoverageTracker],
) -> None:
    repository, tracker = moved
    call(repository, tracker, "read_repository_file", path="gone.py")  # path_not_found
    call(repository, tracker, "inspect_git_diff", paths=["other.py"])
    assert "gone.py" not in inspected(tracker)
    removal = call(repository, tracker, "inspect_git_diff", paths=["gone.py"])
    assert "deleted file mode" in removal["diff"]
    assert inspected(tracker) == {"gone.py", "other.py"}


def test_a_pure_rename_cut_before_its_end_is_not_covered() -> None:
    text = "diff --git a/old.py b/new.py\nsimilarity index 100%\nrename from old.py\n"
    assert diff_paths(text, truncated=True) == set()
    assert diff_paths(text + "rename to new.py\n", truncated=False) == {"old.py", "new.py"}


# --- the inline diff, the cap, no changes ------------------------------------------------------


def test_the_inline_diff_counts(five: tuple[PinnedRepository, CoverageTracker]) -> None:
    repository, tracker = five
    full = full_diff(repository)
    limit = full.index("@@", full.index("diff --git a/f2.py")) + 100  # inside f2.py's hunk
    raw, more = repository.diff([], limit)  # what REVIEW_INLINE_DIFF_BYTES=limit inlines
    assert more is True
    tracker.saw_diff(raw.decode("utf-8", "replace"), truncated=more)
    assert inspected(tracker) == {"f1.py", "f2.py"}


def test_not_inspected_is_sorted_and_capped_at_100(repo: GitRepo) -> None:
    names = [f"pkg/m{n:03}.py" for n in range(150)]
    base = repo.commit_files({"keep.py": "k\n"})
    head = repo.commit_files({name: "x\n" for name in reversed(names)})
    repository, tracker = pinned(repo, base, head)
    call(repository, tracker, "read_repository_file", path="pkg/m000.py")
    coverage = tracker.coverage()
    assert (coverage.changed_files, coverage.inspected_files) == (150, 1)
    assert coverage.not_inspected == names[1 : 1 + MAX_NOT_INSPECTED]
    with pytest.raises(ValueError, match="at most 100 items"):
        Coverage(changed_files=150, inspected_files=0, not_inspected=names)


def test_a_review_without_changes_has_zero_coverage() -> None:
    assert Coverage() == Coverage(changed_files=0, inspected_files=0, not_inspected=[])
    assert review_result(coverage=Coverage()).model_dump(mode="json")["coverage"] == {
        "changed_files": 0,
        "inspected_files": 0,
        "not_inspected": [],
    }


# --- end to end --------------------------------------------------------------------------------


def review_of(
    repo: GitRepo, base: str, head: str, provider: ScriptedProvider, **overrides: Any
) -> ReviewResult:
    settings = load_settings(
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=provider.base_url,
        review_timeout_seconds=30,
        **overrides,
    )
    result = asyncio.run(run_review(LocalTarget(repo.path, base, head), settings))
    provider.assert_complete()
    return result


def test_the_review_document_carries_the_coverage_of_the_tool_results_sent(
    repo: GitRepo, scripted_provider: ScriptedProvider
) -> None:
    base = repo.commit_files({"src/a.py": "a\n", "src/b.py": "b\n", "src/c.py": "c\n"})
    head = repo.commit_files({"src/a.py": "A\n", "src/b.py": "B\n", "src/c.py": "C\n"})
    scripted_provider.script(
        tool_call_turn(
            [
                ("call_read", "read_repository_file", {"path": "src/a.py"}),
                ("call_list", "list_repository_files", {"path": "src"}),
                ("call_diff", "inspect_git_diff", {"paths": ["src/b.py"]}),
            ]
        ),
        final_turn(summary="Fine."),
    )
    result = review_of(repo, base, head, scripted_provider)
    assert result.model_dump(mode="json")["coverage"] == {
        "changed_files": 3,
        "inspected_files": 2,
        "not_inspected": ["src/c.py"],
    }


def test_the_inline_diff_counts_in_a_review(
    repo: GitRepo, scripted_provider: ScriptedProvider
) -> None:
    base = repo.commit_files({path: lines("old") for path in FIVE})
    head = repo.commit_files({path: lines("new") for path in FIVE})
    full = full_diff(PinnedRepository.open(repo.git_dir, base, head))
    limit = full.index("@@", full.index("diff --git a/f2.py")) + 100  # inside f2.py's hunk
    scripted_provider.script(final_turn(summary="Fine."))
    result = review_of(repo, base, head, scripted_provider, review_inline_diff_bytes=limit)
    assert result.coverage == Coverage(
        changed_files=5, inspected_files=2, not_inspected=["f3.py", "f4.py", "f5.py"]
    )


def test_a_review_without_changes_has_zero_coverage_in_its_document(
    repo: GitRepo, scripted_provider: ScriptedProvider
) -> None:
    base = repo.commit_files({"a.py": "a\n"})
    head = repo.commit_files({}, message="empty")
    result = review_of(repo, base, head, scripted_provider)
    assert result.termination_reason == "no_changes"
    assert result.model_dump(mode="json")["coverage"] == {
        "changed_files": 0,
        "inspected_files": 0,
        "not_inspected": [],
    }


# --- renderings --------------------------------------------------------------------------------


def partial() -> ReviewResult:
    return review_result(
        coverage=Coverage(
            changed_files=15, inspected_files=12, not_inspected=["a.py", "b.py", "c.py"]
        )
    )


def test_coverage_line_names_the_counts_and_a_bounded_list() -> None:
    assert coverage_line(partial().coverage) == (
        "Inspected 12 of 15 changed files; not inspected: a.py, b.py, c.py."
    )
    many = Coverage(
        changed_files=300, inspected_files=0, not_inspected=[f"m{n:03}.py" for n in range(100)]
    )
    line = coverage_line(many)
    assert line.startswith("Inspected 0 of 300 changed files; not inspected: m000.py, m001.py,")
    assert line.endswith("m009.py and 290 more.")
    assert coverage_line(Coverage(changed_files=1, inspected_files=1)) == (
        "Inspected 1 of 1 changed file."
    )
    assert coverage_line(Coverage()) == "No changed files to inspect."


def test_text_report_has_the_coverage_line() -> None:
    text = render_text(partial())
    assert "\nInspected 12 of 15 changed files; not inspected: a.py, b.py, c.py.\n" in text


def test_text_coverage_line_strips_controls_from_path_names() -> None:
    hostile = Coverage(changed_files=2, inspected_files=1, not_inspected=["a\x1b[31m.py"])
    text = render_text(review_result(coverage=hostile))
    assert "not inspected: a[31m.py." in text
    assert "\x1b" not in text


def test_a_path_with_a_line_break_cannot_forge_a_report_line() -> None:
    forged = Coverage(changed_files=2, inspected_files=1, not_inspected=["a.py\nFindings: none"])
    text = render_text(review_result(coverage=forged))
    assert "\nFindings: none" not in text
    assert "not inspected: a.py\\nFindings: none.\n" in text
    markdown = render_markdown(review_result(coverage=forged))
    assert "\nFindings: none" not in markdown


def test_markdown_has_the_coverage_line() -> None:
    markdown = render_markdown(partial())
    assert "Inspected 12 of 15 changed files; not inspected: `a.py`, `b.py`, `c.py`." in markdown
    hostile = Coverage(changed_files=2, inspected_files=1, not_inspected=["<b>x</b>|@a.py"])
    rendered = render_markdown(review_result(coverage=hostile))
    assert "<b>" not in rendered
    assert "@a" not in rendered


def test_sarif_has_coverage_as_a_run_property() -> None:
    document = sarif_document(partial())
    assert document["runs"][0]["properties"]["coverage"] == {
        "changed_files": 15,
        "inspected_files": 12,
        "not_inspected": ["a.py", "b.py", "c.py"],
    }


def test_json_document_has_coverage() -> None:
    document = json.loads(formats.render(partial(), "json"))
    assert document["coverage"]["inspected_files"] == 12
    assert list(document).index("coverage") == list(document).index("tool_calls") + 1


def test_the_published_review_body_has_the_coverage_line() -> None:
    hostile = Coverage(changed_files=4, inspected_files=2, not_inspected=["@octocat.py", "b.py"])
    body, _ = render_review_body(review_result(coverage=hostile), Placement())
    line = "Inspected 2 of 4 changed files; not inspected: "
    assert f"\n{line}{escape_inline('@octocat.py')}, b{escape_inline('.')}py.\n" in body
    assert "@octocat" not in body  # a path in the body can mention no one
