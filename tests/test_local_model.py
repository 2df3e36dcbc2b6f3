"""Opt-in: reviews against a real local model served by llama.cpp (../shared/local-model/).

Runs only with PR_REVIEW_LOCAL_MODEL=1 and `-m integration` (the marker is deselected by
default). Point it at the server with PR_REVIEW_LOCAL_MODEL_URL (default
http://127.0.0.1:28431/v1) and PR_REVIEW_LOCAL_MODEL_NAME (default qwen2.5-coder-1.5b):

    ../shared/local-model/fetch.sh /tmp/local-model
    /tmp/local-model/venv/bin/python ../shared/local-model/serve.py \
        /tmp/local-model/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf 28431 qwen2.5-coder-1.5b &
    PR_REVIEW_LOCAL_MODEL=1 uv run pytest -m integration tests/test_local_model.py -s

Weak local models answer in fences, invent paths and repeat calls; what is asserted is that a
review always ends in a validated review or a named termination reason: never a crash, another
exception, or a hang. With the tolerant settings the share of validated reviews is printed.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from pr_review_api.errors import ProviderError, ReviewError, ReviewTerminated
from pr_review_api.loop.run import run_review
from pr_review_api.loop.workspace import LocalTarget
from pr_review_api.settings import Settings, load_settings
from tests.conftest import ORIGINAL_ENVIRONMENT
from tests.gitrepo import GitRepo

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        ORIGINAL_ENVIRONMENT.get("PR_REVIEW_LOCAL_MODEL") != "1",
        reason="set PR_REVIEW_LOCAL_MODEL=1 and serve a local model",
    ),
]

URL = ORIGINAL_ENVIRONMENT.get("PR_REVIEW_LOCAL_MODEL_URL", "http://127.0.0.1:28431/v1")
NAME = ORIGINAL_ENVIRONMENT.get("PR_REVIEW_LOCAL_MODEL_NAME", "qwen2.5-coder-1.5b")
RUNS = int(ORIGINAL_ENVIRONMENT.get("PR_REVIEW_LOCAL_MODEL_RUNS", "3"))
TIMEOUT_SECONDS = 240
TERMINATION_REASONS = {
    "max_rounds",
    "max_tool_calls",
    "invalid_tool_call",
    "invalid_model_response",
    "upstream_response_too_large",
    "unsupported_finish_reason",
    "token_budget",
    "review_timeout",
}

BASE = "def div(a, b):\n    return a / b\n"
HEAD = "def div(a, b):\n    if b == 0:\n        return 0\n    return a // b\n"


def _settings(**tolerant: object) -> Settings:
    return load_settings(
        opencode_api_key="local",
        opencode_base_url=URL,
        opencode_model=NAME,
        review_timeout_seconds=TIMEOUT_SECONDS,
        **tolerant,
    )


def _outcome(tmp_path: Path, settings: Settings) -> str:
    """ "final_review" or the termination reason; anything else fails the test."""
    repo = GitRepo(tmp_path / f"repo-{len(list(tmp_path.iterdir()))}")
    base = repo.commit_files({"app.py": BASE})
    head = repo.commit_files({"app.py": HEAD})
    try:
        result = asyncio.run(run_review(LocalTarget(repo.path, base, head), settings))
    except ReviewTerminated as exc:
        return str(exc.termination_reason)
    except ProviderError as exc:  # the server itself failed: not what this test is about
        pytest.fail(f"the local model server failed: {exc.code}")
    except ReviewError as exc:
        pytest.fail(f"a review against a local model ended with {exc.code}")
    for finding in result.review.findings:
        assert finding.path == "app.py"
    return "final_review"


@pytest.mark.timeout(TIMEOUT_SECONDS + 60)
def test_local_model_review_ends_in_a_review_or_a_named_reason(tmp_path: Path) -> None:
    outcome = _outcome(tmp_path, _settings())
    print(f"strict defaults: {outcome}")
    assert outcome == "final_review" or outcome in TERMINATION_REASONS


@pytest.mark.timeout(RUNS * (TIMEOUT_SECONDS + 60))
def test_local_model_with_tolerant_settings_reports_validated_share(tmp_path: Path) -> None:
    settings = _settings(
        review_tolerant_final_json=True, review_repair_attempts=1, review_inline_diff_bytes=16384
    )
    outcomes = [_outcome(tmp_path, settings) for _ in range(RUNS)]
    validated = outcomes.count("final_review")
    print(f"tolerant settings: {validated} of {RUNS} validated ({outcomes})")
    assert all(o == "final_review" or o in TERMINATION_REASONS for o in outcomes)


def test_local_model_opt_in_reads_the_original_environment() -> None:
    # The autouse fixture strips PR_REVIEW_* from os.environ; the switch is read from the
    # environment as it was, so the opt-in works at all.
    assert "PR_REVIEW_LOCAL_MODEL" not in os.environ
    assert ORIGINAL_ENVIRONMENT["PR_REVIEW_LOCAL_MODEL"] == "1"
