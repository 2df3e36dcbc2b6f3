"""`pr-review review` with REVIEW_SUGGESTIONS (specification §14), as a user runs it: the schema the
provider receives, the checks, every format, and --post to the fake GitHub."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from pr_review_api import cli
from pr_review_api.loop.final_review import final_review_schema
from pr_review_api.loop.suggestions import dropped_note
from tests import builders
from tests.conftest import GITHUB_TOKEN
from tests.environment import Environment
from tests.fakes.github_server import FakeGitHub, fake_github
from tests.fakes.provider_server import ScriptedProvider, stop_turn
from tests.gitrepo import GitRepo

__all__ = ["fake_github"]

BASE = "def save(user):\n    store(user)\n    return user\n"
HEAD = "def save(user):\n    store(user)\n    validate(user)\n    return user\n"
FIX = "    validate(user)\n    store(user)"


_finding = partial(
    builders.finding,
    title="t",
    explanation="Stored before it is validated.",
    path="src/service.py",
    evidence="store then validate",
    recommendation="Validate first.",
)


GOOD = _finding(
    line=3, suggestion={"start_line": 2, "end_line": 3, "replacement": FIX}, title="good"
)
BROKEN = _finding(
    line=3,
    suggestion={"start_line": 3, "end_line": 3, "replacement": "    validate(user"},
    title="bad",
)
REPLY = {"summary": "One problem.", "findings": [GOOD, BROKEN], "notes": []}


@pytest.fixture
def local(
    repo: GitRepo, scripted_provider: ScriptedProvider, environment: Environment
) -> list[str]:
    base = repo.commit_files({"src/service.py": BASE})
    head = repo.commit_files({"src/service.py": HEAD})
    environment(scripted_provider)
    return ["review", "--repo", str(repo.path), "--base", base, "--head", head]


def run(*args: str) -> Result:
    return CliRunner().invoke(cli.main, list(args), prog_name="pr-review")


def test_on_the_provider_gets_the_field_and_the_document_carries_it(
    local: list[str], scripted_provider: ScriptedProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEW_SUGGESTIONS", "true")
    scripted_provider.script(stop_turn(REPLY))
    result = run(*local, "--format", "json")
    assert result.exit_code == 0, result.output
    system = scripted_provider.requests[0].json["messages"][0]["content"]
    assert system.endswith(json.dumps(final_review_schema(suggestions=True), indent=2))
    document = json.loads(result.stdout)
    good, bad = document["review"]["findings"]
    assert good["suggestion"] == {"start_line": 2, "end_line": 3, "replacement": FIX}
    assert bad["suggestion"] is None
    assert bad["title"] == "bad"  # the finding stands
    assert document["review"]["notes"] == [dropped_note(2, "syntax")]
    assert document["rounds"] == 1  # no provider round spent on it


@pytest.mark.parametrize(
    ("output_format", "shown"),
    [
        # Shown whole (specification §14): the head's lines it replaces, then the replacement.
        (
            "text",
            "        @@ -2,2 +2,2 @@\n        -    store(user)\n        -    validate(user)\n"
            "        +    validate(user)\n        +    store(user)\n",
        ),
        (
            "markdown",
            "```diff\n@@ -2,2 +2,2 @@\n-    store(user)\n-    validate(user)\n"
            "+    validate(user)\n+    store(user)\n```",
        ),
        ("sarif", '"text": "    validate(user)\\n    store(user)"'),
    ],
)
def test_every_format_shows_the_kept_suggestion(
    local: list[str],
    scripted_provider: ScriptedProvider,
    monkeypatch: pytest.MonkeyPatch,
    output_format: str,
    shown: str,
) -> None:
    monkeypatch.setenv("REVIEW_SUGGESTIONS", "true")
    scripted_provider.script(stop_turn(REPLY))
    result = run(*local, "--format", output_format)
    assert result.exit_code == 0, result.output
    assert shown in result.stdout


def test_off_a_suggestion_is_an_unknown_field(
    local: list[str], scripted_provider: ScriptedProvider
) -> None:
    scripted_provider.script(stop_turn(REPLY))
    result = run(*local, "--format", "json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["code"] == "invalid_model_response"
    system = scripted_provider.requests[0].json["messages"][0]["content"]
    assert "suggestion" not in system


def test_post_publishes_a_multi_line_suggestion(
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> None:
    fake_github.users[GITHUB_TOKEN] = "pr-review-bot"
    pull = fake_github.pull_request(
        "acme", "widget", 7, base={"src/service.py": BASE}, head={"src/service.py": HEAD}
    )
    environment(
        scripted_provider, github=fake_github, cache=tmp_path / "cache", REVIEW_SUGGESTIONS="true"
    )
    scripted_provider.script(stop_turn(REPLY))
    result = run("review", pull.url, "--post", "--format", "json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["publication"]["inline_comments"] == 2
    assert len(fake_github.review_posts) == 1  # accepted at the first attempt
    (review,) = fake_github.posted("acme", "widget", 7)
    good = next(c for c in review["comments"] if "good" in c["body"].split("\n")[0])
    assert (good["start_line"], good["start_side"], good["line"], good["side"]) == (
        2,
        "RIGHT",
        3,
        "RIGHT",
    )
    assert good["body"].endswith("```suggestion\n" + FIX + "\n```")
    bad = next(c for c in review["comments"] if "bad" in c["body"].split("\n")[0])
    assert "suggestion" not in bad["body"].lower().replace("suggestion of finding", "")
    assert "dropped" in review["body"]
