"""run_review over the forge seam (forge/base.py): a review speaks to its forge only through the
`ChangeForge` it is given (or the one its URL names), in the order specification §§10, 15 and 16
set: open, check, preflight, what was published before, then dismissals and publishing."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from pr_review_api.fetch.cache import PreparedChange
from pr_review_api.forge.base import DismissalQuery, PostedHead, PriorReview
from pr_review_api.forge.gate import GateReporter
from pr_review_api.forge.github import GitHubForge
from pr_review_api.github.client import GitHubClient
from pr_review_api.ledger import PublishLedger
from pr_review_api.llm.testing import ScriptedModel, stop_turn
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget
from pr_review_api.model import Publication, PullRequestInfo, ReviewResult
from pr_review_api.settings import Settings
from tests.conftest import GITHUB_TOKEN, PROVIDER_KEY
from tests.fakes.github_server import FakeGitHub

BASE = "".join(f"line {n}\n" for n in range(1, 11))
EMPTY = {"summary": "Looks fine.", "findings": [], "notes": []}


class RecordingForge(GitHubForge):
    """GitHub as it is, with each step the review asks of it written down."""

    def __init__(self, settings: Settings, github: GitHubClient) -> None:
        super().__init__(settings, github)
        self.calls: list[str] = []

    @asynccontextmanager
    async def open_change(self, url: str) -> AsyncIterator[PreparedChange]:
        self.calls.append("open_change")
        async with super().open_change(url) as prepared:
            yield prepared

    def check_reporter(self, info: PullRequestInfo, head_sha: str) -> GateReporter | None:
        self.calls.append("check_reporter")
        return super().check_reporter(info, head_sha)

    async def ensure_can_publish(self, info: PullRequestInfo) -> None:
        self.calls.append("ensure_can_publish")
        await super().ensure_can_publish(info)

    async def published_in_ledger(
        self, info: PullRequestInfo, head_sha: str, ledger: PublishLedger
    ) -> PostedHead | None:
        self.calls.append("published_in_ledger")
        return await super().published_in_ledger(info, head_sha, ledger)

    async def prior_review(
        self, info: PullRequestInfo, git_dir: Path, head_sha: str, *, force: bool
    ) -> PriorReview:
        self.calls.append("prior_review")
        return await super().prior_review(info, git_dir, head_sha, force=force)

    async def dismissed(self, asked: DismissalQuery) -> Collection[str]:
        self.calls.append("dismissed")
        return await super().dismissed(asked)

    async def publish(
        self, result: ReviewResult, git_dir: Path, **kwargs: Any
    ) -> Publication | None:
        self.calls.append("publish")
        return await super().publish(result, git_dir, **kwargs)


def _review(
    url: str, settings: Settings, model: ScriptedModel, *, post: bool
) -> tuple[ReviewResult, list[str]]:
    async def main() -> tuple[ReviewResult, list[str]]:
        async with GitHubClient(settings) as github:
            forge = RecordingForge(settings, github)
            result = await run_review(
                ChangeTarget(url), settings, ReviewOptions(model=model, post=post, forge=forge)
            )
            return result, forge.calls

    return asyncio.run(main())


def test_a_published_review_goes_through_the_given_forge_in_order(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    fake_github.users[GITHUB_TOKEN] = "pr-review-bot"
    settings = fake_github.settings(
        tmp_path / "cache", token=GITHUB_TOKEN, opencode_api_key=PROVIDER_KEY
    )
    pull = fake_github.pull_request(
        "acme", "widget", 7, base={"a.py": BASE}, head={"a.py": BASE + "line 11\n"}
    )
    result, calls = _review(pull.url, settings, ScriptedModel(stop_turn(EMPTY)), post=True)
    assert result.publication is not None
    assert result.publication.status == "published"
    assert len(fake_github.posted("acme", "widget", 7)) == 1
    assert calls == [
        "open_change",
        "check_reporter",
        "ensure_can_publish",
        "prior_review",
        "dismissed",
        "publish",
    ]
    # The same head again: our review's markers answer through the forge, no model asked.
    idle = ScriptedModel()
    again, calls = _review(pull.url, settings, idle, post=True)
    assert again.termination_reason == "already_published"
    assert idle.requests == []
    assert calls == ["open_change", "check_reporter", "ensure_can_publish", "prior_review"]
    assert len(fake_github.posted("acme", "widget", 7)) == 1


def test_without_post_the_forge_only_opens_the_change(
    fake_github: FakeGitHub, tmp_path: Path
) -> None:
    settings = fake_github.settings(
        tmp_path / "cache", token=GITHUB_TOKEN, opencode_api_key=PROVIDER_KEY
    )
    pull = fake_github.pull_request(
        "acme", "widget", 7, base={"a.py": BASE}, head={"a.py": BASE + "line 11\n"}
    )
    result, calls = _review(pull.url, settings, ScriptedModel(stop_turn(EMPTY)), post=False)
    assert result.publication is None
    assert calls == ["open_change"]
    assert fake_github.posted("acme", "widget", 7) == []
