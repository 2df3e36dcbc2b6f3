"""Properties of the four tools under arbitrary input (hypothesis), on one hostile repository.

Whatever the model sends (any string as a path, cursor or query; any JSON-like argument
object), a call that passes its argument model never raises, returns `ok: true` or an
`ok: false` result with a contract code, stays within its caps, and never carries content
from outside the repository: a sentinel file outside it (with links towards it, real ones
on disk included), a sentinel inside `.git` and the `.git` look-alikes never show.
"""

from __future__ import annotations

import json
from typing import Any, get_args

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from pr_review_api.errors import ToolErrorCode
from pr_review_api.git.repository import PinnedRepository
from pr_review_api.settings import (
    MAX_READ_LINES,
    MAX_SEARCH_EXCERPT_CHARS,
    MAX_SOURCE_FILE_BYTES,
    MAX_TOOL_RESULT_BYTES,
)
from pr_review_api.tools import (
    TOOLS_BY_NAME,
    ToolArguments,
    ToolOutcome,
    execute_tool,
)
from tests.conftest import examples
from tests.gitrepo import EXECUTABLE, FILE
from tests.hostile.world import (
    GIT_DIR_SENTINEL,
    LINKS,
    LOOKALIKE_MARKER,
    LOOKALIKES,
    OUTSIDE_SENTINEL,
    REGULAR_FILES,
    UNSPELLABLE,
    HostileWorld,
)

ERROR_CODES: set[str] = set(get_args(ToolErrorCode))

PROPERTIES = settings(
    max_examples=examples(150),
    deadline=None,
    database=None,
    # The suite's autouse environment fixture is function-scoped and harmless to share.
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# --- strategies -----------------------------------------------------------------------------

KNOWN_PATHS = sorted(
    {
        *REGULAR_FILES,
        *LINKS,
        *LOOKALIKES,
        *UNSPELLABLE,
        "",
        "src",
        "src/lib",
        "links",
        "links/to_src",
        "links/to_src/lib/util.py",
        "links/to_outside",
        "escape_rel",
        "escape_abs",
        "deep",
        "deep/escape",
        "into_git",
        "many",
        "many/f007.txt",
        "quotes",
        "bin",
        "bin/nul.bin",
        "big",
        "big/over.txt",
        "big/exact.txt",
        "text",
        "text/escaping.txt",
        "text/giant_line.txt",
        "vendor",
        "vendor/lib",
        "weird",
    }
)
COMPONENTS = st.sampled_from(
    [
        *{part for path in KNOWN_PATHS for part in path.split("/")},
        "..",
        ".",
        "",
        ".git",
        ".GIT",
        ".git ",
        ".g\u200cit",
        "C:",
        "\\",
        "\x00",
        "\n",
        '"',
        "😀",
        "outside",
        "secret.txt",
    ]
)
# Surrogates, controls, format and space characters: what JSON can smuggle into a str.
ODD_TEXT = st.text(st.characters(categories=["Cs", "Cc", "Cf", "Zs"]), min_size=1, max_size=4)
PATHS = st.one_of(
    st.sampled_from(KNOWN_PATHS),
    st.lists(COMPONENTS | st.text(max_size=6) | ODD_TEXT, max_size=6).map("/".join),
    st.text(max_size=40),
    st.builds(
        str.__add__,
        st.sampled_from(["/", "//", "./", "../", "C:", "\\\\", "a/../", ".git/"]),
        st.sampled_from(KNOWN_PATHS),
    ),
)
QUERIES = st.one_of(
    st.sampled_from(
        [
            "needle",
            "Needle",
            "validate_name",
            "def ",
            "line 1",
            "two",
            "one\r",
            ".*[",
            "--output=x",
            "-e",
            "😀",
            "\u2028",
            '"\\',
            "\x01",
            "x" * 50,
            "ab",
            "e",
            " ",
            "needle\n",
            "LOOKALIKE",
            "SENTINEL",
            "etc/passwd",
        ]
    ),
    st.text(min_size=1, max_size=30),
)
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def mostly(valid: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Usually a plausible value for the field, sometimes any JSON value at all."""
    return st.one_of(valid, valid, valid, JSON_VALUES)


FIELDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "list_repository_files": {
        "path": mostly(PATHS),
        "limit": mostly(st.integers(-2, 300)),
        "cursor": mostly(st.none() | PATHS),
    },
    "read_repository_file": {
        "path": mostly(PATHS),
        "start_line": mostly(st.integers(-2, 700)),
        "end_line": mostly(st.none() | st.integers(-2, 700)),
    },
    "search_repository": {
        "query": mostly(QUERIES | st.text(max_size=600)),
        "path": mostly(PATHS),
        "limit": mostly(st.integers(-2, 120)),
    },
    "inspect_git_diff": {
        "paths": mostly(st.lists(PATHS, max_size=55)),
        "max_bytes": mostly(st.integers(-2, 140_000)),
    },
}


@st.composite
def tool_calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A tool name and a JSON-like argument object, as a model might send them."""
    name = draw(st.sampled_from(list(FIELDS)))
    arguments = draw(st.fixed_dictionaries({}, optional=FIELDS[name]))
    if draw(st.integers(0, 9)) == 0:
        arguments |= draw(st.dictionaries(st.text(max_size=8), JSON_VALUES, max_size=2))
    return name, arguments


# --- invariants -----------------------------------------------------------------------------


def escaped_size(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode("utf-8")) - 2


def check_outcome(
    world: HostileWorld, name: str, arguments: ToolArguments, outcome: ToolOutcome
) -> None:
    """Every rule a result obeys whatever the input."""
    result = outcome.result
    assert json.loads(outcome.content) == result
    assert outcome.content == json.dumps(result, separators=(",", ":"), ensure_ascii=False)
    sent = json.dumps(arguments.model_dump(), ensure_ascii=False)
    # A diff rightly shows committed look-alike files and link targets (text in the tree);
    # nothing may ever show what lies outside the tree or inside .git.
    secrets = [OUTSIDE_SENTINEL, GIT_DIR_SENTINEL]
    if name != "inspect_git_diff":
        secrets += [LOOKALIKE_MARKER, str(world.outside.parent), str(world.repo.path)]
    for secret in secrets:
        assert secret not in outcome.content or secret in sent
    if not result["ok"]:
        assert set(result) == {"ok", "error"}
        assert result["error"]["code"] in ERROR_CODES
        assert isinstance(result["error"]["message"], str)
        return
    if name != "inspect_git_diff":
        assert len(outcome.content.encode("utf-8")) <= MAX_TOOL_RESULT_BYTES
    CHECKS[name](world, arguments, result)


def check_list(world: HostileWorld, arguments: Any, result: dict[str, Any]) -> None:
    assert list(result) == ["ok", "path", "paths", "truncated", "next_cursor"]
    paths = result["paths"]
    assert len(paths) <= arguments.limit
    assert paths == sorted(set(paths))
    assert set(paths) <= set(world.listable())
    assert (result["next_cursor"] is not None) == result["truncated"]


def check_read(world: HostileWorld, arguments: Any, result: dict[str, Any]) -> None:
    start, end, total = result["start_line"], result["end_line"], result["total_lines"]
    assert start == arguments.start_line
    assert end <= total
    assert end - start + 1 <= MAX_READ_LINES
    if arguments.end_line is not None:
        assert end <= arguments.end_line
    if not result["truncated"]:
        assert end == total
    lines = result["content"].split("\n") if result["content"] else []
    assert len(lines) == max(end - start + 1, 0)
    for number, line in enumerate(lines, start):
        assert line.startswith(f"{number}: ")


def check_search(world: HostileWorld, arguments: Any, result: dict[str, Any]) -> None:
    assert result["query"] == arguments.query
    assert len(result["matches"]) <= arguments.limit
    regular = {
        path
        for path, (mode, content) in world.entries.items()
        if mode in (FILE, EXECUTABLE) and len(content) <= MAX_SOURCE_FILE_BYTES
    }
    for match in result["matches"]:
        assert match["path"] in regular
        assert match["path"] in world.listable()
        assert match["line"] >= 1
        assert len(match["excerpt"]) <= MAX_SEARCH_EXCERPT_CHARS


def check_diff(world: HostileWorld, arguments: Any, result: dict[str, Any]) -> None:
    assert escaped_size(result["diff"]) <= arguments.max_bytes
    assert result["bytes"] == len(result["diff"].encode("utf-8")) <= arguments.max_bytes
    assert len(result["paths"]) <= len(arguments.paths)


CHECKS = {
    "list_repository_files": check_list,
    "read_repository_file": check_read,
    "search_repository": check_search,
    "inspect_git_diff": check_diff,
}


def run(pinned: PinnedRepository, name: str, arguments: dict[str, Any]) -> ToolOutcome | None:
    """Validate as the protocol does; None when the arguments are a protocol error."""
    try:
        validated = TOOLS_BY_NAME[name].arguments.model_validate(arguments)
    except ValidationError:
        return None
    return execute_tool(pinned, name, validated)


# --- properties -----------------------------------------------------------------------------


@PROPERTIES
@given(call=tool_calls())
def test_any_call_never_raises_and_keeps_every_result_rule(
    world: HostileWorld, pinned: PinnedRepository, call: tuple[str, dict[str, Any]]
) -> None:
    name, arguments = call
    outcome = run(pinned, name, arguments)
    if outcome is not None:
        validated = TOOLS_BY_NAME[name].arguments.model_validate(arguments)
        check_outcome(world, name, validated, outcome)


@PROPERTIES
@given(path=PATHS, cursor=st.none() | PATHS, query=QUERIES)
def test_any_path_is_contained_in_every_tool(
    world: HostileWorld, pinned: PinnedRepository, path: str, cursor: str | None, query: str
) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("list_repository_files", {"path": path, "cursor": cursor, "limit": 200}),
        ("read_repository_file", {"path": path}),
        ("search_repository", {"query": query, "path": path, "limit": 100}),
        ("inspect_git_diff", {"paths": [path], "max_bytes": 4096}),
    ]
    for name, arguments in calls:
        outcome = run(pinned, name, arguments)
        assert outcome is not None  # these arguments always fit the schemas
        check_outcome(world, name, TOOLS_BY_NAME[name].arguments.model_validate(arguments), outcome)


DIRECTORIES = {
    "": "",
    "src": "src",
    "links/to_src": "src",
    "many": "many",
    "quotes": "quotes",
    "links": "links",
    "text": "text",
    "weird": "weird",
}


@settings(PROPERTIES, max_examples=examples(60))
@given(directory=st.sampled_from(sorted(DIRECTORIES)), limit=st.integers(1, 200))
def test_paging_visits_every_file_of_a_directory_exactly_once(
    world: HostileWorld, pinned: PinnedRepository, directory: str, limit: int
) -> None:
    real = DIRECTORIES[directory]
    expected = [p for p in world.listable() if not real or p.startswith(real + "/")]
    seen: list[str] = []
    cursor: str | None = None
    while True:
        outcome = run(
            pinned, "list_repository_files", {"path": directory, "limit": limit, "cursor": cursor}
        )
        assert outcome is not None
        assert outcome.ok
        assert len(outcome.content.encode()) <= MAX_TOOL_RESULT_BYTES
        seen += outcome.result["paths"]
        cursor = outcome.result["next_cursor"]
        if cursor is None:
            break
        assert len(seen) < len(expected)  # a truncated page always promises more
    assert seen == expected


def committed_lines(world: HostileWorld, path: str) -> list[str]:
    text = world.entries[path][1].decode("utf-8")
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


READABLE = [
    "src/app.py",
    "text/lines500.txt",
    "text/crlf.txt",
    "text/no_newline.txt",
    "text/empty.txt",
    "text/unicode.txt",
    "text/escaping.txt",
    "text/metachar.txt",
]


@PROPERTIES
@given(
    path=st.sampled_from(READABLE),
    start=st.integers(1, 620),
    end=st.none() | st.integers(1, 620),
)
def test_read_ranges_show_exactly_the_committed_lines(
    world: HostileWorld, pinned: PinnedRepository, path: str, start: int, end: int | None
) -> None:
    lines = committed_lines(world, path)
    outcome = run(
        pinned, "read_repository_file", {"path": path, "start_line": start, "end_line": end}
    )
    assert outcome is not None
    if start > max(len(lines), 1) or (end is not None and end < start):
        assert outcome.result["error"]["code"] == "invalid_range"
        return
    result = outcome.result
    last = result["end_line"]
    expected = "\n".join(f"{n}: {lines[n - 1]}" for n in range(start, last + 1))
    assert result["content"] == expected
    assert result["total_lines"] == len(lines)
    wanted = min(len(lines), start + MAX_READ_LINES - 1, end or len(lines))
    assert last <= wanted
    cut_by_bytes = last < wanted
    assert result["truncated"] == (cut_by_bytes or last < len(lines))
    if cut_by_bytes:  # only the byte cap may stop early, and only when the next line won't fit
        nxt = f"{last + 1}: {lines[last]}"
        # (+16: the budget is reserved for the widest end_line, total_lines' digits)
        assert len(outcome.content.encode()) + escaped_size(nxt) + 2 + 16 > MAX_TOOL_RESULT_BYTES


def expected_hits(world: HostileWorld, directory: str, query: str) -> list[tuple[str, int]]:
    """Brute force over the committed blobs: what a literal line search must find."""
    needle = query.encode("utf-8")
    hits = []
    for path in sorted(world.entries):
        mode, content = world.entries[path]
        if not path.startswith(directory + "/") or mode not in (FILE, EXECUTABLE):
            continue
        if b"\0" in content or len(content) > MAX_SOURCE_FILE_BYTES or "\n" in query:
            continue
        for number, line in enumerate(content.split(b"\n"), 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if needle in line:
                hits.append((path, number))
    return hits


@PROPERTIES
@given(
    directory=st.sampled_from(["src", "text", "bin", "big", "many"]),
    query=QUERIES,
    limit=st.integers(1, 100),
)
def test_search_finds_exactly_the_literal_occurrences_in_order(
    world: HostileWorld, pinned: PinnedRepository, directory: str, query: str, limit: int
) -> None:
    outcome = run(pinned, "search_repository", {"query": query, "path": directory, "limit": limit})
    assert outcome is not None
    expected = expected_hits(world, directory, query)
    found = [(m["path"], m["line"]) for m in outcome.result["matches"]]
    assert found == expected[: len(found)]
    assert len(found) == min(limit, len(expected)) or len(outcome.content.encode()) > 60_000
    assert outcome.result["truncated"] == (len(found) < len(expected))
    for match in outcome.result["matches"]:
        raw = world.entries[match["path"]][1].split(b"\n")[match["line"] - 1]
        if len(raw.decode("utf-8")) <= MAX_SEARCH_EXCERPT_CHARS:
            assert query.removesuffix("\r") in match["excerpt"]
