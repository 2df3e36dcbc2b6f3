"""The four repository tools, rule by rule, as seed/tool-calling.md and CONTRACT 6-7 state them.

Every test runs a real git repository built in a temporary folder; nothing of git is mocked.
Calls go through the strict argument models exactly as the protocol layer validates them.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import ValidationError

from pr_review_api.errors import ToolErrorCode
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.settings import MAX_TOOL_RESULT_BYTES
from pr_review_api.tools import (
    TOOLS,
    TOOLS_BY_NAME,
    DiffArguments,
    ListFilesArguments,
    ReadFileArguments,
    SearchArguments,
    ToolArguments,
    ToolOutcome,
    execute_tool,
)
from tests.gitrepo import GitRepo, git
from tests.hostile_repos import (
    APP_PY,
    GIANT_LINE_CHARS,
    GIT_DIR_SENTINEL,
    LINKS,
    LOOKALIKE_MARKER,
    LOOKALIKES,
    MANY_FILES,
    OUTSIDE_SENTINEL,
    QUOTE_FILES,
    UNSPELLABLE,
    HostileWorld,
    build_hostile_world,
    quote_path,
)

# The seed's "The four schemas sent to the model", pasted verbatim: it is the specification.
SEED_TOOLS_JSON = """
[
  {
    "type": "function",
    "function": {
      "name": "list_repository_files",
      "description": "List repository-relative files in deterministic lexical order.",
      "parameters": {
        "type": "object",
        "properties": {
          "path": {
            "type": "string",
            "description": "Repository-relative directory; empty means root.",
            "default": ""
          },
          "limit": {
            "type": "integer",
            "minimum": 1,
            "maximum": 200,
            "default": 100
          },
          "cursor": {
            "type": ["string", "null"],
            "description": "Last path returned by the preceding page.",
            "default": null
          }
        },
        "required": [],
        "additionalProperties": false
      }
    }
  },
  {
    "type": "function",
    "function": {
      "name": "read_repository_file",
      "description": "Read at most 400 numbered lines from a repository-relative text file.",
      "parameters": {
        "type": "object",
        "properties": {
          "path": {"type": "string"},
          "start_line": {"type": "integer", "minimum": 1, "default": 1},
          "end_line": {"type": ["integer", "null"], "minimum": 1}
        },
        "required": ["path"],
        "additionalProperties": false
      }
    }
  },
  {
    "type": "function",
    "function": {
      "name": "search_repository",
      "description": "Find case-sensitive literal text in bounded repository source files.",
      "parameters": {
        "type": "object",
        "properties": {
          "query": {"type": "string", "minLength": 1, "maxLength": 512},
          "path": {"type": "string", "default": ""},
          "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 50}
        },
        "required": ["query"],
        "additionalProperties": false
      }
    }
  },
  {
    "type": "function",
    "function": {
      "name": "inspect_git_diff",
      "description": "Inspect the immutable base-to-head Git diff, optionally narrowed to paths.",
      "parameters": {
        "type": "object",
        "properties": {
          "paths": {
            "type": "array",
            "items": {"type": "string"},
            "maxItems": 50,
            "default": []
          },
          "max_bytes": {
            "type": "integer",
            "minimum": 1,
            "maximum": 131072,
            "default": 65536
          }
        },
        "required": [],
        "additionalProperties": false
      }
    }
  }
]
"""

TOOL_NAMES = [
    "list_repository_files",
    "read_repository_file",
    "search_repository",
    "inspect_git_diff",
]
ERROR_CODES: set[str] = set(get_args(ToolErrorCode))


# --- fixtures and helpers -----------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> HostileWorld:
    return build_hostile_world(tmp_path_factory.mktemp("hostile"))


@pytest.fixture(scope="module")
def pinned(world: HostileWorld) -> PinnedRepository:
    return world.pinned()


def call(repo: PinnedRepository, name: str, **arguments: Any) -> ToolOutcome:
    """Validate arguments as the protocol does (a parsed JSON object), then run the tool."""
    validated = TOOLS_BY_NAME[name].arguments.model_validate(arguments)
    outcome = execute_tool(repo, name, validated)
    assert json.loads(outcome.content) == outcome.result
    for sentinel in (OUTSIDE_SENTINEL, GIT_DIR_SENTINEL, LOOKALIKE_MARKER):
        assert sentinel not in outcome.content
    return outcome


def error_code(outcome: ToolOutcome) -> str:
    assert outcome.result["ok"] is False
    assert set(outcome.result) == {"ok", "error"}
    assert set(outcome.result["error"]) == {"code", "message"}
    return str(outcome.result["error"]["code"])


def size(outcome: ToolOutcome) -> int:
    return len(outcome.content.encode("utf-8"))


def escaped_size(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def numbered(text: str, start: int = 1) -> str:
    return "\n".join(f"{n}: {line}" for n, line in enumerate(text.splitlines(), start))


def list_all(repo: PinnedRepository, path: str, limit: int) -> tuple[list[str], list[int]]:
    """Page through a directory until exhaustion; every page's size."""
    paths: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    for _ in range(1000):
        outcome = call(repo, "list_repository_files", path=path, limit=limit, cursor=cursor)
        assert outcome.ok, outcome.content
        sizes.append(size(outcome))
        paths += outcome.result["paths"]
        if not outcome.result["truncated"]:
            assert outcome.result["next_cursor"] is None
            return paths, sizes
        cursor = outcome.result["next_cursor"]
        assert cursor == paths[-1]
    raise AssertionError("paging never ended")


# --- the four schemas -----------------------------------------------------------------------


def test_tools_serialize_exactly_as_the_seed_prints_them() -> None:
    seed = json.loads(SEED_TOOLS_JSON)
    assert seed == TOOLS
    assert json.dumps(TOOLS) == json.dumps(seed)  # key order included


def test_tools_are_offered_in_the_order_list_read_search_diff() -> None:
    assert [tool["function"]["name"] for tool in TOOLS] == TOOL_NAMES
    assert list(TOOLS_BY_NAME) == TOOL_NAMES


def test_tools_json_is_the_serialized_tools_value() -> None:
    # `pr-review schema tools` prints json.dumps(TOOLS, indent=2) (tests/test_cli.py).
    assert json.loads(json.dumps(TOOLS, indent=2)) == json.loads(SEED_TOOLS_JSON)


@pytest.mark.parametrize("index", range(4))
def test_each_argument_model_mirrors_its_schema(index: int) -> None:
    function = TOOLS[index]["function"]
    model = TOOLS_BY_NAME[function["name"]].arguments
    parameters = function["parameters"]
    assert set(model.model_fields) == set(parameters["properties"])
    required = {name for name, field in model.model_fields.items() if field.is_required()}
    assert required == set(parameters["required"])
    assert model.model_config.get("extra") == "forbid"


# --- argument models ------------------------------------------------------------------------

MODELS: dict[str, type[ToolArguments]] = {
    "list": ListFilesArguments,
    "read": ReadFileArguments,
    "search": SearchArguments,
    "diff": DiffArguments,
}
MINIMAL: dict[str, dict[str, Any]] = {
    "list": {},
    "read": {"path": "src/app.py"},
    "search": {"query": "needle"},
    "diff": {},
}


def test_seed_extra_property_example_is_rejected() -> None:
    with pytest.raises(ValidationError):
        ReadFileArguments.model_validate({"path": "src/app.py", "command": "pytest"})


@pytest.mark.parametrize("tool", list(MODELS))
def test_extra_properties_are_rejected_by_every_model(tool: str) -> None:
    with pytest.raises(ValidationError):
        MODELS[tool].model_validate({**MINIMAL[tool], "command": "pytest"})


WRONG_TYPES = [
    ("list", "limit", "5"),
    ("list", "limit", True),
    ("list", "limit", 5.0),
    ("list", "limit", None),
    ("list", "path", 5),
    ("list", "path", None),
    ("list", "path", True),
    ("list", "cursor", 5),
    ("list", "cursor", False),
    ("list", "cursor", ["a"]),
    ("read", "path", None),
    ("read", "path", 5),
    ("read", "path", ["src/app.py"]),
    ("read", "start_line", "5"),
    ("read", "start_line", True),
    ("read", "start_line", 5.0),
    ("read", "start_line", None),
    ("read", "end_line", "5"),
    ("read", "end_line", True),
    ("read", "end_line", 5.0),
    ("search", "query", None),
    ("search", "query", 5),
    ("search", "query", True),
    ("search", "path", None),
    ("search", "limit", "5"),
    ("search", "limit", True),
    ("search", "limit", 5.0),
    ("search", "limit", None),
    ("diff", "paths", "src/app.py"),
    ("diff", "paths", [5]),
    ("diff", "paths", [None]),
    ("diff", "paths", None),
    ("diff", "paths", {"a": "b"}),
    ("diff", "max_bytes", "5"),
    ("diff", "max_bytes", True),
    ("diff", "max_bytes", 5.0),
    ("diff", "max_bytes", None),
]


@pytest.mark.parametrize(("tool", "field", "value"), WRONG_TYPES)
def test_wrong_types_are_rejected_without_coercion(tool: str, field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        MODELS[tool].model_validate({**MINIMAL[tool], field: value})


OUT_OF_RANGE = [
    ("list", "limit", 0),
    ("list", "limit", 201),
    ("list", "limit", -1),
    ("read", "start_line", 0),
    ("read", "start_line", -3),
    ("read", "end_line", 0),
    ("search", "query", ""),
    ("search", "query", "q" * 513),
    ("search", "limit", 0),
    ("search", "limit", 101),
    ("diff", "max_bytes", 0),
    ("diff", "max_bytes", 131073),
    ("diff", "paths", ["a.txt"] * 51),
]


@pytest.mark.parametrize(("tool", "field", "value"), OUT_OF_RANGE)
def test_out_of_range_values_are_rejected(tool: str, field: str, value: object) -> None:
    with pytest.raises(ValidationError):
        MODELS[tool].model_validate({**MINIMAL[tool], field: value})


IN_RANGE_BOUNDARIES = [
    ("list", "limit", 1),
    ("list", "limit", 200),
    ("list", "cursor", None),
    ("read", "start_line", 1),
    ("read", "end_line", 1),
    ("read", "end_line", None),
    ("search", "query", "q"),
    ("search", "query", "q" * 512),
    ("search", "limit", 1),
    ("search", "limit", 100),
    ("diff", "max_bytes", 1),
    ("diff", "max_bytes", 131072),
    ("diff", "paths", ["a.txt"] * 50),
]


@pytest.mark.parametrize(("tool", "field", "value"), IN_RANGE_BOUNDARIES)
def test_boundary_values_are_accepted(tool: str, field: str, value: object) -> None:
    validated = MODELS[tool].model_validate({**MINIMAL[tool], field: value})
    assert getattr(validated, field) == value


@pytest.mark.parametrize("tool", ["read", "search"])
def test_required_arguments_are_required(tool: str) -> None:
    with pytest.raises(ValidationError):
        MODELS[tool].model_validate({})


def test_defaults_are_the_schema_defaults() -> None:
    assert ListFilesArguments.model_validate({}).model_dump() == {
        "path": "",
        "limit": 100,
        "cursor": None,
    }
    assert ReadFileArguments.model_validate({"path": "a"}).model_dump() == {
        "path": "a",
        "start_line": 1,
        "end_line": None,
    }
    assert SearchArguments.model_validate({"query": "q"}).model_dump() == {
        "query": "q",
        "path": "",
        "limit": 50,
    }
    assert DiffArguments.model_validate({}).model_dump() == {"paths": [], "max_bytes": 65536}


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


@pytest.mark.timeout(10)
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


# --- inspect_git_diff -----------------------------------------------------------------------

HEAVY_LINE = 'quotes " and \\ and \x01 controls\n'


@dataclass(frozen=True)
class DiffWorld:
    repo: GitRepo
    fork: str
    base: str
    head: str

    def pinned(self) -> PinnedRepository:
        return PinnedRepository.open(self.repo.git_dir, self.base, self.head)


@pytest.fixture(scope="module")
def diff_world(tmp_path_factory: pytest.TempPathFactory) -> DiffWorld:
    """A head branch that forked, and a base branch that advanced after the fork."""
    repo = GitRepo(tmp_path_factory.mktemp("diff") / "repo")
    fork = repo.commit_files(
        {"a.txt": "alpha\n", "b.txt": "bravo\n", "docs/c.md": "charlie\n"}, "fork point"
    )
    git(repo.path, "checkout", "-q", "-b", "feature")
    head = repo.commit_files(
        {"a.txt": "alpha\nhead change\n", "docs/c.md": "charlie\nhead docs\n"}, "head 1"
    )
    head = repo.commit_files({"heavy.txt": HEAVY_LINE * 8000}, "head 2")
    repo.checkout("main")
    base = repo.commit_files(
        {"b.txt": "bravo\nBASE ONLY change\n", "base_only.txt": "BASE ONLY file\n"}, "base"
    )
    return DiffWorld(repo, fork, base, head)


def test_diff_runs_from_the_merge_base_to_head(diff_world: DiffWorld) -> None:
    pinned = diff_world.pinned()
    assert pinned.revisions.merge_base_sha == diff_world.fork
    outcome = call(pinned, "inspect_git_diff", max_bytes=131072)
    diff = outcome.result["diff"]
    assert "+head change" in diff
    assert "+head docs" in diff
    assert "BASE ONLY" not in diff
    assert "base_only.txt" not in diff
    assert "b/b.txt" not in diff


def test_diff_result_has_the_contract_shape(diff_world: DiffWorld) -> None:
    outcome = call(diff_world.pinned(), "inspect_git_diff", paths=["a.txt"])
    assert outcome.result == {
        "ok": True,
        "paths": ["a.txt"],
        "diff": outcome.result["diff"],
        "bytes": len(outcome.result["diff"].encode()),
        "truncated": False,
    }
    assert outcome.result["diff"].startswith("diff --git a/a.txt b/a.txt\n")
    assert outcome.result["diff"].endswith(" alpha\n+head change\n")


def test_diff_is_narrowed_to_paths(diff_world: DiffWorld) -> None:
    diff = call(diff_world.pinned(), "inspect_git_diff", paths=["docs"]).result["diff"]
    assert "docs/c.md" in diff
    assert "a.txt" not in diff
    assert "heavy.txt" not in diff


def test_diff_paths_are_normalized_and_deduplicated(diff_world: DiffWorld) -> None:
    result = call(
        diff_world.pinned(), "inspect_git_diff", paths=["./a.txt", "a.txt", "docs/"]
    ).result
    assert result["paths"] == ["a.txt", "docs"]


def test_diff_paths_are_literal_not_globs(diff_world: DiffWorld) -> None:
    for path in ("*.txt", ":(glob)**", ":/a.txt"):
        assert call(diff_world.pinned(), "inspect_git_diff", paths=[path]).result["diff"] == ""


@pytest.mark.parametrize("max_bytes", [1, 10, 100, 4096])
def test_diff_is_capped_at_max_bytes(diff_world: DiffWorld, max_bytes: int) -> None:
    pinned = diff_world.pinned()
    full = call(pinned, "inspect_git_diff", max_bytes=131072).result["diff"]
    result = call(pinned, "inspect_git_diff", max_bytes=max_bytes).result
    assert result["truncated"] is True
    assert result["bytes"] == len(result["diff"].encode()) <= max_bytes
    assert full.startswith(result["diff"])


def test_diff_escaped_size_stays_within_max_bytes(diff_world: DiffWorld) -> None:
    result = call(diff_world.pinned(), "inspect_git_diff", paths=["heavy.txt"]).result
    assert result["truncated"] is True
    assert escaped_size(result["diff"]) <= 65536
    assert escaped_size(result["diff"]) > 60_000
    assert result["bytes"] < 65536  # escaping, not the raw bytes, bound the cut


def test_diff_whole_result_is_compact_json(diff_world: DiffWorld) -> None:
    outcome = call(diff_world.pinned(), "inspect_git_diff")
    assert outcome.content == json.dumps(outcome.result, separators=(",", ":"), ensure_ascii=False)
    assert size(outcome) <= 65536 + 200


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("..", "outside_repository"),
        ("../a.txt", "outside_repository"),
        ("docs/../a.txt", "outside_repository"),
        ("/etc/passwd", "outside_repository"),
        ("C:/x", "outside_repository"),
        (".git", "invalid_path"),
        (".git/config", "invalid_path"),
        (".GIT", "invalid_path"),
        ("a\\b", "invalid_path"),
        ("a\x00b", "invalid_path"),
        ("", "invalid_path"),
        (".", "invalid_path"),
    ],
)
def test_diff_paths_are_validated(diff_world: DiffWorld, path: str, code: str) -> None:
    outcome = call(diff_world.pinned(), "inspect_git_diff", paths=["a.txt", path])
    assert error_code(outcome) == code


@pytest.mark.parametrize("path", ["--output=x", "-R", "--ext-diff", "--textconv"])
def test_diff_option_like_paths_are_literal_and_create_no_file(
    diff_world: DiffWorld, tmp_path: Path, path: str
) -> None:
    outcome = call(diff_world.pinned(), "inspect_git_diff", paths=[path])
    assert outcome.result["diff"] == ""
    assert outcome.result["paths"] == [path]
    assert not (diff_world.repo.git_dir / "x").exists()
    assert not (diff_world.repo.path / "x").exists()
    assert not (tmp_path / "x").exists()


def test_diff_runs_git_with_the_exact_argument_vector(
    diff_world: DiffWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = diff_world.pinned()
    recorded: list[tuple[list[str], dict[str, Any]]] = []
    real_popen = subprocess.Popen

    def recording_popen(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        recorded.append((list(args), kwargs))
        return real_popen(args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", recording_popen)  # as pr_review_api.git.runner sees it
    call(pinned, "inspect_git_diff", paths=["a.txt", "docs"])
    [(argv, kwargs)] = recorded
    assert argv == [
        "git",
        f"--git-dir={diff_world.repo.git_dir}",
        "-c",
        "core.pager=cat",
        "-c",
        "diff.external=",
        "diff",
        "--no-ext-diff",
        "--no-textconv",
        diff_world.fork,
        diff_world.head,
        "--",
        "a.txt",
        "docs",
    ]
    assert not kwargs.get("shell")
    env = kwargs["env"]
    assert env["GIT_CONFIG_NOSYSTEM"] == "1"
    assert env["GIT_CONFIG_GLOBAL"] == env["HOME"]  # os.devnull
    assert env["GIT_LITERAL_PATHSPECS"] == "1"


def _plant_hostile_config(repo: GitRepo, sentinel: Path) -> None:
    """Local config, attributes and hooks that would each run `touch sentinel`."""
    touch = f"sh -c 'touch {sentinel}'"
    with (repo.git_dir / "config").open("a") as config:
        config.write(
            f"[diff]\n\texternal = {touch}\n"
            f'[diff "evil"]\n\ttextconv = {touch}\n\tcommand = {touch}\n'
            f"[core]\n\tfsmonitor = {touch}\n\tpager = {touch}\n\thooksPath = hooks\n"
            f"[pager]\n\tdiff = {touch}\n\tgrep = {touch}\n"
            f'[filter "evil"]\n\tclean = {touch}\n\tsmudge = {touch}\n\tprocess = {touch}\n'
            "[color]\n\tui = always\n\tdiff = always\n\tgrep = always\n"
            "[grep]\n\tcolumn = true\n\tpatternType = perl\n"
            "[diff]\n\tnoprefix = true\n\tmnemonicPrefix = true\n"
        )
    attributes = "* diff=evil filter=evil\n"
    (repo.path / ".gitattributes").write_text(attributes)
    (repo.git_dir / "info").mkdir(exist_ok=True)
    (repo.git_dir / "info" / "attributes").write_text(attributes)
    for hooks in (repo.git_dir / "hooks", repo.path / "hooks"):
        hooks.mkdir(exist_ok=True)
        for name in ("post-checkout", "post-index-change", "reference-transaction", "pre-commit"):
            hook = hooks / name
            hook.write_text(f"#!/bin/sh\ntouch {sentinel}\n")
            hook.chmod(0o755)


def test_repository_config_cannot_run_commands_or_change_output(
    repo: GitRepo, tmp_path: Path
) -> None:
    base = repo.commit_files({"a.txt": "alpha\n", ".gitattributes": "* diff=evil\n"})
    head = repo.commit_files({"a.txt": "alpha\nneedle\n"})
    sentinel = tmp_path / "SENTINEL"
    _plant_hostile_config(repo, sentinel)
    pinned = PinnedRepository.open(repo.git_dir, base, head)

    diff = call(pinned, "inspect_git_diff").result["diff"]
    assert diff.startswith("diff --git a/a.txt b/a.txt\n")
    assert diff.endswith(" alpha\n+needle\n")
    assert "\x1b" not in diff
    search = call(pinned, "search_repository", query="needle").result
    assert search["matches"] == [{"path": "a.txt", "line": 2, "excerpt": "needle"}]
    assert call(pinned, "search_repository", query="a.*").result["matches"] == []
    assert call(pinned, "read_repository_file", path="a.txt").result["content"] == (
        "1: alpha\n2: needle"
    )
    assert call(pinned, "list_repository_files").result["paths"] == [".gitattributes", "a.txt"]
    assert not sentinel.exists()


@pytest.mark.parametrize("mode", ["log", "diff"])
def test_diff_shows_gitlink_shas_never_a_submodule_read_from_git_modules(
    tmp_path: Path, mode: str
) -> None:
    sub = GitRepo(tmp_path / "sub")
    sub.commit_files({"x.txt": "SUBMODULE CONTENT ONE\n"}, "SUBMODULE SUBJECT ONE")
    repo = GitRepo(tmp_path / "repo")
    repo.commit_files({"a.txt": "a\n"})
    git(
        repo.path,
        "-c",
        "protocol.file.allow=always",
        "submodule",
        "add",
        "-q",
        str(sub.path),
        "lib",
    )
    base = repo.commit_files({}, "add submodule")
    new = sub.commit_files({"x.txt": "SUBMODULE CONTENT TWO\n"}, "SUBMODULE SUBJECT TWO")
    git(repo.path / "lib", "fetch", "-q", "origin")
    git(repo.path / "lib", "checkout", "-q", new)
    head = repo.commit_files({}, "bump submodule")
    with (repo.git_dir / "config").open("a") as config:
        config.write(f"[diff]\n\tsubmodule = {mode}\n")
    diff = call(PinnedRepository.open(repo.git_dir, base, head), "inspect_git_diff").result["diff"]
    assert f"+Subproject commit {new}" in diff
    assert "SUBMODULE" not in diff


def test_unrelated_histories_diff_from_the_base(repo: GitRepo) -> None:
    base = repo.commit_files({"a.txt": "alpha\n"})
    orphan = git(repo.path, "commit-tree", f"{base}^{{tree}}", "-m", "orphan")
    head = repo.commit_tree({"a.txt": ("100644", b"other\n")}, parent=orphan)
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    assert pinned.revisions.merge_base_sha == base
    assert "+other" in call(pinned, "inspect_git_diff").result["diff"]


# --- every result ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "arguments"),
    [
        ("list_repository_files", {"path": "nope"}),
        ("read_repository_file", {"path": "links/to_outside"}),
        ("search_repository", {"query": "x", "path": "README.md/x"}),
        ("inspect_git_diff", {"paths": [".git"]}),
    ],
)
def test_tool_failures_are_ok_false_results_with_a_contract_code(
    pinned: PinnedRepository, name: str, arguments: dict[str, Any]
) -> None:
    outcome = call(pinned, name, **arguments)
    assert outcome.ok is False
    assert error_code(outcome) in ERROR_CODES
    assert outcome.preview_text == outcome.result["error"]["message"]
    assert str(pinned.git_dir) not in outcome.content


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
