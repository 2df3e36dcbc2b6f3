"""loop/policy.py: the skip rules of `.pr-review.toml` (specification §16), and every glob key (the
skip rules' and `[[path_instructions]]`'s) matched in time linear in its input, with the
hostile globs of tests/test_globs.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from pr_review_api.fetch.metadata import PullRequestMetadata
from pr_review_api.globs import MAX_GLOBS, GlobSet
from pr_review_api.loop.guidance import path_instruction_parts
from pr_review_api.loop.policy import skip_rule
from pr_review_api.loop.repo_config import PathInstructions, RepoConfig
from tests.test_globs import DEADLINE_SECONDS, HOSTILE, MANY_STARS

SHA = "a" * 40


def metadata(**fields: object) -> PullRequestMetadata:
    values: dict[str, object] = {
        "base_sha": SHA,
        "head_sha": "b" * 40,
        "base_ref": "main",
        "title": "Add a feature",
        "body": "",
        "author": "octocat",
        "labels": (),
    }
    values.update(fields)
    return PullRequestMetadata(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("config", "fields", "rule"),
    [
        ({}, {}, None),
        ({}, {"author": "dependabot[bot]"}, "the author is a bot (review_bots = false)"),
        ({}, {"author": "Renovate[BOT]"}, "the author is a bot (review_bots = false)"),
        ({"review_bots": True}, {"author": "dependabot[bot]"}, None),
        (
            {"review_bots": True, "skip_authors": ("dependabot[bot]",)},
            {"author": "dependabot[bot]"},
            "the author matches skip_authors",
        ),
        (
            {"skip_authors": ("release-*",)},
            {"author": "release-bot"},
            "the author matches skip_authors",
        ),
        (
            {"skip_labels": ("no-review",)},
            {"labels": ("a", "no-review")},
            "a label matches skip_labels",
        ),
        ({"skip_labels": ("no-review",)}, {"labels": ("No-Review",)}, None),
        (
            {"skip_base_branches": ("release/**",)},
            {"base_ref": "release/1.2"},
            "the base branch matches skip_base_branches",
        ),
        ({"skip_base_branches": ("release/**",)}, {"base_ref": "main"}, None),
        (
            {"skip_title": ("[wip]",)},
            {"title": "[WIP] later"},
            "the title contains a skip_title string",
        ),
        ({"skip_title": ("wip",)}, {"title": "Finish"}, None),
    ],
)
def test_the_first_rule_that_matches_is_named(
    config: dict[str, object], fields: dict[str, object], rule: str | None
) -> None:
    assert skip_rule(metadata(**fields), RepoConfig.model_validate(config)) == rule


def test_the_rule_named_never_quotes_the_pull_request() -> None:
    config = RepoConfig(skip_title=("secret",), skip_labels=("x*",))
    for fields in ({"title": "a SECRET title"}, {"labels": ("x-<b>hidden<b>",)}):
        rule = skip_rule(metadata(**fields), config)
        assert rule is not None
        assert "SECRET" not in rule
        assert "hidden" not in rule


def _by_the_deadline(work: Callable[[], object]) -> list[object]:
    answers: list[object] = []
    worker = threading.Thread(target=lambda: answers.append(work()))
    worker.daemon = True  # a backtracking matcher would keep it running: never join it then
    worker.start()
    worker.join(DEADLINE_SECONDS)
    return answers


HOSTILE_GLOBS = (HOSTILE, MANY_STARS, "/" + HOSTILE)
LONG = "a" * 255


@pytest.mark.parametrize("glob", HOSTILE_GLOBS)
def test_every_glob_key_answers_hostile_globs_by_the_deadline(glob: str) -> None:
    globs = (glob,) * MAX_GLOBS
    config = RepoConfig(
        skip_authors=globs,
        skip_labels=globs,
        skip_base_branches=globs,
        review_bots=True,
        path_instructions=tuple(PathInstructions(paths=globs, instructions="x") for _ in range(50)),
    )
    pull = metadata(author=LONG, labels=(LONG,) * 100, base_ref="/".join(["a" * 30] * 30))
    paths = ["a" * 4000, "/".join(["a" * 30] * 130)]
    assert _by_the_deadline(lambda: skip_rule(pull, config)) == [None]
    assert _by_the_deadline(lambda: path_instruction_parts(config, paths)) == [[]]


@pytest.mark.parametrize("glob", HOSTILE_GLOBS)
def test_every_glob_key_costs_one_step_per_character(
    glob: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps: list[str] = []
    real_step = GlobSet._step

    def counted(self: GlobSet, states: int, char: str) -> int:
        steps.append(char)
        return real_step(self, states, char)

    monkeypatch.setattr(GlobSet, "_step", counted)
    globs = (glob,) * MAX_GLOBS
    branch = "/".join(["a" * 30] * 30)
    config = RepoConfig(
        skip_authors=globs, skip_labels=globs, skip_base_branches=globs, review_bots=True
    )
    pull = metadata(author=LONG, labels=(LONG, LONG), base_ref=branch)
    assert skip_rule(pull, config) is None
    # At most one step per character of each input: the author, two labels, the branch.
    assert len(steps) <= len(LONG) * 3 + len(branch)
    steps.clear()
    tables = tuple(PathInstructions(paths=globs, instructions="x") for _ in range(3))
    path = "a" * 4000
    assert path_instruction_parts(RepoConfig(path_instructions=tables), [path]) == []
    assert len(steps) <= 3 * len(path)
