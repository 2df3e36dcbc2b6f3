"""pr_review_api.globs: the documented glob semantics, in time linear in the path.

The oracle is the regular-expression translation the project used before (copied here, with
`re.DOTALL` so that a newline is a character like any other, as documented): on small inputs
its backtracking is harmless, and the linear matcher must agree with it on every glob and path.
"""

from __future__ import annotations

import re
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pr_review_api.globs import MAX_GLOB_CHARS, MAX_GLOBS, GlobSet, matches_any
from tests.conftest import examples

HOSTILE = "**a" * 40 + "**b"  # 123 characters: exponential for a backtracking matcher
MANY_STARS = "*a" * 60 + "b"  # 60 `*` in one name
# A generous bound on a deadline the test sets: a backtracking matcher never meets it.
DEADLINE_SECONDS = 10.0


def oracle(glob: str) -> re.Pattern[str]:
    """The translation of loop/repo_config.py before the linear matcher, as the reference."""
    anchored = "/" in glob.rstrip("/")
    body = glob.strip("/") + ("/**" if glob.endswith("/") else "")
    out, index = [], 0
    while index < len(body):
        char = body[index]
        if body.startswith("**/", index):
            out.append("(?:[^/]+/)*")
            index += 3
        elif body.startswith("**", index):
            out.append(".*")
            index += 2
        elif char == "*":
            out.append("[^/]*")
            index += 1
        elif char == "?":
            out.append("[^/]")
            index += 1
        else:
            out.append(re.escape(char))
            index += 1
    prefix = "" if anchored else "(?:.*/)?"
    return re.compile(prefix + "".join(out), re.DOTALL)


# Few letters, so that globs and paths meet often; every special character of a glob.
_GLOB_CHARS = st.sampled_from(["a", "b", "/", "*", "?", ".", "\n", "[", "]"])
_PATH_CHARS = st.sampled_from(["a", "b", "/", ".", "\n", "*", "?", "["])
GLOBS = st.text(_GLOB_CHARS, min_size=1, max_size=10)
PATHS = st.text(_PATH_CHARS, max_size=12)


@settings(max_examples=examples(1500), deadline=None)
@given(glob=GLOBS, path=PATHS)
def test_one_glob_agrees_with_the_regular_expression(glob: str, path: str) -> None:
    assert GlobSet([glob]).matches(path) is bool(oracle(glob).fullmatch(path))


@settings(max_examples=examples(500), deadline=None)
@given(globs=st.lists(GLOBS, max_size=5), path=PATHS)
def test_a_set_matches_when_any_of_its_globs_does(globs: list[str], path: str) -> None:
    expected = any(oracle(glob).fullmatch(path) for glob in globs)
    assert GlobSet(globs).matches(path) is expected


@pytest.mark.parametrize(
    ("path", "glob", "expected"),
    [
        ("docs/a.md", "docs/", True),
        ("src/docs/a.md", "docs/", True),
        ("src/docs/a.md", "/docs/", False),
        ("docs/deep/a.md", "docs/*", False),
        ("docs/deep/a.md", "docs/**", True),
        ("src/deep/a.md", "*.md", True),
        ("src/x_pb2.py", "src/**/*_pb2.py", True),
        ("src/gen/deep/x_pb2.py", "src/**/*_pb2.py", True),
        ("src//x_pb2.py", "src/**/*_pb2.py", False),  # `**/` takes whole, named folders
        ("a/b/c", "a**c", True),  # `**` not before `/` crosses folders
        ("a/b", "a?b", False),  # `?` never matches `/`
        ("a[b].py", "a[b].py", True),  # no character classes: `[` is literal
        ("ab.py", "a[b].py", False),
        ("docs/a\nb.md", "docs/**", True),  # a newline is a character like any other
        ("", "**", True),
        ("", "*", True),
    ],
)
def test_documented_examples(path: str, glob: str, expected: bool) -> None:
    assert matches_any(path, [glob]) is expected


def test_no_glob_matches_nothing() -> None:
    assert GlobSet([]).matches("a") is False
    assert GlobSet([]).matches("") is False


def test_the_bounds_of_the_configuration_are_kept() -> None:
    with pytest.raises(ValueError, match="more than"):
        GlobSet(["a"] * (MAX_GLOBS + 1))
    with pytest.raises(ValueError, match="longer than"):
        GlobSet(["a" * (MAX_GLOB_CHARS + 1)])
    assert GlobSet(["a"] * MAX_GLOBS).matches("a")


def _answers_by_the_deadline(globs: list[str], path: str) -> list[bool]:
    """The match, run in a thread the test waits for until DEADLINE_SECONDS at most."""
    answers: list[bool] = []
    worker = threading.Thread(target=lambda: answers.append(GlobSet(globs).matches(path)))
    worker.daemon = True  # a backtracking matcher would keep it running: never join it then
    worker.start()
    worker.join(DEADLINE_SECONDS)
    return answers


@pytest.mark.parametrize(
    ("glob", "expected"),
    [(HOSTILE, False), (MANY_STARS, False), ("/" + HOSTILE, False), ("**/" * 85, True)],
)
def test_hostile_globs_answer_by_the_deadline(glob: str, expected: bool) -> None:
    assert len(glob) <= MAX_GLOB_CHARS
    near_miss = "a" * 4000  # every `a` matches, the `b` never comes: the worst case
    deep = "/".join(["a" * 30] * 130)
    answers = _answers_by_the_deadline([glob] * MAX_GLOBS, near_miss)
    answers += _answers_by_the_deadline([glob] * MAX_GLOBS, deep)
    assert answers == [expected, expected]


def test_the_hostile_glob_still_matches_what_it_names() -> None:
    assert _answers_by_the_deadline([HOSTILE], "a" * 39 + "b") == [False]  # 40 a's before the b
    assert _answers_by_the_deadline([HOSTILE], "xa" * 40 + "b") == [True]
    assert _answers_by_the_deadline([MANY_STARS], "x/" + "a" * 200 + "b") == [True]


@pytest.mark.parametrize("glob", [HOSTILE, MANY_STARS, "**/" * 85, "*/" * 128])
def test_a_path_costs_one_step_per_character_whatever_the_glob(
    glob: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[str] = []
    real_step = GlobSet._step

    def counted(self: GlobSet, states: int, char: str) -> int:
        steps.append(char)
        return real_step(self, states, char)

    monkeypatch.setattr(GlobSet, "_step", counted)
    path = "/".join(["a" * 30] * 130)
    GlobSet([glob]).matches(path)
    assert len(steps) <= len(path)
    # Closing a set over the tokens that may match nothing takes at most two passes.
    assert GlobSet([glob])._masks.longest_skip <= 2
