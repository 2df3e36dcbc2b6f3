"""Custom checks on a GitLab merge request (specification §§20, 17) through the CLI's `--post`: the
note shows the checks' table, and an `error` check that fails or is inconclusive makes the
commit status `pr-review` `failed` whatever `fail_on` says; passing, `success`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.environment import Environment
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.gitlab_statuses import FakeStatuses
from tests.fakes.provider_server import ScriptedProvider, stop_turn, tool_call_turn
from tests.forge.test_gitlab import SETTINGS, merge_request, review_cli

pytestmark = pytest.mark.e2e

CONFIG = """
[[checks]]
name = "Validation comes first"
instructions = "save() validates its argument before it writes anything."
paths = ["src/**"]
mode = "error"
"""


@pytest.mark.parametrize(
    ("result", "state"), [("fail", "failed"), ("inconclusive", "failed"), ("pass", "success")]
)
def test_an_error_check_decides_the_commit_status(  # noqa: PLR0913, PLR0917  (the fakes a gate needs)
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    fake_gitlab_statuses: FakeStatuses,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    result: str,
    state: str,
    environment: Environment,
) -> None:
    environment(scripted_provider, gitlab=fake_gitlab, cache=tmp_path / "cache", **SETTINGS)
    mr = merge_request(fake_gitlab, config=CONFIG)
    check = {
        "name": "Validation comes first",
        "result": result,
        "explanation": "validate(w) runs after db.write(w).",
        "evidence": "validate(w)",
    }
    read = ("c1", "read_repository_file", {"path": "src/service.py"})
    final = {"summary": "S", "findings": [], "notes": [], "checks": [check]}
    scripted_provider.script(tool_call_turn([read]), stop_turn(final))
    done = review_cli(mr)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["review"]["checks"][0]["result"] == result
    (status,) = fake_gitlab_statuses.on(mr.head_sha)
    assert status.status == state
    (note,) = fake_gitlab_notes.plain_notes("grp/sub/project", 3)
    assert "| Validation comes first |" in note.body
    if state == "failed":
        assert status.description is not None
        assert status.description.startswith("1 error check not passed")


def test_a_review_that_ends_without_a_final_review_fails_an_error_check_closed(
    fake_gitlab: FakeGitLab,
    fake_gitlab_statuses: FakeStatuses,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
    environment: Environment,
) -> None:
    """`fail_on` is "none", but the author writes what the model reads: a review they make end
    early must not pass the error check."""
    environment(scripted_provider, gitlab=fake_gitlab, cache=tmp_path / "cache", **SETTINGS)
    mr = merge_request(fake_gitlab, config=CONFIG)
    scripted_provider.script(stop_turn("no JSON here"))
    done = review_cli(mr)
    assert done.exit_code == 1
    (status,) = fake_gitlab_statuses.on(mr.head_sha)
    assert status.status == "failed"
    assert status.description is not None
    assert status.description.startswith("Failed closed: 1 error check not decided.")
