"""action.yml: the composite Action's review step, run as a runner runs it (bash, the step's
environment, RUNNER_TEMP and GITHUB_OUTPUT) against the fake GitHub and the scripted provider.

The step installs pr-review with `uv sync --locked --no-dev` from the action's own folder, so
every user's run gets exactly the versions of uv.lock and none of the development tools. The
test runs uv offline: the packages come from uv's cache, which `uv sync` filled before the suite.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import final_turn
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY, uv_cache_dir
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider

# The Action's step as a runner runs it (uv, a venv, a process): the default run, not --fast.
pytestmark = pytest.mark.e2e


ROOT = Path(__file__).resolve().parents[1]
BOT = "pr-review-bot"
_DEV_ONLY = ("mypy", "ruff", "pytest", "hypothesis", "schemathesis")


def _review_step() -> dict[str, Any]:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    (step,) = [s for s in action["runs"]["steps"] if s.get("id") == "review"]
    return dict(step)


def _locked_versions() -> dict[str, set[str]]:
    """Every version the lock holds of each package: one, or one per range of Python versions
    where the resolution forks (numpy 2.5 needs Python 3.12)."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    versions: dict[str, set[str]] = {}
    for package in lock["package"]:
        if "version" in package:
            versions.setdefault(package["name"], set()).add(package["version"])
    return versions


def _installed(venv: Path) -> dict[str, str]:
    found = {}
    for info in venv.glob("lib/python*/site-packages/*.dist-info"):
        name, version = info.name.removesuffix(".dist-info").rsplit("-", 1)
        found[name.lower().replace("_", "-")] = version
    return found


def _run_step(
    fake_github: FakeGitHub, tmp_path: Path, inputs: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The review step's script, as a runner runs it; the runner's temporary folder."""
    step = _review_step()
    runner_temp = tmp_path / "runner-temp"
    runner_temp.mkdir()
    (runner_temp / "github-output").touch()
    # Every variable the step sets is one this test gives it: a new input needs a test here.
    assert set(step["env"]) == set(inputs)
    home = tmp_path / "home"  # whatever the step writes under HOME stays in the test's folder
    home.mkdir()
    runner = {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        # The packages come from the cache the suite's own `uv sync` filled, wherever the
        # environment puts it (UV_CACHE_DIR, XDG_CACHE_HOME), and the interpreter is this one.
        "UV_CACHE_DIR": uv_cache_dir(),
        "UV_PYTHON": str(Path(sys.executable).resolve()),
        "RUNNER_TEMP": str(runner_temp),
        "GITHUB_OUTPUT": str(runner_temp / "github-output"),
        "GITHUB_STEP_SUMMARY": str(runner_temp / "step-summary.md"),
        "GITHUB_SERVER_URL": fake_github.server_url,
        "GITHUB_API_URL": fake_github.api_url,
        "UV_OFFLINE": "1",
    }
    done = subprocess.run(
        ["bash", "-c", step["run"]],
        cwd=runner_temp,
        env={
            **runner,
            **{k: v.replace("RUNNER_TEMP", str(runner_temp)) for k, v in inputs.items()},
        },
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done, runner_temp


def _inputs(pull_url: str, provider: ScriptedProvider, **changed: str) -> dict[str, str]:
    """The step's environment as a runner gives it from the inputs' defaults."""
    return {
        "INPUT_API_KEY": PROVIDER_KEY,
        "INPUT_OPENCODE_API_KEY": "",
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "PR_URL": pull_url,
        "INPUT_BASE_URL": provider.base_url,
        "INPUT_MODEL": "",
        "PR_REVIEW_MAX_INLINE_COMMENTS": "30",
        "INPUT_MAX_ROUNDS": "",
        "INPUT_MAX_TOOL_CALLS": "",
        "INPUT_TIMEOUT_SECONDS": "",
        "INPUT_REPAIR_ATTEMPTS": "",
        "INPUT_TOLERANT_FINAL_JSON": "",
        "INPUT_INLINE_DIFF_BYTES": "",
        "INPUT_FAIL_ON": "",
        "PR_REVIEW_CHECK_RUNS": "true",
        "FAIL_STEP_ON_CHECK": "false",
        "REVIEW_SUGGESTIONS": "true",
        "WANT_SARIF": "false",
        "ACTION_PATH": str(ROOT),
        "PR_REVIEW_CACHE_DIR": "RUNNER_TEMP/pr-review-cache",
        **changed,
    }


def _outputs(runner_temp: Path) -> dict[str, str]:
    lines = (runner_temp / "github-output").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


HIGH = {
    "severity": "high",
    "title": "Unchecked write",
    "explanation": "x is written without a check.",
    "path": "a.py",
    "line": 1,
    "evidence": "x = 1",
    "recommendation": "Check it.",
}


@pytest.mark.skipif(shutil.which("uv") is None, reason="the Action installs pr-review with uv")
def test_the_action_installs_the_locked_versions_and_publishes_the_review(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path
) -> None:
    fake_github.users[GITHUB_TOKEN] = BOT
    pull = fake_github.pull_request(
        "acme",
        "widget",
        7,
        base={".pr-review.toml": 'fail_on = "high"\n', "README.md": "r\n"},
        head={"a.py": "x = 1\n"},
    )
    scripted_provider.script(
        final_turn(HIGH, summary="S"),
        final_turn(summary="S"),
    )
    done, runner_temp = _run_step(
        fake_github,
        tmp_path,
        _inputs(pull.url, scripted_provider, FAIL_STEP_ON_CHECK="true", INPUT_MAX_ROUNDS="3"),
    )
    # The check failed, and the step was asked to fail with it.
    assert done.returncode == 1, done.stderr[-2000:]
    assert "fail-step-on-check" in done.stderr
    assert len(fake_github.posted("acme", "widget", 7)) == 1
    (run,) = fake_github.runs_on(pull.head_sha)
    assert run["conclusion"] == "failure"
    assert _outputs(runner_temp)["conclusion"] == "failure"
    summary = (runner_temp / "step-summary.md").read_text()
    assert "**failure**" in summary
    assert "**Findings:** 1 high" in summary
    review_url = fake_github.posted("acme", "widget", 7)[0]["html_url"]
    assert f"[The review]({review_url})" in summary
    installed = _installed(runner_temp / "pr-review-venv")
    locked = _locked_versions()
    assert installed["httpx"] in locked["httpx"]
    assert installed["pydantic"] in locked["pydantic"]
    assert [
        name for name in installed if name in locked and installed[name] not in locked[name]
    ] == []
    assert not [name for name in _DEV_ONLY if name in installed]
    assert PROVIDER_KEY not in done.stdout + done.stderr + summary


@pytest.mark.skipif(shutil.which("uv") is None, reason="the Action installs pr-review with uv")
@pytest.mark.parametrize("gated", [False, True])
def test_the_action_takes_the_old_key_name_and_skips_by_the_base_rules(
    fake_github: FakeGitHub, scripted_provider: ScriptedProvider, tmp_path: Path, gated: bool
) -> None:
    config = ('fail_on = "high"\n' if gated else "") + 'skip_labels = ["no-review"]\n'
    fake_github.users[GITHUB_TOKEN] = BOT
    pull = fake_github.pull_request(
        "acme",
        "widget",
        8,
        base={".pr-review.toml": config, "README.md": "r\n"},
        head={"a.py": "x = 1\n"},
        labels=("no-review",),
    )
    inputs = _inputs(
        pull.url,
        scripted_provider,
        INPUT_API_KEY="",
        INPUT_OPENCODE_API_KEY=PROVIDER_KEY,
        FAIL_STEP_ON_CHECK="true",
    )
    done, runner_temp = _run_step(fake_github, tmp_path, inputs)
    # A skip by a label is the author's to lift: with fail_on set it must not pass
    # (specification §16).
    assert done.returncode == (1 if gated else 0), done.stderr[-2000:]
    assert scripted_provider.requests == []  # skipped: --automatic is passed
    assert fake_github.posted("acme", "widget", 8) == []
    (run,) = fake_github.runs_on(pull.head_sha)
    conclusion = "action_required" if gated else "neutral"
    assert run["conclusion"] == conclusion
    assert _outputs(runner_temp)["conclusion"] == conclusion
    assert "skipped: a label matches skip_labels" in (runner_temp / "step-summary.md").read_text()


def test_the_action_asks_for_a_key() -> None:
    step = _review_step()
    done = subprocess.run(
        ["bash", "-c", step["run"]],
        env={"PATH": os.environ["PATH"], "PR_URL": "https://github.com/a/b/pull/1"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "api-key" in done.stderr


def test_every_step_the_action_uses_is_pinned_by_a_full_commit_sha() -> None:
    """A tag can be moved; a 40-hex SHA cannot (docs/publishing.md, "Pinning the Action"): the
    Action pins what it runs as it tells its users to pin it, the release named beside it."""
    text = (ROOT / "action.yml").read_text()
    action = yaml.safe_load(text)
    used = [s["uses"] for s in action["runs"]["steps"] if "uses" in s]
    assert len(used) == 2  # setup-uv and upload-sarif
    for reference in used:
        pin = reference.partition("@")[2]
        assert re.fullmatch(r"[0-9a-f]{40}", pin), reference
        (line,) = [line for line in text.splitlines() if f"uses: {reference}" in line]
        assert re.search(r"#\s*v\d+\.\d+\.\d+$", line), line  # the release, for a reader
