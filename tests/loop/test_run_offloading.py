"""run_review() against a hostile base commit, and the event loop it must never hold.

A worker's heartbeats, the review's deadline and stalled-job recovery all run on the event loop
that runs the review, so no work a repository or a model can make large may run on it. These
tests drive real reviews (a real git repository, the scripted provider over loopback HTTP).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from pr_review_api.github import publish, review_requests
from pr_review_api.llm import openai_chat
from pr_review_api.loop import engine as engine_module
from pr_review_api.loop import review as review_module
from pr_review_api.loop import verify
from pr_review_api.loop.coverage import CoverageTracker
from pr_review_api.loop.repo_config import NOTE_DROPPED
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget, LocalTarget
from pr_review_api.model import ReviewResult
from pr_review_api.settings import load_settings
from tests import builders
from tests.builders import final_turn
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub
from tests.fakes.provider_server import ScriptedProvider, stop_turn, tool_call_turn
from tests.gitrepo import GitRepo

HOSTILE = "**a" * 40 + "**b"  # exponential for a backtracking matcher
# A folder of a's: the hostile glob's every `a` matches, its `b` never comes.
DEEP_PATH = "/".join(["a" * 40] * 4) + "/aaaa.py"
SOURCE = "def save(item):\n    store.write(item)\n"
SOURCE_HEAD = SOURCE + "    return item\n"
WAIT_SECONDS = 10.0  # a deadline the test sets: the loop must tick long before it


_finding = partial(
    builders.finding, title="t", line=2, explanation="x", evidence="x", recommendation="x"
)


def _hostile_review(repo: GitRepo, provider: ScriptedProvider) -> ReviewResult:
    """A base commit whose `.pr-review.toml` holds the hostile glob, reviewed once: one read,
    then a final review with a finding on the deep path and one on app.py."""
    config = f'exclude = ["{HOSTILE}", "{HOSTILE}/", "/{HOSTILE}", "app.py"]\n'
    base = repo.commit_files(
        {".pr-review.toml": config, DEEP_PATH: SOURCE, "app.py": SOURCE}, "base"
    )
    head = repo.commit_files({DEEP_PATH: SOURCE_HEAD, "app.py": SOURCE_HEAD}, "head")
    read = {"path": DEEP_PATH, "start_line": 1, "end_line": 3}
    provider.script(
        tool_call_turn([("call-1", "read_repository_file", read)]),
        stop_turn(
            {
                "summary": "s",
                "findings": [_finding(path=DEEP_PATH), _finding(path="app.py")],
                "notes": [],
            }
        ),
    )
    settings = load_settings(opencode_api_key="key", opencode_base_url=provider.base_url)
    result = asyncio.run(run_review(LocalTarget(repo.path, base, head), settings))
    provider.assert_complete()
    return result


def test_a_hostile_exclude_glob_leaves_the_review_to_finish(
    repo: GitRepo, scripted_provider: ScriptedProvider
) -> None:
    result = _hostile_review(repo, scripted_provider)
    assert result.termination_reason == "final_review"
    # The hostile globs match nothing here; the plain one still drops its finding.
    assert [finding.path for finding in result.review.findings] == [DEEP_PATH]
    assert result.review.notes == [NOTE_DROPPED.format(count=1)]
    assert result.coverage.inspected_files == 1


class _Heartbeat:
    """A coroutine that ticks on the review's event loop, and work that waits for its ticks.

    `blocking(function)` wraps a step of the review: before the real step runs, it waits (at
    most WAIT_SECONDS) until the heartbeat has ticked three more times. On a worker thread the
    ticks come at once; on the event loop itself they cannot come at all, and the wait fails.
    """

    def __init__(self) -> None:
        self.ticks = 0
        self.ticked = threading.Condition()
        self.waits: list[bool] = []
        self.on_loop_thread: list[bool] = []
        self.loop_thread: threading.Thread | None = None

    async def beat(self) -> None:
        self.loop_thread = threading.current_thread()
        while True:
            with self.ticked:
                self.ticks += 1
                self.ticked.notify_all()
            await asyncio.sleep(0.001)

    def blocking(self, function: Callable[..., Any]) -> Callable[..., Any]:
        def step(*args: Any, **kwargs: Any) -> Any:
            self.on_loop_thread.append(threading.current_thread() is self.loop_thread)
            with self.ticked:
                wanted = self.ticks + 3
                self.waits.append(
                    self.ticked.wait_for(lambda: self.ticks >= wanted, timeout=WAIT_SECONDS)
                )
            return function(*args, **kwargs)

        return step


STEPS: dict[str, tuple[object, str]] = {
    "the repository configuration applied to the findings": (review_module, "apply_repo_config"),
    "the checks of a model turn": (engine_module, "check_turn"),
    "the coverage of a tool result": (CoverageTracker, "saw_tool_result"),
    "the provider's body parsed": (openai_chat, "_parse_object"),
    "the verdict of the verification pass": (verify, "parse_verdict"),
}


@pytest.mark.parametrize("step", list(STEPS))
def test_the_event_loop_keeps_ticking_while_a_review_works(
    repo: GitRepo,
    scripted_provider: ScriptedProvider,
    monkeypatch: pytest.MonkeyPatch,
    step: str,
) -> None:
    owner, name = STEPS[step]
    heartbeat = _Heartbeat()
    monkeypatch.setattr(owner, name, heartbeat.blocking(getattr(owner, name)))

    async def review_beside_a_heartbeat(target: LocalTarget) -> ReviewResult:
        beating = asyncio.create_task(heartbeat.beat())
        try:
            settings = load_settings(
                opencode_api_key="key",
                opencode_base_url=scripted_provider.base_url,
                review_verify_findings=True,
            )
            return await run_review(target, settings)
        finally:
            beating.cancel()

    base = repo.commit_files({"app.py": SOURCE, ".pr-review.toml": f'exclude = ["{HOSTILE}"]'})
    head = repo.commit_files({"app.py": SOURCE_HEAD}, "head")
    scripted_provider.script(
        tool_call_turn([("call-1", "read_repository_file", {"path": "app.py"})]),
        final_turn(_finding(path="app.py"), summary="s"),
        stop_turn({"verdict": "confirmed", "evidence": "store.write(item)"}),
    )
    result = asyncio.run(review_beside_a_heartbeat(LocalTarget(repo.path, base, head)))
    scripted_provider.assert_complete()
    assert [finding.path for finding in result.review.findings] == ["app.py"]
    assert heartbeat.waits  # the step ran
    assert heartbeat.on_loop_thread == [False] * len(heartbeat.waits)
    assert heartbeat.waits == [True] * len(heartbeat.waits)


@pytest.mark.parametrize(
    ("module", "name"), [(review_requests, "_payload"), (publish, "render_review_body")]
)
def test_the_event_loop_keeps_ticking_while_a_review_is_rendered_for_publishing(
    fake_github: FakeGitHub,
    scripted_provider: ScriptedProvider,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    module: Any,
    name: str,
) -> None:
    heartbeat = _Heartbeat()
    monkeypatch.setattr(module, name, heartbeat.blocking(getattr(module, name)))
    fake_github.users.setdefault(GITHUB_TOKEN, "pr-review-bot")
    settings = fake_github.settings(
        tmp_path / "cache",
        token=GITHUB_TOKEN,
        opencode_api_key=PROVIDER_KEY,
        opencode_base_url=scripted_provider.base_url,
    )
    fixture = fake_github.pull_request(
        "acme", "widget", 7, base={"app.py": SOURCE}, head={"app.py": SOURCE_HEAD}
    )
    scripted_provider.script(final_turn(_finding(path="app.py"), summary="s"))

    async def review_beside_a_heartbeat() -> ReviewResult:
        beating = asyncio.create_task(heartbeat.beat())
        try:
            return await run_review(ChangeTarget(fixture.url), settings, ReviewOptions(post=True))
        finally:
            beating.cancel()

    result = asyncio.run(review_beside_a_heartbeat())
    assert result.publication is not None
    assert result.publication.status == "published"
    assert len(fake_github.posted("acme", "widget", 7)) == 1
    assert heartbeat.waits
    assert heartbeat.on_loop_thread == [False] * len(heartbeat.waits)
    assert heartbeat.waits == [True] * len(heartbeat.waits)
