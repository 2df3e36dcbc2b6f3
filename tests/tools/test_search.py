"""search_repository, rule by rule (seed/tool-calling.md, specification §7)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pr_review_api.git.repository import PinnedRepository
from pr_review_api.settings import MAX_TOOL_RESULT_BYTES
from pr_review_api.tools import (
    ToolOutcome,
)
from tests.gitrepo import GitRepo
from tests.hostile.world import (
    LOOKALIKE_MARKER,
    QUOTE_FILES,
    HostileWorld,
)
from tests.tools.support import (
    call,
    error_code,
    size,
)

# --- search_repository ----------------------------------------------------------------------


def matches(outcome: ToolOutcome) -> list[tuple[str, int]]:
    assert outcome.ok, outcome.content
    return [(m["path"], m["line"]) for m in outcome.result["matches"]]


def test_search_result_has_the_contract_shape(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "search_repository", query="validate_name", path="src")
    assert outcome.result == {
        "ok": True,
        "query": "validate_name",
        "path": "src",
        "matches": [
            {
                "path": "src/app.py",
                "line": 3,
                "excerpt": "def validate_name(name: str) -> None:",
            },
            {"path": "src/app.py", "line": 8, "excerpt": "    validate_name(widget.name)"},
        ],
        "truncated": False,
    }
    assert outcome.content == json.dumps(outcome.result, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize("query", [".*[", "match .*[", "[", "*"])
def test_search_regex_metacharacters_are_literal(pinned: PinnedRepository, query: str) -> None:
    found = matches(call(pinned, "search_repository", query=query, path="text"))
    assert found == [("text/metachar.txt", 1)]


def test_search_never_matches_as_a_regular_expression(pinned: PinnedRepository) -> None:
    # As a regex, "a.*b" and "ax+b" would match "axxb" on line 2.
    for query in ("a.*b", "ax+b", "^axxb$", "a[x]xb"):
        assert matches(call(pinned, "search_repository", query=query, path="text")) == []


@pytest.mark.parametrize("query", ["--output=x", "-O", "--open-files-in-pager=touch x", "-e"])
def test_search_option_like_queries_are_literal_and_create_no_file(
    world: HostileWorld, pinned: PinnedRepository, tmp_path: Path, query: str
) -> None:
    before = sorted(world.repo.git_dir.iterdir())
    outcome = call(pinned, "search_repository", query=query, path="text")
    assert outcome.ok
    if query == "--output=x":
        assert matches(outcome) == [("text/metachar.txt", 3)]
    assert sorted(world.repo.git_dir.iterdir()) == before
    assert not (world.repo.path / "x").exists()
    assert not (tmp_path / "x").exists()


def test_search_is_case_sensitive(pinned: PinnedRepository) -> None:
    assert matches(call(pinned, "search_repository", query="Needle", path="text")) == [
        ("text/metachar.txt", 4)
    ]
    assert matches(call(pinned, "search_repository", query="NEEDLE", path="text")) == []


def test_search_is_scoped_to_a_directory(pinned: PinnedRepository) -> None:
    found = matches(call(pinned, "search_repository", query="needle", path="src"))
    assert found == [("src/lib/util.py", 2), ("src/run.sh", 2)]


def test_search_is_scoped_to_a_file(pinned: PinnedRepository) -> None:
    found = matches(call(pinned, "search_repository", query="needle", path="src/lib/util.py"))
    assert found == [("src/lib/util.py", 2)]


def test_search_through_a_symlink_to_a_file_inside(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "search_repository", query="validate_name", path="links/to_app")
    assert outcome.result["path"] == "links/to_app"
    assert matches(outcome) == [("src/app.py", 3), ("src/app.py", 8)]


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("big/over.txt", "file_too_large"),
        ("vendor/lib", "not_a_file"),
        ("links/to_passwd", "outside_repository"),
        ("links/to_outside", "outside_repository"),
        ("links/into_git", "outside_repository"),
        ("../", "outside_repository"),
        (".git", "invalid_path"),
        ("nope", "path_not_found"),
    ],
)
def test_search_reuses_the_path_rules(pinned: PinnedRepository, path: str, code: str) -> None:
    assert error_code(call(pinned, "search_repository", query="needle", path=path)) == code


def test_search_skips_binary_files_and_non_utf8_lines(pinned: PinnedRepository) -> None:
    found = matches(call(pinned, "search_repository", query="needle", path="bin"))
    assert found == [("bin/mixed.txt", 1)]


def test_search_skips_a_file_whose_nul_lies_past_gits_binary_sniff(repo: GitRepo) -> None:
    # git grep -I looks at the first 8000 bytes only; read calls the whole file binary.
    base = repo.commit_files({"a.txt": "alpha\n"})
    late = b"needle one\n" + b"x" * 9000 + b"\nneedle\x00two\n"
    head = repo.commit_files({"late_nul.txt": late, "ok.txt": "needle ok\n"})
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert error_code(call(pinned, "read_repository_file", path="late_nul.txt")) == "binary_file"
    assert matches(call(pinned, "search_repository", query="needle")) == [("ok.txt", 1)]


def test_search_skips_binary_files_whatever_the_repository_attributes_say(
    repo: GitRepo,
) -> None:
    base = repo.commit_files({"a.txt": "alpha\n"})
    head = repo.commit_files({"data.bin": b"needle\x00\n", "ok.txt": "needle ok\n"})
    (repo.git_dir / "info").mkdir(exist_ok=True)
    (repo.git_dir / "info" / "attributes").write_text("* text diff -binary\n")
    repo.write({".gitattributes": "* text diff -binary\n"})
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert matches(call(pinned, "search_repository", query="needle")) == [("ok.txt", 1)]


def test_search_skips_files_over_1_mib(pinned: PinnedRepository) -> None:
    found = matches(call(pinned, "search_repository", query="needle", path="big"))
    assert found == [("big/exact.txt", 1)]


def test_search_skips_symlinks_gitlinks_lookalikes_and_unspellable_names(
    pinned: PinnedRepository,
) -> None:
    found = matches(call(pinned, "search_repository", query="needle", limit=100, path="links"))
    assert found == []
    for query in ("etc/passwd", "outside/secret", "loop_b", ".git/config", "unspellable"):
        assert matches(call(pinned, "search_repository", query=query)) == []
    assert matches(call(pinned, "search_repository", query=LOOKALIKE_MARKER[:9])) == []


def test_search_lines_are_one_based(pinned: PinnedRepository) -> None:
    found = matches(call(pinned, "search_repository", query="from __future__", path="src"))
    assert found == [("src/app.py", 1)]


def test_search_crlf_excerpt_has_no_carriage_return(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "search_repository", query="two", path="text/crlf.txt")
    assert outcome.result["matches"] == [
        {"path": "text/crlf.txt", "line": 2, "excerpt": "two needle"}
    ]


def test_search_excerpt_is_bounded_around_the_match(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "search_repository", query="needle-middle", path="text")
    [match] = outcome.result["matches"]
    excerpt = match["excerpt"]
    assert len(excerpt) <= 240
    assert "needle-middle" in excerpt
    assert excerpt.startswith("…")
    assert excerpt.endswith("…")


def test_search_excerpt_of_a_giant_line_starts_at_an_early_match(
    pinned: PinnedRepository,
) -> None:
    outcome = call(pinned, "search_repository", query="needle", path="text/giant_line.txt")
    [match] = outcome.result["matches"]
    assert len(match["excerpt"]) <= 240
    assert match["excerpt"].startswith("needlexxx")
    assert match["excerpt"].endswith("…")


def test_search_limit_truncates(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "search_repository", query="needle", path="many", limit=10)
    assert matches(outcome) == [(f"many/f{i:03d}.txt", 1) for i in range(10)]
    assert outcome.result["truncated"] is True


def test_search_default_limit_is_50(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "search_repository", query="needle", path="many")
    assert len(matches(outcome)) == 50
    assert outcome.result["truncated"] is True


def test_search_stops_at_100_matches(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "search_repository", query="needle", limit=100)
    assert len(matches(outcome)) == 100
    assert outcome.result["truncated"] is True


def test_search_exactly_limit_matches_is_not_truncated(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "search_repository", query="validate_name", path="src", limit=2)
    assert len(matches(outcome)) == 2
    assert outcome.result["truncated"] is False


def test_search_serialized_result_stays_within_64_kib(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "search_repository", query="needle", path="quotes", limit=100)
    assert size(outcome) <= MAX_TOOL_RESULT_BYTES
    assert outcome.result["truncated"] is True
    assert 0 < len(outcome.result["matches"]) < QUOTE_FILES


@pytest.mark.parametrize("query", ["needle\n", "two\nthree", "\n", "needle\x00", "\r\n"])
def test_search_query_spanning_lines_has_no_matches(pinned: PinnedRepository, query: str) -> None:
    outcome = call(pinned, "search_repository", query=query)
    assert outcome.result["matches"] == []
    assert outcome.result["truncated"] is False
