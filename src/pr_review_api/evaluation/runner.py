"""Reviewing every case of a built corpus through `run_review()`.

By default reviews run one after another, so wall times are comparable and a shared machine is
not flooded; `jobs` reviews that many at once (for a hosted provider), and the outcomes still
come back in corpus order. A review that ends without a final review is an outcome, not a
failure of the evaluation: its termination reason (or the error code) is counted, with the
error's code, its fixed message and, for a final review the checks refused, the rule that
failed (`RunError`); it has no findings, and its case's golden issues count as missed. Its
tokens and rounds are what the review spent before it ended (`ReviewError.run`), the failing
turn's included.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from pr_review_api.errors import ReviewError
from pr_review_api.evaluation.check_scoring import CheckScore, check_scores
from pr_review_api.evaluation.corpus import BuiltCase, BuiltCorpus
from pr_review_api.evaluation.scoring import (
    Counts,
    Kept,
    Located,
    SuggestionCounts,
    fix_count,
    score_review,
)
from pr_review_api.evaluation.understanding import Understood, case_issues, understood
from pr_review_api.git.store import RepositoryStore
from pr_review_api.git_runner import GitError, run_git
from pr_review_api.loop.evidence import ungrounded_count
from pr_review_api.loop.final_review import FinalReviewRejected
from pr_review_api.loop.run import Progress, ReviewOptions, run_review
from pr_review_api.loop.suggestions import dropped_rules
from pr_review_api.loop.workspace import LocalTarget, repository_store
from pr_review_api.model import ReviewResult
from pr_review_api.settings import Settings

FINAL_REVIEW = "final_review"
# `eval --jobs`: at most this many reviews at once.
MAX_EVAL_JOBS = 16


@dataclass(frozen=True)
class RunError:
    """Why a review ended without a review: the error's code and fixed message (never model
    text, specification §5), and for a refused final review the check that failed."""

    code: str
    message: str
    rule: str | None = None

    @classmethod
    def of(cls, error: ReviewError) -> RunError:
        rule = error.rule if isinstance(error, FinalReviewRejected) else None
        return cls(error.code, error.message, rule)


@dataclass(frozen=True)
class ReviewOutcome:
    """One review of one case."""

    case_id: str
    run: int
    termination_reason: str  # "final_review", a termination reason or another error code
    findings: list[Located]
    counts: Counts
    tokens: int
    rounds: int
    wall_seconds: float
    coverage: float | None  # inspected share of changed files, when the review reports it
    # Findings REVIEW_REQUIRE_EVIDENCE dropped (loop/evidence.py), read from the review's notes.
    ungrounded: int = 0
    suggestions: SuggestionCounts = field(default_factory=SuggestionCounts)
    error: RunError | None = None  # None when the review ended with a review
    # The case's expected custom checks and the results the review gave (specification §20).
    checks: tuple[CheckScore, ...] = ()
    # specification §21: the walkthrough's coverage and the linked-issue verdict (when measured).
    understood: Understood = field(default_factory=Understood)


@dataclass(frozen=True)
class CaseReport:
    """A case and its reviews, in the order they ran."""

    case: BuiltCase
    outcomes: list[ReviewOutcome] = field(default_factory=list)


OutcomeCallback = Callable[[int, int, ReviewOutcome], None]


def coverage_share(result: ReviewResult) -> float:
    """Inspected files over changed files, from the review document's `coverage` (specification §5);
    a change with no changed files counts as fully inspected."""
    coverage = result.coverage
    if not coverage.changed_files:
        return 1.0
    return min(1.0, coverage.inspected_files / coverage.changed_files)


async def review_case(
    folder: Path,
    case: BuiltCase,
    run: int,
    settings: Settings,
    store: RepositoryStore | None = None,
) -> ReviewOutcome:
    """Review one case once and score it."""
    seen = {"round": 0, "tokens": 0}

    def progress(update: Progress) -> None:
        seen["round"] = max(seen["round"], update.round)
        seen["tokens"] = max(seen["tokens"], update.usage.total_tokens)

    repository = folder / case.repository
    target = LocalTarget(repository, case.base, case.head, linked=case_issues(case))
    walkthrough = settings.review_walkthrough
    started = time.perf_counter()
    error: RunError | None
    try:
        result = await run_review(target, settings, ReviewOptions(progress=progress, store=store))
    except ReviewError as exc:
        reason = exc.termination_reason or exc.code
        error = RunError.of(exc)
        if exc.run is not None:  # what the review spent, the failing turn's included
            seen["tokens"] = max(seen["tokens"], exc.run.usage.total_tokens)
            seen["round"] = max(seen["round"], exc.run.rounds)
    except Exception:  # a bug ends this review, never the whole evaluation
        reason = "internal_error"
        error = RunError(reason, "The review failed unexpectedly.")
    else:
        wall = time.perf_counter() - started
        suggestions = _suggestions(repository, case, result)
        scored = _scored(case, run, result, wall, suggestions)
        seen_now = understood(case, repository, result, walkthrough=walkthrough)
        return replace(scored, understood=seen_now)
    wall = time.perf_counter() - started
    counts = score_review([], case.golden)
    missed = SuggestionCounts(golden_with_fix=_with_fix(case))
    return ReviewOutcome(
        case.id,
        run,
        reason,
        [],
        counts,
        seen["tokens"],
        seen["round"],
        wall,
        None,
        suggestions=missed,
        error=error,
        checks=check_scores(case.checks, None),
        understood=understood(case, repository, None, walkthrough=walkthrough),
    )


def _with_fix(case: BuiltCase) -> int:
    return sum(1 for issue in case.golden if issue.fix is not None)


def _suggestions(repository: Path, case: BuiltCase, result: ReviewResult) -> SuggestionCounts:
    """Kept, dropped by rule, and fixes of one review's suggestions (specification §14)."""
    kept = [
        Kept(f.path, s.start_line, s.end_line, s.replacement)
        for f in result.review.findings
        if (s := f.offered()) is not None
    ]
    fixable = {issue.path for issue in case.golden if issue.fix is not None}
    wanted = fixable & {k.path for k in kept}
    heads = _head_lines(repository, case.head, wanted)
    return SuggestionCounts(
        kept=len(kept),
        dropped=dict(sorted(Counter(dropped_rules(result.review)).items())),
        golden_with_fix=_with_fix(case),
        fixes=fix_count(kept, case.golden, heads),
    )


def _head_lines(repository: Path, head: str, paths: set[str]) -> dict[str, list[str]]:
    """The lines of each path at the case's head (a file that cannot be read is left out)."""
    lines: dict[str, list[str]] = {}
    for path in sorted(paths):
        try:
            found = run_git(repository / ".git", ["cat-file", "blob", f"{head}:{path}"], timeout=30)
        except (GitError, OSError, subprocess.SubprocessError):
            continue
        text = found.stdout.decode("utf-8", "replace").replace("\r\n", "\n")
        lines[path] = text.removesuffix("\n").split("\n")
    return lines


def _scored(
    case: BuiltCase, run: int, result: ReviewResult, wall: float, suggestions: SuggestionCounts
) -> ReviewOutcome:
    findings = [Located(f.path, f.line) for f in result.review.findings]
    return ReviewOutcome(
        case_id=case.id,
        run=run,
        termination_reason=str(result.termination_reason),
        findings=findings,
        counts=score_review(findings, case.golden),
        tokens=result.usage.total_tokens,
        rounds=result.rounds,
        wall_seconds=wall,
        coverage=coverage_share(result),
        ungrounded=ungrounded_count(result.review.notes),
        suggestions=suggestions,
        checks=check_scores(case.checks, result),
    )


async def run_corpus(
    folder: Path,
    corpus: BuiltCorpus,
    settings: Settings,
    *,
    runs: int = 1,
    cases: Sequence[str] | None = None,
    on_outcome: OutcomeCallback | None = None,
    jobs: int = 1,
) -> list[CaseReport]:
    """Review every case (or the named ones) `runs` times, at most `jobs` reviews at once;
    each case's outcomes in run order, whatever order they finished in."""
    settings.require_provider_key()
    chosen = [c for c in corpus.cases if cases is None or c.id in cases]
    reports = [CaseReport(case) for case in chosen]
    plan = [(run, report) for run in range(1, runs + 1) for report in reports]
    slots = asyncio.Semaphore(max(1, min(jobs, MAX_EVAL_JOBS)))
    done = 0
    # One store for the whole evaluation: a case reviewed again starts from its cached index.
    with repository_store(settings) as store:

        async def one(run: int, report: CaseReport) -> ReviewOutcome:
            nonlocal done
            async with slots:
                outcome = await review_case(folder, report.case, run, settings, store)
            done += 1
            if on_outcome is not None:
                on_outcome(done, len(plan), outcome)
            return outcome

        outcomes = await asyncio.gather(*(one(run, report) for run, report in plan))
    for (_, report), outcome in zip(plan, outcomes, strict=True):
        report.outcomes.append(outcome)
    return reports
