"""What the merge gate says of a review (specification §16), whatever the forge that shows it.

Pure functions of the review, the repository's `fail_on` and the dismissed fingerprints: the
conclusion (`success`, `failure`, `neutral`; `timed_out` and `action_required` when the gate
fails closed, specification §16), a title, a Markdown summary (counts by severity,
coverage, the review's link), a one-line plain-text `brief` for short fields (a commit
status's description) and the undismissed findings (GitHub's annotations). Each forge's
reporter (github/checks.py's check run, gitlab/status.py's commit status) shows an outcome
its own way. Every text here is ours: model text reaches only `findings`, which a reporter
shows as plain text or not at all.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from pr_review_api.errors import ReviewTimeout
from pr_review_api.model import SEVERITIES, Coverage, Severity
from pr_review_api.output.common import coverage_line
from pr_review_api.output.inert_markdown import escape_inline

# GitHub's check-run conclusions we use; a commit status shows the last three as failing.
Conclusion = Literal["success", "failure", "neutral", "timed_out", "action_required"]
FailOn = Literal["critical", "high", "medium", "low", "info", "none"]
FAILING: frozenset[Conclusion] = frozenset({"failure", "timed_out", "action_required"})
RERUN_HINT = "Re-run the check, or comment `/pr-review review`, to review it again."
# A brief is a commit status's description: a status has no re-run button (specification §16).
BRIEF_RERUN_HINT = "Comment `/pr-review review` to review it again."


@dataclass(frozen=True)
class GateFinding:
    """A finding as the gate sees it: its severity, where it is, and its fingerprint."""

    severity: Severity
    path: str
    line: int | None
    title: str
    message: str
    fingerprint: str


@dataclass(frozen=True)
class CheckOutcome:
    """What the completed check says. `brief`: one plain-text line of ours (empty: the title
    says it); `findings`: the undismissed findings the check lists."""

    conclusion: Conclusion
    title: str
    summary: str
    findings: tuple[GateFinding, ...] = ()
    brief: str = ""


def fails(severity: Severity, fail_on: FailOn) -> bool:
    """Whether a finding of `severity` is at or above `fail_on` ("none": never)."""
    if fail_on == "none":
        return False
    return SEVERITIES.index(severity) <= SEVERITIES.index(fail_on)


def conclusion_of(
    findings: Sequence[GateFinding], fail_on: FailOn, dismissed: Collection[str]
) -> Conclusion:
    """`failure` exactly when an undismissed finding is at or above `fail_on`."""
    blocking = (f for f in findings if f.fingerprint not in dismissed)
    return "failure" if any(fails(f.severity, fail_on) for f in blocking) else "success"


def stricter(base: FailOn, override: FailOn | None) -> FailOn:
    """The stricter of the base's `fail_on` and an operator's override (the Action's input):
    an override can only make the gate fail on more, never relax what the base commit says."""
    if override is None or override == "none":
        return base
    if base == "none":
        return override
    return base if SEVERITIES.index(base) >= SEVERITIES.index(override) else override


def review_outcome(
    findings: Sequence[GateFinding],
    fail_on: FailOn,
    dismissed: Collection[str],
    coverage: Coverage,
    review_url: str | None,
    counts: Counter[Severity] | None = None,
) -> CheckOutcome:
    """The check of a review that ended with a final review. `counts` (severity counts read
    back from a review already posted) stand in for findings the check cannot list."""
    kept = [f for f in findings if f.fingerprint not in dismissed]
    tally = counts if counts is not None else Counter(f.severity for f in kept)
    conclusion = conclusion_of(kept, fail_on, ())
    if counts is not None and fail_on != "none":
        conclusion = (
            "failure" if any(fails(s, fail_on) for s in counts if counts[s]) else conclusion
        )
    total = sum(tally.values())
    shown = ", ".join(f"{tally[s]} {s}" for s in SEVERITIES if tally[s]) or "none"
    if conclusion == "failure":
        title = f"Findings at or above {fail_on}: {shown}"
    else:
        title = f"{total} finding{'' if total == 1 else 's'}" + (f": {shown}" if total else "")
    gate = "never fails" if fail_on == "none" else f"fails on {fail_on} or above"
    lines = [
        f"**Findings:** {shown}",
        "",
        coverage_line(coverage, escape_inline),  # repository paths: inert Markdown
        "",
        f"The gate {gate} (`fail_on`: docs/configuration-file.md).",
    ]
    if review_url:
        lines += ["", f"[The review]({review_url})"]
    brief = f"{title}; {_inspected(coverage)}; the gate {gate}."
    return CheckOutcome(conclusion, title, "\n".join(lines), tuple(kept), brief)


def _inspected(coverage: Coverage) -> str:
    """Coverage as numbers only (no path: a brief is plain text of ours)."""
    total = coverage.changed_files
    if total == 0:
        return "no changed files to inspect"
    files = "file" if total == 1 else "files"
    return f"inspected {coverage.inspected_files} of {total} changed {files}"


_COUNTS_LINE = re.compile(r"^\*\*Findings:\*\* (.{1,200})$", re.MULTILINE)
_COUNT = re.compile(r"(\d{1,4}) (critical|high|medium|low|info)\b")


def severity_counts(body: str) -> Counter[Severity]:
    """The counts by severity that our posted review's body (or merge-request note) states:
    publishing/layout.py and gitlab/note_text.py write "**Findings:** 1 high, 2 low", or
    "none"; model text is escaped there, so the first such line is ours."""
    counts: Counter[Severity] = Counter()
    found = _COUNTS_LINE.search(body)
    if found is None:
        return counts
    for number, severity in _COUNT.findall(found.group(1)):
        counts[severity] += int(number)
    return counts


def unknown_outcome(fail_on: FailOn) -> CheckOutcome:
    """A head published before whose review could not be read back: with `fail_on` set the
    gate fails closed (it cannot tell that nothing blocking was found)."""
    if fail_on != "none":
        return CheckOutcome(
            "failure",
            f"Published earlier; its findings could not be read. {RERUN_HINT}",
            "This head was reviewed and published before, but that review could not be read "
            f"back, so the gate cannot say it passes (`fail_on`: {fail_on}). {RERUN_HINT}",
            brief="Failed closed: this head's earlier review could not be read back. "
            + BRIEF_RERUN_HINT,
        )
    return CheckOutcome(
        "neutral",
        "Published earlier; its findings could not be read",
        "This head was reviewed and published before, but that review could not be read back.",
        brief="Neutral: this head was published earlier; its findings could not be read back.",
    )


def ended_outcome(code: str, fail_on: FailOn) -> CheckOutcome:
    """The check of a review that ended without a final review (`code`: its termination
    reason). With `fail_on` set the gate fails closed (specification §16): the author writes what
    the model reads, so a review the author can make end early must not pass; `timed_out` for the
    review's deadline, `failure` for every other reason."""
    if fail_on == "none":
        return CheckOutcome(
            "neutral",
            "The review ended without a final review",
            f"The review ended with `{code}`; nothing was published.",
            brief=f"Neutral: the review ended without a final review ({code}); "
            "nothing was published.",
        )
    conclusion: Conclusion = "timed_out" if code == ReviewTimeout.code else "failure"
    return CheckOutcome(
        conclusion,
        f"No validated review ({code}). {RERUN_HINT}",
        f"The review ended with `{code}` before a validated final review, so nothing was "
        f"published. The gate fails on {fail_on} or above and cannot pass a head it has not "
        f"reviewed. {RERUN_HINT}",
        brief=f"Failed closed: no validated review ({code}). {BRIEF_RERUN_HINT}",
    )


def skipped_outcome(rule: str, fail_on: FailOn, author_controlled: bool) -> CheckOutcome:
    """The check of an automatic review that a skip rule of the base commit skipped. A rule
    that rests on what the author controls (title, labels) must not pass a gated head: with
    `fail_on` set it is `action_required` (failing), and the rule is evaluated again when the
    title or labels change."""
    if fail_on != "none" and author_controlled:
        return CheckOutcome(
            "action_required",
            f"Action required, skipped: {rule}",
            f"skipped: {rule}. The rule is in .pr-review.toml at the base commit; no review "
            f"ran. The gate fails on {fail_on} or above, so a skipped head does not pass: "
            "change the title or labels so that no rule matches, and the head is reviewed.",
            brief=f"Action required (failing), skipped: {rule}. Change the title or labels to "
            "have it reviewed.",
        )
    return CheckOutcome(
        "neutral",
        f"skipped: {rule}",
        f"skipped: {rule}. The rule is in .pr-review.toml at the base commit; no review ran.",
        brief=f"Neutral, skipped: {rule} (.pr-review.toml); no review ran.",
    )
