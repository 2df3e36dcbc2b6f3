"""What the review-loop tests share: a small repository to review, a final review, settings
for the scripted provider, and a review run through the socket provider or in process.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest

from pr_review_api.errors import ReviewError, ReviewTerminated
from pr_review_api.llm.testing import ScriptedModel
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.model import ReviewResult
from pr_review_api.settings import Settings, load_settings
from tests import builders
from tests.conftest import PROVIDER_KEY
from tests.fakes.provider_server import ScriptedProvider
from tests.gitrepo import GitRepo

SERVICE = "\n".join(f"line {n}: validate_name(widget.name)" for n in range(1, 213)) + "\n"


# The loop tests' finding: the evidence and recommendation REVIEW's finding has.
finding = partial(
    builders.finding,
    evidence="save executes before validate_name.",
    recommendation="Validate before save.",
)

REVIEW = {
    "summary": "Validation occurs after persistence.",
    "findings": [
        {
            "severity": "high",
            "title": "Validation occurs after the write",
            "explanation": "Invalid state can be saved.",
            "path": "src/widgets/service.py",
            "line": 42,
            "evidence": "save executes before validate_name.",
            "recommendation": "Validate before save.",
        }
    ],
    "notes": ["Inspected source and call sites."],
}


def settings_for(provider: ScriptedProvider, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "opencode_api_key": PROVIDER_KEY,
        "opencode_base_url": provider.base_url,
        "review_timeout_seconds": 30,
        "opencode_max_retries": 0,  # one request per failure; retries have their own tests
    }
    values.update(overrides)
    return load_settings(**values)


def review(
    provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    *,
    include_trace: bool = False,
    **overrides: Any,
) -> ReviewResult:
    repo, base, head = widget
    target = LocalTarget(repo.path, base, head)
    return asyncio.run(
        run_review(
            target, settings_for(provider, **overrides), ReviewOptions(include_trace=include_trace)
        )
    )


def read_call(call_id: str, path: str = "src/widgets/service.py", **extra: Any) -> Any:
    return (call_id, "read_repository_file", {"path": path, **extra})


def expect_failure(
    provider: ScriptedProvider,
    widget: tuple[GitRepo, str, str],
    error: type[ReviewError],
    **overrides: Any,
) -> ReviewError:
    with pytest.raises(error) as caught:
        review(provider, widget, include_trace=True, **overrides)
    if issubclass(error, ReviewTerminated):
        assert caught.value.termination_reason == error.code
    return caught.value


def scripted_review(
    model: ScriptedModel,
    widget: tuple[GitRepo, str, str],
    *,
    include_trace: bool = False,
    **overrides: Any,
) -> ReviewResult:
    repo, base, head = widget
    values: dict[str, Any] = {"opencode_api_key": PROVIDER_KEY, "review_timeout_seconds": 30}
    settings = load_settings(**(values | overrides))
    target = LocalTarget(repo.path, base, head)
    return asyncio.run(
        run_review(target, settings, ReviewOptions(include_trace=include_trace, model=model))
    )
