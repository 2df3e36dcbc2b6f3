"""pr_review_api.metrics: bounded labels, an owner per registry, and the embedded worker's
samples (multiprocess mode, in a real second process) added to the service's own."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pr_review_api.errors import ReviewError
from pr_review_api.metrics import (
    OTHER,
    TERMINATION_REASONS,
    Metrics,
    fresh_worker_directory,
    termination_label,
    worker_environment,
)
from pr_review_api.model import ReviewResult, Usage
from tests.scrape import label_values, value

HOSTILE = [
    "final_review\n# TYPE evil counter",
    '"}\nevil_total 1\n',
    "<script>alert(1)</script>",
    "acme/widget#7",
    "x" * 10_000,
    "",
]


class _HostileError(ReviewError):
    code = "'; DROP TABLE review_jobs; --"


def _result(reason: str) -> ReviewResult:
    # model_construct: a result whose reason the model's own validation would have refused.
    return ReviewResult.model_construct(termination_reason=reason)


@pytest.mark.parametrize("hostile", HOSTILE)
def test_no_hostile_value_ever_becomes_a_label_value(hostile: str) -> None:
    metrics = Metrics()
    metrics.review_ended(_result(hostile), 1.0)
    metrics.tool_call(hostile, ok=True)
    metrics.provider_request(hostile)
    metrics.publication(hostile)
    metrics.webhook_delivery(hostile, hostile)
    text = metrics.exposition().decode()
    for label in ("termination_reason", "tool", "outcome", "status", "event"):
        assert label_values(text, label) == {OTHER}, label
    if hostile:
        assert hostile not in text


def test_an_error_code_outside_the_fixed_set_is_other() -> None:
    assert termination_label(_HostileError()) == OTHER
    assert termination_label(ReviewError()) == OTHER  # the base code, internal_error
    assert termination_label(KeyboardInterrupt()) == "cancelled"
    assert termination_label(RuntimeError("boom")) == OTHER


def test_every_termination_reason_of_the_model_is_a_label_value() -> None:
    for reason in ("final_review", "no_changes"):
        assert termination_label(_result(reason)) == reason
    assert "review_timeout" in TERMINATION_REASONS


def test_two_metrics_objects_never_share_a_count() -> None:
    first, second = Metrics(), Metrics()
    first.count_tokens(Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10))
    first_text = first.exposition().decode()
    second_text = second.exposition().decode()
    assert value(first_text, "pr_review_tokens_total", kind="prompt") == 7
    assert value(second_text, "pr_review_tokens_total", kind="prompt") == 0


def test_the_job_gauge_has_every_status_and_only_when_read() -> None:
    metrics = Metrics()
    assert "pr_review_jobs" not in metrics.exposition().decode()
    text = metrics.exposition({"queued": 3, "succeeded": 2, "bogus": 9}).decode()
    assert value(text, "pr_review_jobs", status="queued") == 3
    assert value(text, "pr_review_jobs", status="succeeded") == 2
    assert value(text, "pr_review_jobs", status="running") == 0
    assert label_values(text, "status") == {
        "queued",
        "running",
        "succeeded",
        "failed",
        "superseded",
    }


_WORKER = textwrap.dedent(
    """
    from pr_review_api.metrics import Metrics
    from pr_review_api.model import Usage

    metrics = Metrics()
    for _ in range(3):
        metrics.review_ended(Exception(), 2.0)
    metrics.tool_call("search_repository", ok=False)
    metrics.count_tokens(Usage(prompt_tokens=100, completion_tokens=1, total_tokens=101))
    """
)


def _run_worker_process(directory: Path) -> None:
    environment = {**os.environ, **worker_environment(directory)}
    subprocess.run([sys.executable, "-c", _WORKER], env=environment, check=True, timeout=60)


def test_the_embedded_workers_samples_are_added_to_the_services(tmp_path: Path) -> None:
    directory = fresh_worker_directory(tmp_path)
    _run_worker_process(directory)
    _run_worker_process(directory)  # a second worker process (a restarted one, say)
    metrics = Metrics(worker_directory=directory)
    metrics.review_ended(Exception(), 0.5)
    metrics.count_tokens(Usage(prompt_tokens=1, completion_tokens=1, total_tokens=2))
    text = metrics.exposition().decode()  # the parser in tests.scrape refuses repeated samples
    assert value(text, "pr_review_reviews_total", termination_reason="other") == 7
    assert value(text, "pr_review_review_seconds_count") == 7
    assert value(text, "pr_review_review_seconds_sum") == 12.5
    assert value(text, "pr_review_review_seconds_bucket", le="1.0") == 1
    assert value(text, "pr_review_review_seconds_bucket", le="2.5") == 7
    assert value(text, "pr_review_review_seconds_bucket", le="+Inf") == 7
    assert value(text, "pr_review_tokens_total", kind="prompt") == 201
    assert value(text, "pr_review_tool_calls_total", tool="search_repository", ok="false") == 2


def test_a_new_serve_starts_its_workers_counts_again(tmp_path: Path) -> None:
    directory = fresh_worker_directory(tmp_path)
    _run_worker_process(directory)
    assert fresh_worker_directory(tmp_path) == directory
    text = Metrics(worker_directory=directory).exposition().decode()
    assert value(text, "pr_review_reviews_total", termination_reason="other") == 0


def test_counting_never_fails_the_review_when_the_folder_is_gone(tmp_path: Path) -> None:
    directory = fresh_worker_directory(tmp_path)
    script = _WORKER.replace(
        "metrics = Metrics()",
        "import shutil, sys\nmetrics = Metrics()\nshutil.rmtree(sys.argv[1])",
    )
    environment = {**os.environ, **worker_environment(directory)}
    done = subprocess.run(
        [sys.executable, "-c", script + "\nprint('went on')", str(directory)],
        check=False,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "went on" in done.stdout
    assert "a metric could not be counted" in done.stderr
    assert str(directory) not in done.stderr
