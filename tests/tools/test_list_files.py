"""list_repository_files, rule by rule (seed/tool-calling.md, specification §7)."""

from __future__ import annotations

import json

import pytest

from pr_review_api.git.repository import PinnedRepository
from pr_review_api.settings import MAX_TOOL_RESULT_BYTES
from tests.hostile.world import (
    LOOKALIKES,
    MANY_FILES,
    QUOTE_FILES,
    UNSPELLABLE,
    HostileWorld,
    quote_path,
)
from tests.tools.support import (
    call,
    error_code,
    list_all,
)

# --- list_repository_files ------------------------------------------------------------------


def test_list_result_has_the_contract_shape(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "list_repository_files", path="src")
    assert list(outcome.result) == ["ok", "path", "paths", "truncated", "next_cursor"]
    assert outcome.content == json.dumps(outcome.result, separators=(",", ":"), ensure_ascii=False)


def test_list_is_in_lexical_order(pinned: PinnedRepository) -> None:
    paths = call(pinned, "list_repository_files", limit=200).result["paths"]
    assert len(paths) == 200
    assert paths == sorted(paths)


def test_list_is_scoped_to_the_directory(pinned: PinnedRepository) -> None:
    # src-extra/, src.txt and src0/ sort right beside src/ and must stay out.
    outcome = call(pinned, "list_repository_files", path="src")
    assert outcome.result["paths"] == ["src/app.py", "src/lib/util.py", "src/run.sh"]
    assert outcome.result["truncated"] is False
    assert outcome.result["next_cursor"] is None


@pytest.mark.parametrize("path", ["src/", "./src", "src//", "./src/."])
def test_list_directory_spellings_are_normalized(pinned: PinnedRepository, path: str) -> None:
    outcome = call(pinned, "list_repository_files", path=path)
    assert outcome.result["path"] == "src"
    assert outcome.result["paths"] == ["src/app.py", "src/lib/util.py", "src/run.sh"]


def test_list_pages_until_exhaustion_show_every_file_exactly_once(
    world: HostileWorld, pinned: PinnedRepository
) -> None:
    paths, _ = list_all(pinned, "", limit=7)
    assert paths == world.listable()
    assert len(paths) == len(set(paths))


def test_list_paging_at_max_limit_shows_every_file_exactly_once(
    world: HostileWorld, pinned: PinnedRepository
) -> None:
    paths, sizes = list_all(pinned, "", limit=200)
    assert paths == world.listable()
    assert max(sizes) <= MAX_TOOL_RESULT_BYTES


def test_list_pages_of_a_directory_stay_in_it(pinned: PinnedRepository) -> None:
    paths, _ = list_all(pinned, "many", limit=33)
    assert paths == [f"many/f{i:03d}.txt" for i in range(MANY_FILES)]


def test_list_truncated_page_returns_next_cursor(pinned: PinnedRepository) -> None:
    first = call(pinned, "list_repository_files", path="src", limit=2).result
    assert first["paths"] == ["src/app.py", "src/lib/util.py"]
    assert first["truncated"] is True
    assert first["next_cursor"] == "src/lib/util.py"
    second = call(
        pinned, "list_repository_files", path="src", limit=2, cursor=first["next_cursor"]
    ).result
    assert second["paths"] == ["src/run.sh"]
    assert second["truncated"] is False
    assert second["next_cursor"] is None


def test_list_page_exactly_filling_the_limit_is_not_truncated(pinned: PinnedRepository) -> None:
    result = call(pinned, "list_repository_files", path="src", limit=3).result
    assert len(result["paths"]) == 3
    assert result["truncated"] is False
    assert result["next_cursor"] is None


@pytest.mark.parametrize(
    "cursor",
    [
        "docs/guide.md",  # a real path outside the listed directory
        "src0/y.py",  # a prefix look-alike of the directory
        "..",
        "../etc/passwd",
        "src/../README.md",
        "/etc/passwd",
        "/src/app.py",
        "C:/src/app.py",
        "",
        ".git/config",
        "src\\app.py",
        "src/app.py\x00",
    ],
)
def test_list_rejects_a_cursor_that_is_not_a_path_of_the_directory(
    pinned: PinnedRepository, cursor: str
) -> None:
    outcome = call(pinned, "list_repository_files", path="src", cursor=cursor)
    assert error_code(outcome) == "invalid_cursor"


def test_list_cursor_past_the_end_returns_an_empty_final_page(pinned: PinnedRepository) -> None:
    result = call(pinned, "list_repository_files", path="src", cursor="src/zzz").result
    assert result["paths"] == []
    assert result["truncated"] is False


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("README.md", "not_a_directory"),
        ("links/to_app", "not_a_directory"),
        ("vendor/lib", "not_a_directory"),
        ("nope", "path_not_found"),
        ("src/nope", "path_not_found"),
        ("links/dangling", "path_not_found"),
        ("..", "outside_repository"),
        ("/etc", "outside_repository"),
        ("links/to_passwd", "outside_repository"),
        (".git", "invalid_path"),
        (".GIT", "invalid_path"),
        ("src\\lib", "invalid_path"),
        ("links/loop_a", "invalid_path"),
    ],
)
def test_list_path_errors(pinned: PinnedRepository, path: str, code: str) -> None:
    assert error_code(call(pinned, "list_repository_files", path=path)) == code


def test_list_skips_git_lookalikes(pinned: PinnedRepository) -> None:
    paths, _ = list_all(pinned, "", limit=200)
    assert not set(LOOKALIKES) & set(paths)
    assert not [p for p in paths if ".git" in p.casefold() or "\u200c" in p or "\ufeff" in p]


def test_list_skips_names_no_request_can_spell(pinned: PinnedRepository) -> None:
    paths, _ = list_all(pinned, "", limit=200)
    assert not [p for p in paths if p.startswith("weird/")]
    assert call(pinned, "list_repository_files", path="weird").result["paths"] == []
    assert set(UNSPELLABLE).isdisjoint(paths)


def test_list_skips_symlinks_resolving_outside_into_git_dangling_or_looping(
    pinned: PinnedRepository,
) -> None:
    result = call(pinned, "list_repository_files", path="links").result
    assert result["paths"] == ["links/chain", "links/padded_ok", "links/to_app"]
    root, _ = list_all(pinned, "", limit=200)
    assert "escape_rel" not in root
    assert "deep/escape" not in root


def test_list_lists_a_symlink_to_a_file_inside(pinned: PinnedRepository) -> None:
    assert "links/to_app" in call(pinned, "list_repository_files", path="links").result["paths"]


def test_list_does_not_descend_directory_symlinks(pinned: PinnedRepository) -> None:
    root, _ = list_all(pinned, "", limit=200)
    assert "links/to_src" not in root
    assert not [p for p in root if p.startswith("links/to_src/")]


def test_list_through_a_directory_symlink_names_the_real_files(pinned: PinnedRepository) -> None:
    outcome = call(pinned, "list_repository_files", path="links/to_src")
    assert outcome.result["path"] == "links/to_src"
    assert outcome.result["paths"] == ["src/app.py", "src/lib/util.py", "src/run.sh"]


def test_list_skips_gitlinks(pinned: PinnedRepository) -> None:
    root, _ = list_all(pinned, "", limit=200)
    assert "vendor/lib" not in root
    assert call(pinned, "list_repository_files", path="vendor").result["paths"] == []


def test_list_page_of_long_quote_heavy_paths_stays_within_64_kib(
    pinned: PinnedRepository,
) -> None:
    paths, sizes = list_all(pinned, "quotes", limit=200)
    assert paths == [quote_path(i) for i in range(QUOTE_FILES)]
    assert len(sizes) > 1  # the cap, not the limit, cut the pages
    assert max(sizes) <= MAX_TOOL_RESULT_BYTES
