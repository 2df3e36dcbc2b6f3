"""The merge gate of one published review (specification §16): the check's outcomes, told to the
forge's reporter (a `GateReporter`: github/checks.py's check run, gitlab/status.py's commit
status) and to `on_outcome` (the CLI's --check-file, the Action). loop/gate.py decides when
each is told; a Gate never raises for the reporter's requests.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pr_review_api.model import Finding, ReviewResult, Severity
from pr_review_api.output.custom_checks import Mode, closed_on_checks, gate_with_checks
from pr_review_api.output.gate_outcome import (
    CheckOutcome,
    FailOn,
    GateFinding,
    ended_outcome,
    review_outcome,
    skipped_outcome,
    stricter,
    unknown_outcome,
)
from pr_review_api.output.inert_markdown import escape_inline
from pr_review_api.output.understanding import with_linked_issues
from pr_review_api.publishing.placement import fingerprint_of, line_texts

# Told every outcome the check is completed with.
OnOutcome = Callable[[CheckOutcome], None]


class GateReporter(Protocol):
    """The gate's mark on the head, as one forge shows it. Neither method raises for the
    forge's answers: a refused or failed request is logged in fixed words and given up."""

    async def start(self) -> None:
        """The review has started on the head (a check `in_progress`, a status `running`)."""

    async def complete(self, outcome: CheckOutcome, review_url: str | None = None) -> None:
        """The review's outcome; `review_url` our published review's page, when known."""


def gate_of(
    reporter: GateReporter | None,
    fail_on: FailOn,
    override: FailOn | None,
    git_dir: Path | None,
    on_outcome: OnOutcome | None = None,
) -> Gate:
    """A review's gate: `fail_on` the base commit's, made stricter (never laxer) by
    `override` (`PR_REVIEW_FAIL_ON`, the Action's `fail-on`: the workflow may come from the
    pull request's own head)."""
    return Gate(reporter, stricter(fail_on, override), git_dir, on_outcome=on_outcome)


@dataclass
class Gate:
    """The check of one review; `reporter` None: nothing to set."""

    reporter: GateReporter | None
    fail_on: FailOn
    git_dir: Path | None = None
    # Fingerprints dismissed in this repository (the comment commands): never fail the check.
    dismissed: Collection[str] = frozenset()
    started_already: bool = False
    # Told every outcome the check is completed with (the CLI's --check-file; the Action).
    on_outcome: OnOutcome | None = None
    # The custom checks' modes by name, from the base commit (specification §20).
    check_modes: Mapping[str, Mode] = field(default_factory=dict)

    async def skipped(self, rule: str, *, author_controlled: bool) -> None:
        """A skip rule stopped the review; `author_controlled`: the rule reads what the
        author sets (title, labels), which must not pass a gated head."""
        outcome = skipped_outcome(rule, self.fail_on, author_controlled)
        # specification §20: a skip the author controls must not pass an error check either.
        await self._complete(
            closed_on_checks(outcome, self.check_modes if author_controlled else {})
        )

    async def started(self) -> None:
        if self.reporter is not None and not self.started_already:
            self.started_already = True
            await self.reporter.start()

    async def ended(self, code: str) -> None:
        """No validated review (`code`: why): neutral, or failing closed with `fail_on` set."""
        await self._complete(closed_on_checks(ended_outcome(code, self.fail_on), self.check_modes))

    async def finished(self, result: ReviewResult, counts: Counter[Severity] | None = None) -> None:
        """The review's check; `counts` read back from a review already posted, when its
        findings are not at hand."""
        if self.reporter is None and self.on_outcome is None:
            return
        if result.termination_reason == "already_published" and counts is None:
            await self._complete(closed_on_checks(unknown_outcome(self.fail_on), self.check_modes))
            return
        if result.termination_reason not in ("final_review", "no_changes", "already_published"):
            await self.ended(result.termination_reason)
            return
        findings = await asyncio.to_thread(self._gate_findings, result)
        url = result.publication.url if result.publication is not None else None
        outcome = review_outcome(
            findings, self.fail_on, self.dismissed, result.coverage, url, counts
        )
        # specification §20: an `error` check that did not pass fails the gate, whatever fail_on
        # says.
        outcome = gate_with_checks(outcome, result.review.check_results(), self.check_modes)
        outcome = with_linked_issues(outcome, result.review, escape_inline)  # specification §21
        await self._complete(outcome, url)

    def _gate_findings(self, result: ReviewResult) -> list[GateFinding]:
        found = result.review.findings
        texts = (
            {}
            if self.git_dir is None
            else line_texts(self.git_dir, result.revisions.head_sha, found)
        )
        return [_gate_finding(f, fingerprint_of(f, texts)) for f in found]

    async def _complete(self, outcome: CheckOutcome, url: str | None = None) -> None:
        if self.on_outcome is not None:
            self.on_outcome(outcome)
        if self.reporter is not None:
            await self.reporter.complete(outcome, url)


def _gate_finding(finding: Finding, fingerprint: str) -> GateFinding:
    return GateFinding(
        severity=finding.severity,
        path=finding.path,
        line=finding.line,
        title=finding.title,
        message=finding.explanation,
        fingerprint=fingerprint,
    )
