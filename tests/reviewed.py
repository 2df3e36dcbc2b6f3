"""A change reviewed end to end on a fake forge, checked alike for every forge that serves one
(tests/gitea/test_review.py, tests/gitlab/test_review.py, tests/forge/test_gitlab.py): the
change's finding (`validate(w)` added after `db.write(w)`), the settings of a review by the
scripted provider, the CLI's `review` command, and what the review's document and the
model's requests show.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from pr_review_api.cli import commands as cli
from pr_review_api.settings import Settings
from tests.builders import finding
from tests.conftest import PROVIDER_KEY
from tests.fakes.forge_server import FakeForge
from tests.fakes.provider_server import ScriptedProvider

# The finding on the head's line 3 of src/service.py, where validate(w) follows db.write(w).
FINDING = finding(
    title="Validation after write",
    explanation="Invalid widgets are saved first.",
    path="src/service.py",
    line=3,
    evidence="validate(w) follows db.write(w).",
    recommendation="Validate before writing.",
)
REVIEW = {"summary": "One problem.", "findings": [FINDING], "notes": []}


def review_cli(*args: str) -> Result:
    """`pr-review review ...` in this process, with the environment the test set."""
    return CliRunner().invoke(cli.main, ["review", *args], prog_name="pr-review")


def settings_for(
    fake: FakeForge, provider: ScriptedProvider, cache: Path, token: str | None, **overrides: Any
) -> Settings:
    """A review of the fake forge's changes with `token`, by the scripted provider; `overrides`
    adds or replaces settings."""
    values = {
        "opencode_api_key": PROVIDER_KEY,
        "opencode_base_url": provider.base_url,
        "review_timeout_seconds": 60,
    }
    return fake.settings(cache, token=token, **(values | overrides))


def assert_reviewed(
    document: dict[str, Any], pull_request: dict[str, Any], revisions: dict[str, str]
) -> None:
    """The review's document: `pull_request` (as the document names it) at `revisions`,
    reviewed to the end with FINDING, and nothing published."""
    assert document["termination_reason"] == "final_review"
    assert document["pull_request"] == pull_request
    assert document["revisions"] == revisions
    assert document["review"]["findings"] == [FINDING]
    assert document["publication"] is None


def assert_diff_reached_the_model(provider: ScriptedProvider) -> None:
    """The change's title reached the model as data, and the diff's added line as the answer
    to its one tool call."""
    first, second = provider.requests
    assert "Validate widgets" in json.dumps(first.json["messages"])  # the title, as data
    tool_result = second.json["messages"][-1]
    assert tool_result["role"] == "tool"
    assert "+    validate(w)" in json.loads(tool_result["content"])["diff"]
