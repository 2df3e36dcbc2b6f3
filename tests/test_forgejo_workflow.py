"""docs/forgejo-workflow.yml: the Forgejo Actions (and Gitea Actions) workflow, parsed and run as
a Forgejo runner runs it: each `${{ ... }}` expression of the job's `env:` read from the
`github` and `secrets` contexts of a `pull_request_target` event, the step's `run:` script in one
`bash -e` session, against the fake Gitea and the scripted provider.

The workflow installs pr-review from its repository at a pinned commit with `uv sync --locked
--no-dev`; here the repository is this one (its HEAD commit) and uv runs offline, its packages
from uv's cache, which `uv sync` filled before the suite. docs/gitea.md shows the file as it is.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import GITEA_TOKEN, PROVIDER_KEY, offline_runner, release_commit
from tests.fakes.gitea_reviews import GiteaWrites
from tests.fakes.gitea_server import FakeGitea, PullFixture
from tests.fakes.provider_server import ScriptedProvider, stop_turn

# A real process of pr-review installed by uv from a clone: the default run, not --fast.
pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / "docs" / "forgejo-workflow.yml"
BOT = "review-bot"
PATH = "acme/widget"
_EXPRESSION = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}")
FINDING = {
    "severity": "medium",
    "title": "average() drops the last value",
    "explanation": "The slice stops one short.",
    "path": "a.py",
    "line": 2,
    "evidence": "v[:-1]",
    "recommendation": "Sum every value.",
}


def _workflow() -> dict[str, Any]:
    document = yaml.safe_load(WORKFLOW.read_text())
    # YAML 1.1 reads the key `on` as the boolean true.
    return {("on" if key is True else key): value for key, value in document.items()}


def _job() -> dict[str, Any]:
    jobs = _workflow()["jobs"]
    assert list(jobs) == ["pr-review"]  # one job
    return dict(jobs["pr-review"])


def _script() -> str:
    (step,) = _job()["steps"]
    assert "uses" not in step  # no action of anyone's runs, only our script
    return str(step["run"])


def _evaluate(value: str, contexts: dict[str, Any]) -> str:
    """A runner's substitution of `${{ a.b.c }}` (a property path; anything else is refused)."""

    def lookup(match: re.Match[str]) -> str:
        found: Any = contexts
        for name in match.group(1).split("."):
            found = found[name]
        return str(found)

    return _EXPRESSION.sub(lookup, value)


def test_the_workflow_runs_on_pull_request_target_without_the_pull_requests_code() -> None:
    workflow = _workflow()
    # The base branch's file runs, so a pull request cannot change what runs with the secrets.
    assert workflow["on"] == {
        "pull_request_target": {"types": ["opened", "synchronize", "reopened"]}
    }
    job = _job()
    env = job["env"]
    assert env["GITEA_SERVER_URL"] == "${{ github.server_url }}"
    assert env["GITEA_TOKEN"] == "${{ secrets.PR_REVIEW_GITEA_TOKEN }}"
    assert re.fullmatch(r"[0-9a-f]{40}", env["PR_REVIEW_COMMIT"])
    script = _script().splitlines()
    assert script[0] == 'cd "$(mktemp -d)"'  # no .env or file of anyone's is read
    assert script[-1] == './venv/bin/pr-review review "$PULL_REQUEST_URL" --post --automatic'
    assert any("uv sync" in line and "--locked" in line and "--no-dev" in line for line in script)
    # No expression in the script itself: untrusted event fields reach it only as variables.
    assert "${{" not in _script()
    assert "actions/checkout" not in WORKFLOW.read_text()


def test_docs_show_the_file_as_it_is() -> None:
    guide = (ROOT / "docs" / "gitea.md").read_text()
    assert "```yaml\n" + WORKFLOW.read_text() + "```" in guide


def _run_workflow(
    fake: FakeGitea, provider: ScriptedProvider, tmp_path: Path, pull: PullFixture
) -> subprocess.CompletedProcess[str]:
    contexts = {
        "github": {
            "server_url": fake.server_url,
            "api_url": fake.api_url,
            "repository": PATH,
            "event_name": "pull_request_target",
            "event": {"pull_request": {"html_url": pull.url, "number": pull.index}},
        },
        "secrets": {"PR_REVIEW_GITEA_TOKEN": GITEA_TOKEN, "OPENCODE_API_KEY": PROVIDER_KEY},
    }
    job_env = {name: _evaluate(str(value), contexts) for name, value in _job()["env"].items()}
    # This repository's HEAD stands for the pinned release; the provider is the scripted one.
    job_env.update(
        PR_REVIEW_REPOSITORY=str(ROOT),
        PR_REVIEW_COMMIT=release_commit(),
        OPENCODE_BASE_URL=provider.base_url,
    )
    workspace = tmp_path / "workspace" / PATH
    workspace.mkdir(parents=True)
    environment = {
        **offline_runner(tmp_path),
        "GITHUB_TOKEN": "automatic-token-not-used",  # what a runner sets for every step
        **job_env,
    }
    return subprocess.run(
        ["bash", "-e", "-c", _script()],
        cwd=workspace,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.mark.skipif(shutil.which("uv") is None, reason="the workflow installs pr-review with uv")
def test_the_workflow_publishes_the_review_on_the_pull_request(
    fake_gitea: FakeGitea,
    fake_gitea_writes: GiteaWrites,
    scripted_provider: ScriptedProvider,
    tmp_path: Path,
) -> None:
    fake_gitea.add_token(GITEA_TOKEN, BOT)
    fake_gitea.grant(PATH, BOT, "write")
    pull = fake_gitea.pull_request(
        PATH,
        7,
        base={"a.py": "def average(v):\n    return 0\n"},
        head={"a.py": "def average(v):\n    return sum(v[:-1]) / len(v)\n"},
        private=True,
    )
    scripted_provider.script(
        stop_turn(json.dumps({"summary": "One bug.", "findings": [FINDING], "notes": []}))
    )
    done = _run_workflow(fake_gitea, scripted_provider, tmp_path, pull)
    assert done.returncode == 0, done.stderr[-3000:]
    scripted_provider.assert_complete()
    (review,) = fake_gitea_writes.reviews[(pull.repo.id, 7)]
    assert review["user"]["login"] == BOT
    assert f"<!-- pr-review:head={pull.head_sha} -->" in review["body"]
    (comment,) = fake_gitea_writes.review_comments[review["id"]]
    assert (comment["path"], comment["position"]) == ("a.py", 2)
    states = [s["status"] for s in fake_gitea_writes.statuses[(pull.repo.id, pull.head_sha)]]
    assert states == ["pending", "success"]  # no fail_on in the base: the gate passes
    assert fake_gitea_writes.misplaced == []
    # The token went only to the fake Gitea, and no secret reached the job's log.
    assert {r.authorization for r in fake_gitea.api_requests()} == {f"token {GITEA_TOKEN}"}
    log = done.stdout + done.stderr
    assert GITEA_TOKEN not in log
    assert PROVIDER_KEY not in log
