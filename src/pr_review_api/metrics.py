"""Prometheus metrics (specification §18): one `Metrics` object per process, counted where things
happen, rendered in the text format for `GET /metrics` and `pr-review worker --metrics-port`.

    pr_review_reviews_total{termination_reason}      run_review() ended (loop/run.py)
    pr_review_review_seconds                         how long it took (histogram)
    pr_review_tokens_total{kind}                     prompt/completion tokens a provider billed
    pr_review_tool_calls_total{tool,ok}              tool calls the loop ran
    pr_review_provider_requests_total{outcome}       provider HTTP exchanges (llm/openai_chat.py)
    pr_review_publications_total{status}             publications (github/publish.py)
    pr_review_webhook_deliveries_total{event,outcome}  deliveries (service/webhooks.py)
    pr_review_jobs{status}                           review_jobs rows, read at scrape time

Ownership: `Metrics` owns its own `CollectorRegistry` and is created with the application or
the worker and handed down, like the model client; nothing registers in prometheus-client's
default registry, so two apps in one process (the tests) never share a count.

Labels are bounded: every value comes from a fixed set below and anything else becomes
`other`, so no pull request, repository, user, model text or header can become a series.

`serve`'s embedded worker is a separate process. It runs in prometheus-client's multiprocess
mode (`PROMETHEUS_MULTIPROC_DIR` set for it alone, a folder under the data folder that `serve`
empties under its lock), and `serve`'s scrape adds the samples found there to its own: one
scrape covers the service and its worker. `serve` itself stays in the ordinary mode, so its
counts never depend on which module imported prometheus-client first.
"""

from __future__ import annotations

import logging
import math
import shutil
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from pr_review_api.errors import ReviewError
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.model import Cost, ReviewResult, Usage

logger = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
MULTIPROCESS_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"
OTHER = "other"

# Every label value comes from one of these sets; anything else is counted as "other".
TERMINATION_REASONS = frozenset(
    {
        "final_review",
        "no_changes",
        "max_rounds",
        "max_tool_calls",
        "invalid_tool_call",
        "invalid_model_response",
        "upstream_response_too_large",
        "unsupported_finish_reason",
        "token_budget",
        "review_timeout",
        # A review that failed before or outside the loop is counted by its error code.
        "invalid_request",
        "invalid_pull_request_url",
        "invalid_repository",
        "pull_request_not_found",
        "github_unavailable",
        "gitlab_unavailable",
        "gitea_unavailable",
        "opencode_authentication_failed",
        "opencode_rate_limited",
        "opencode_unavailable",
        "configuration_error",
        "interrupted",
        "cancelled",
    }
)
TOOLS = frozenset(
    {
        "list_repository_files",
        "read_repository_file",
        "search_repository",
        "inspect_git_diff",
    }
)
PROVIDER_OUTCOMES = frozenset(
    {
        "ok",
        "opencode_authentication_failed",
        "opencode_rate_limited",
        "opencode_unavailable",
        "invalid_model_response",
        "upstream_response_too_large",
        "review_timeout",
        "configuration_error",
        "cancelled",
    }
)
PUBLICATION_STATUSES = frozenset({"published", "already_published", "failed"})
WEBHOOK_EVENTS = frozenset(
    {
        "ping",
        "pull_request",
        "pull_request_review",
        "pull_request_review_comment",
        "issue_comment",
        "check_run",
        "check_suite",
        "push",
        "installation",
        "merge_request",  # GitLab (specification §17)
        "note",
    }
)
WEBHOOK_OUTCOMES = frozenset(
    {
        "ok",
        "queued",
        "ignored",
        "invalid_signature",
        "invalid_request",
        "server_busy",
    }
)
JOB_STATUSES = ("queued", "running", "succeeded", "failed", "superseded")
# Reviews last from a second (no changes) to REVIEW_TIMEOUT_SECONDS (300 by default) or more.
REVIEW_SECONDS_BUCKETS = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 180.0, 300.0, 600.0)


def bounded(value: str, allowed: frozenset[str]) -> str:
    """`value` when it is one of `allowed`, else `other`."""
    return value if value in allowed else OTHER


def termination_label(outcome: ReviewResult | BaseException) -> str:
    """The `termination_reason` label of a review's end: its result's reason, the code of the
    contract error it raised, `cancelled` for an interrupt, else `other`."""
    if isinstance(outcome, ReviewError):
        return bounded(outcome.code, TERMINATION_REASONS)
    if isinstance(outcome, BaseException):
        return "cancelled" if not isinstance(outcome, Exception) else OTHER
    return bounded(outcome.termination_reason, TERMINATION_REASONS)


class Metrics:
    """The counters of one process and how to render them (see the module docstring)."""

    def __init__(self, *, worker_directory: Path | None = None) -> None:
        # Samples of `serve`'s embedded worker (multiprocess mode), added to ours at scrape.
        self.worker_directory = worker_directory
        self.registry = CollectorRegistry(auto_describe=True)
        self.reviews = Counter(
            "pr_review_reviews",
            "Reviews ended, by termination reason (or the contract error code).",
            ["termination_reason"],
            registry=self.registry,
        )
        self.review_seconds = Histogram(
            "pr_review_review_seconds",
            "Wall time of a review, checkout and publication included.",
            buckets=REVIEW_SECONDS_BUCKETS,
            registry=self.registry,
        )
        self.tokens = Counter(
            "pr_review_tokens",
            "Tokens the provider reported, by kind.",
            ["kind"],
            registry=self.registry,
        )
        # Labelled, as every counter here: a labelled counter opens its multiprocess file at
        # its first count, never at construction (see the test of a removed folder).
        self.cost = Counter(
            "pr_review_cost_usd",
            "Estimated US dollars of the reviews, at the set prices, by termination reason "
            "(a review that ended with an error counts what it spent before).",
            ["termination_reason"],
            registry=self.registry,
        )
        self.tool_calls = Counter(
            "pr_review_tool_calls",
            "Tool calls the review loop ran, by tool and whether they succeeded.",
            ["tool", "ok"],
            registry=self.registry,
        )
        self.provider_requests = Counter(
            "pr_review_provider_requests",
            "HTTP exchanges with the model provider (retries included), by outcome.",
            ["outcome"],
            registry=self.registry,
        )
        self.publications = Counter(
            "pr_review_publications",
            "Reviews published on a pull request, by status.",
            ["status"],
            registry=self.registry,
        )
        self.webhook_deliveries = Counter(
            "pr_review_webhook_deliveries",
            "Webhook deliveries received, by event and outcome.",
            ["event", "outcome"],
            registry=self.registry,
        )

    # --- counting, called where the events happen -----------------------------------------

    def review_ended(
        self, outcome: ReviewResult | BaseException, seconds: float, spent: Cost | None = None
    ) -> None:
        """A review finished with `outcome` (its result, or what it raised) after `seconds`;
        `spent` is the cost of a review that raised (what it spent before it failed)."""
        with _never_raising():
            self.reviews.labels(termination_label(outcome)).inc()
            self.review_seconds.observe(max(0.0, seconds))
            cost = spent if isinstance(outcome, BaseException) else outcome.cost
            if cost is not None and cost.usd > 0:
                self.cost.labels(termination_label(outcome)).inc(cost.usd)

    def count_tokens(self, usage: Usage) -> None:
        """One provider turn's usage."""
        with _never_raising():
            self.tokens.labels("prompt").inc(max(0, usage.prompt_tokens))
            self.tokens.labels("completion").inc(max(0, usage.completion_tokens))

    def tool_call(self, tool: str, ok: bool) -> None:
        """One tool call the loop ran."""
        with _never_raising():
            self.tool_calls.labels(bounded(tool, TOOLS), "true" if ok else "false").inc()

    def provider_request(self, outcome: str) -> None:
        """One HTTP exchange with the provider ended with `outcome` (`ok` or an error code)."""
        with _never_raising():
            self.provider_requests.labels(bounded(outcome, PROVIDER_OUTCOMES)).inc()

    def publication(self, status: str) -> None:
        """One publication attempt ended with `status`."""
        with _never_raising():
            self.publications.labels(bounded(status, PUBLICATION_STATUSES)).inc()

    def webhook_delivery(self, event: str | None, outcome: str) -> None:
        """One webhook delivery: its event header (any text) and how it was answered."""
        with _never_raising():
            self.webhook_deliveries.labels(
                bounded(event or "", WEBHOOK_EVENTS), bounded(outcome, WEBHOOK_OUTCOMES)
            ).inc()

    # --- rendering --------------------------------------------------------------------------

    def exposition(self, jobs: Mapping[str, int] | None = None) -> bytes:
        """The text format: our counts, the embedded worker's, and `jobs` (status -> rows)
        when the database answered; without it the jobs gauge is left out."""
        scrape = CollectorRegistry(auto_describe=False)
        sources: list[Collector] = [self.registry]
        if self.worker_directory is not None and self.worker_directory.is_dir():
            folder = str(self.worker_directory)
            sources.append(MultiProcessCollector(None, path=folder))  # type: ignore[no-untyped-call]
        scrape.register(_Summed(sources))
        if jobs is not None:
            scrape.register(_JobsCollector(jobs))
        return generate_latest(scrape)


@contextmanager
def _never_raising() -> Iterator[None]:
    """Counting never fails a review: a broken metrics folder is logged, the review goes on."""
    try:
        yield
    except (OSError, ValueError) as exc:
        logger.warning("a metric could not be counted: %s", type(exc).__name__)


class _JobsCollector(Collector):
    """`pr_review_jobs{status}` from one reading of the database (every status, zeros too)."""

    def __init__(self, counts: Mapping[str, int] | None = None) -> None:
        self._counts = counts or {}

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(
            "pr_review_jobs", "Review jobs in the database, by status.", labels=["status"]
        )
        for status in JOB_STATUSES:
            family.add_metric([status], float(self._counts.get(status, 0)))
        yield family


class _Summed(Collector):
    """The families of several collectors, with samples of the same name and labels added
    (our process and the embedded worker count the same families)."""

    def __init__(self, sources: list[Collector]) -> None:
        self._sources = sources

    def collect(self) -> Iterable[Metric]:
        families: dict[str, Metric] = {}
        values: dict[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]] = {}
        for source in self._sources:
            for family in source.collect():
                families.setdefault(family.name, family)
                sums = values.setdefault(family.name, {})
                for sample in family.samples:
                    if sample.name.endswith("_created"):
                        continue  # a creation time is not a count: it is not added up
                    key = (sample.name, tuple(sorted(sample.labels.items())))
                    sums[key] = sums.get(key, 0.0) + sample.value
        for name, family in families.items():
            yield _rebuilt(family, values[name])


def _rebuilt(
    family: Metric, sums: Mapping[tuple[str, tuple[tuple[str, str], ...]], float]
) -> Metric:
    rebuilt = Metric(family.name, family.documentation, family.type, family.unit)
    for (sample_name, labels), value in sorted(sums.items(), key=_sample_order):
        rebuilt.add_sample(sample_name, dict(labels), value)
    return rebuilt


def _sample_order(
    item: tuple[tuple[str, tuple[tuple[str, str], ...]], float],
) -> tuple[str, tuple[tuple[str, str], ...], float]:
    (name, labels), _ = item
    # Histogram buckets in their numeric order (`+Inf` last), the rest by name and labels.
    bound = dict(labels).get("le")
    return name, tuple((k, v) for k, v in labels if k != "le"), _le(bound)


def _le(bound: str | None) -> float:
    if bound is None:
        return 0.0
    try:
        return float(bound)
    except ValueError:
        return math.inf


# --- serve's embedded worker ---------------------------------------------------------------

EMBEDDED_WORKER_FOLDER = "worker-metrics"


def embedded_worker_directory(data_dir: Path) -> Path:
    """Where `serve`'s embedded worker keeps its samples (multiprocess mode)."""
    return data_dir / EMBEDDED_WORKER_FOLDER


def fresh_worker_directory(data_dir: Path) -> Path:
    """The embedded worker's folder, emptied: counts start again with each `serve`. Called
    under the data folder's lock, when no worker of an earlier `serve` can still write."""
    directory = embedded_worker_directory(data_dir)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    return directory


def serve_metrics(settings: Settings) -> Metrics:
    """`serve`'s metrics: with the embedded database, its worker's samples are added in."""
    if settings.pr_review_database_url is not None:
        return Metrics()  # workers elsewhere serve their own (--metrics-port)
    data_dir = settings.pr_review_data_dir.expanduser().resolve()
    return Metrics(worker_directory=embedded_worker_directory(data_dir))


def worker_environment(directory: Path) -> dict[str, str]:
    """The variable that puts a worker process in multiprocess mode, writing to `directory`."""
    return {MULTIPROCESS_VARIABLE: str(directory)}
