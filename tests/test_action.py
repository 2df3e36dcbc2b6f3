"""action.yml: the composite Action's review step, run as a runner runs it (bash, the step's
environment, RUNNER_TEMP and GITHUB_OUTPUT) against the fake GitHub and the scripted provider.

The step installs pr-review with `uv sync --locked --no-dev` from the action's own folder, so
every user's run gets exactly the versions of uv.lock and none of the development tools. The
test runs uv offline: the packages come from uv's cache, which `uv sync` filled before the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider, stop_turn

# The Action's step as a runner runs it (uv, a venv, a process): the default run, not --fast.
pytestmark = pytest.mark.e2e


ROOT = Path(__file__).resolve().parents[1]
BOT = "pr-review-bot"
_DEV_ONLY = ("mypy", "ruff", "pytest", "hypothesis", "schemathesis")


def _review_step() -> dict[str, Any]:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    (step,) = [s for s in action["runs"]["steps"] if s.get("id") == "review"]
    return dict(step)


def _locked_versions() -> dict[str, str]:
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    return {p["name"]: p["version"] for p in lock["package"] if "version" in p}


def _installed(venv: Path) -> dict[str, str]:
    found = {}
    for info in venv.glob("lib/python*/site-packages/*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        found[name.lower().replace("_", "-")] = version
    return found


@pytest.mark.skipif(shutil.which("uv") is None, reason="the Action installs pr-review with uv")
def test_the_action_installs_the_locked_versions_and_publishes_the_review(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    step = _review_step()
    fake_github.users[GITHUB_TOKEN] = BOT
    pull = fake_github.pull_request("acme", "widget", 7, head={"a.py": "x = 1\n"})
    scripted_provider.script(stop_turn(json.dumps({"summary": "S", "findings": [], "notes": []})))
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    output = runner_temp / "github-output"
    output.touch()
    inputs = {
        "OPENCODE_API_KEY": PROVIDER_KEY,
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "PR_URL": pull.url,
        "INPUT_BASE_URL": scripted_provider.base_url,
        "INPUT_MODEL": "",
        "PR_REVIEW_MAX_INLINE_COMMENTS": "30",
        "WANT_SARIF": "false",
        "ACTION_PATH": str(ROOT),
        "PR_REVIEW_CACHE_DIR": str(runner_temp / "pr-review-cache"),
    }
    # Every variable the step sets is one this test gives it: a new input needs a test here.
    assert set(step["env"]) == set(inputs)
    runner = {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_OUTPUT": str(output),
        "GITHUB_SERVER_URL": fake_github.server_url,
        "GITHUB_API_URL": fake_github.api_url,
        "UV_OFFLINE": "1",
    }
    done = subprocess.run(
        ["bash", "-c", step["run"]],
        cwd=runner_temp,
        env={**runner, **inputs},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(fake_github.posted("acme", "widget", 7)) == 1
    installed = _installed(runner_temp / "pr-review-venv")
    locked = _locked_versions()
    assert installed["httpx"] == locked["httpx"]
    assert installed["pydantic"] == locked["pydantic"]
    assert {name: installed[name] for name in installed if name in locked} == {
        name: locked[name] for name in installed if name in locked
    }
    assert not [name for name in _DEV_ONLY if name in installed]
    assert PROVIDER_KEY not in done.stdout + done.stderr
