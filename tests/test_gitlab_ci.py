"""docs/gitlab-ci.yml: the GitLab CI job, parsed and run as a GitLab runner runs it (its script
lines in one bash session with `set -eo pipefail`, the predefined CI variables and the job's
`variables:` expanded) against the fake GitLab and the scripted provider.

The job installs pr-review from its repository at a pinned commit with `uv sync --locked
--no-dev`; here the repository is this one (its HEAD commit) and uv runs offline, its packages
from uv's cache, which `uv sync` filled before the suite. docs/gitlab.md shows the file as it is.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import final_turn
from tests.conftest import GITLAB_TOKEN, PROVIDER_KEY, offline_runner, release_commit
from tests.fakes.gitlab_notes import FakeNotes
from tests.fakes.gitlab_server import FakeGitLab
from tests.fakes.provider_server import ScriptedProvider

# A real process of pr-review installed by uv from a clone: the default run, not --fast.
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
CI_FILE = ROOT / "docs" / "gitlab-ci.yml"
BOT = "pr-review-bot"
PROJECT = "acme/platform/widget"
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
FINDING = {
    "severity": "medium",
    "title": "average() drops the last value",
    "explanation": "The slice stops one short.",
    "path": "a.py",
    "line": 2,
    "evidence": "v[:-1]",
    "recommendation": "Sum every value.",
}


def _job() -> dict[str, Any]:
    document = yaml.safe_load(CI_FILE.read_text())
    assert list(document) == ["pr-review"]  # one job, to paste into a .gitlab-ci.yml
    return dict(document["pr-review"])


def _expand(value: str, environment: dict[str, str]) -> str:
    """GitLab's expansion of `$NAME` and `${NAME}` in a `variables:` value."""
    return _VARIABLE.sub(lambda m: environment.get(m.group(1) or m.group(2), ""), value)


def test_the_job_runs_on_merge_request_pipelines_without_the_merge_requests_code() -> None:
    job = _job()
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    variables = job["variables"]
    assert variables["GIT_STRATEGY"] == "none"
    assert variables["GITLAB_SERVER_URL"] == "$CI_SERVER_URL"
    assert re.fullmatch(r"[0-9a-f]{40}", variables["PR_REVIEW_COMMIT"])
    script = job["script"]
    assert script[0] == 'cd "$(mktemp -d)"'  # no .env or file of anyone's is read
    assert script[-1].startswith(
        './venv/bin/pr-review review "$CI_MERGE_REQUEST_PROJECT_URL/-/merge_requests/'
        '$CI_MERGE_REQUEST_IID" --post'
    )
    assert any("uv sync" in line and "--locked" in line and "--no-dev" in line for line in script)
    # The secrets are masked CI/CD variables, never written in the file.
    text = CI_FILE.read_text()
    assert "GITLAB_TOKEN:" not in text
    assert "OPENCODE_API_KEY:" not in text
    assert "before_script" not in job  # a project's default before_script would run first


def test_docs_show_the_file_as_it_is() -> None:
    guide = (ROOT / "docs" / "gitlab.md").read_text()
    assert "```yaml\n" + CI_FILE.read_text() + "```" in guide


def _run_job(
    fake: FakeGitLab, provider: ScriptedProvider, tmp_path: Path, merge_request_url: str, iid: int
) -> subprocess.CompletedProcess[str]:
    job = _job()
    predefined = {
        "CI": "true",
        "GITLAB_CI": "true",
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_SERVER_URL": fake.server_url,
        "CI_API_V4_URL": fake.api_url,
        "CI_PROJECT_PATH": PROJECT,
        "CI_MERGE_REQUEST_PROJECT_URL": merge_request_url.split("/-/", 1)[0],
        "CI_MERGE_REQUEST_IID": str(iid),
        "CI_PROJECT_DIR": str(tmp_path / "builds" / PROJECT),
    }
    masked = {
        "GITLAB_TOKEN": GITLAB_TOKEN,
        "OPENCODE_API_KEY": PROVIDER_KEY,
        "OPENCODE_BASE_URL": provider.base_url,
    }
    variables = {name: _expand(str(value), predefined) for name, value in job["variables"].items()}
    # This repository's HEAD stands for the pinned release.
    variables.update(PR_REVIEW_REPOSITORY=str(ROOT), PR_REVIEW_COMMIT=release_commit())
    environment = {**offline_runner(tmp_path), **predefined, **masked, **variables}
    Path(predefined["CI_PROJECT_DIR"]).mkdir(parents=True)
    return subprocess.run(
        ["bash", "-c", "set -eo pipefail\n" + "\n".join(job["script"])],
        cwd=predefined["CI_PROJECT_DIR"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.skipif(shutil.which("uv") is None, reason="the job installs pr-review with uv")
def test_the_job_publishes_the_review_on_the_merge_request(
    fake_gitlab: FakeGitLab,
    fake_gitlab_notes: FakeNotes,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
) -> None:
    fake_gitlab.users[GITLAB_TOKEN] = BOT
    merge_request = fake_gitlab.merge_request(
        PROJECT,
        7,
        base={"a.py": "def average(v):\n    return 0\n"},
        head={"a.py": "def average(v):\n    return sum(v[:-1]) / len(v)\n"},
        private=True,
    )
    scripted_provider.script(final_turn(FINDING, summary="One bug."))
    done = _run_job(fake_gitlab, scripted_provider, tmp_path, merge_request.url, 7)
    assert done.returncode == 0, done.stderr[-3000:]
    scripted_provider.assert_complete()
    (note,) = fake_gitlab_notes.plain_notes(PROJECT, 7)
    assert note.author == BOT
    assert f"<!-- pr-review:head={merge_request.head_sha} -->" in note.body
    (discussion,) = fake_gitlab_notes.discussions(PROJECT, 7)
    assert discussion.position is not None
    assert (discussion.position["new_path"], discussion.position["new_line"]) == ("a.py", 2)
    assert fake_gitlab_notes.quick_actions == []
    # The token went only to the fake GitLab, and no secret reached the job's log.
    for request in fake_gitlab.api_requests():
        assert request.private_token == GITLAB_TOKEN
    log = done.stdout + done.stderr
    assert GITLAB_TOKEN not in log
    assert PROVIDER_KEY not in log
