"""Custom checks in every output (specification §20): the text and Markdown reports, SARIF, the
published bodies and the merge gate's summary.

A report shows each check's name, result, explanation and (for a check that did not pass) its
evidence; all of it is repository or model text, escaped by the caller's escaper for where it
goes (inert Markdown on a forge, controls stripped in a terminal). The gate reads the checks'
modes from the base commit's configuration (never from the model): an `error` check that
failed or is inconclusive blocks it whatever `fail_on` says (`blocking`). A review with no
applicable check has no `checks` and every output is byte for byte as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from pr_review_api.model import CheckResult, CheckResultKind
from pr_review_api.output.gate_outcome import BRIEF_RERUN_HINT, RERUN_HINT, CheckOutcome
from pr_review_api.output.inert_markdown import escape, escape_inline

Mode = Literal["warning", "error"]
Escape = Callable[[str], str]

RESULT_WORDS: Mapping[CheckResultKind, str] = {
    "pass": "pass",
    "fail": "FAIL",
    "inconclusive": "inconclusive",
}
GATE_RULE = (
    "An error check that fails or is inconclusive fails the gate, whatever `fail_on` says "
    "(`[[checks]]`: docs/knowledge.md)."
)
_ICONS: Mapping[CheckResultKind, str] = {"pass": "✅", "fail": "❌", "inconclusive": "❔"}


def blocking(results: Sequence[CheckResult], modes: Mapping[str, Mode]) -> list[CheckResult]:
    """The `error` checks that failed or are inconclusive: each makes the gate `failure`."""
    return [r for r in results if modes.get(r.name) == "error" and r.result != "pass"]


def checks_line(results: Sequence[CheckResult]) -> str:
    """`2 checks: 1 pass, 1 fail` (our words only)."""
    counts = {kind: sum(r.result == kind for r in results) for kind in RESULT_WORDS}
    shown = ", ".join(f"{n} {kind}" for kind, n in counts.items() if n)
    return f"{len(results)} check{'' if len(results) == 1 else 's'}: {shown}"


def text_lines(results: Sequence[CheckResult], clean: Escape) -> list[str]:
    """The text report's section: one line per check, its words indented below."""
    lines = [f"Checks: {checks_line(results)}"]
    for result in results:
        lines.append(f"  [{RESULT_WORDS[result.result]}] {clean(result.name)}")
        lines += [f"      {line}" for line in clean(result.explanation).split("\n")]
        if result.result != "pass" and result.evidence:
            lines.append("      Evidence:")
            lines += [f"        {line}" for line in clean(result.evidence).split("\n")]
    return lines


def markdown_section(
    results: Sequence[CheckResult],
    inline: Escape,
    block: Escape,
    modes: Mapping[str, Mode] | None = None,
    heading: str = "###",
) -> str:
    """A Markdown table of the checks (with their modes when known), then the explanation and
    evidence of each check that did not pass. `inline` escapes one line of text (a cell),
    `block` a paragraph, as the destination renders Markdown."""
    head = "| Check | Result |\n|---|---|"
    if modes is not None:
        head = "| Check | Mode | Result |\n|---|---|---|"
    rows = [f"{heading} Checks", "", head]
    for result in results:
        cells = [inline(result.name)]
        if modes is not None:
            cells.append(modes.get(result.name, "warning"))
        cells.append(f"{_ICONS[result.result]} {result.result}")
        rows.append("| " + " | ".join(cells) + " |")
    parts = ["\n".join(rows)]
    for result in results:
        if result.result == "pass":
            continue
        parts.append(f"**{inline(result.name)}** ({result.result}): {block(result.explanation)}")
        if result.evidence:
            parts.append(f"**Evidence:** {block(result.evidence)}")
    return "\n\n".join(parts)


def sarif_properties(results: Sequence[CheckResult]) -> list[dict[str, Any]]:
    """The checks in the SARIF run's property bag (a check has no location to be a result)."""
    return [r.model_dump(mode="json") for r in results]


def gate_with_checks(
    outcome: CheckOutcome, results: Sequence[CheckResult], modes: Mapping[str, Mode]
) -> CheckOutcome:
    """The gate's outcome of a review with its checks: their table (and the evidence of those
    that did not pass) in the summary, and `failure` when an `error` check failed or is
    inconclusive, whatever `fail_on` said. Titles and briefs are ours: counts, no name."""
    if not results:
        return outcome
    section = markdown_section(results, escape_inline, escape, modes)
    summary = f"{outcome.summary}\n\n{section}\n\n{GATE_RULE}"
    blocked = blocking(results, modes)
    if not blocked:
        return replace(outcome, summary=summary)
    failed = sum(r.result == "fail" for r in blocked)
    title = (
        f"{len(blocked)} error check{'' if len(blocked) == 1 else 's'} not passed "
        f"({failed} failed, {len(blocked) - failed} inconclusive)"
    )
    brief = f"{title}; {outcome.brief}" if outcome.brief else title
    return replace(outcome, conclusion="failure", title=title, summary=summary, brief=brief)


_ROW = re.compile(r"^\| (.+) \| (?:✅|❌|❔) (pass|fail|inconclusive) \|$", re.MULTILINE)
NOT_READ_BACK = "This check's result could not be read back from the review published earlier."


def posted_results(body: str | None, names: Iterable[str], inline: Escape) -> list[CheckResult]:
    """The checks' results that our published review's body states (its table, as
    `markdown_section` wrote it; model text is escaped there, so a row is ours), for a head
    published before. A check the body does not show is `inconclusive`: the gate fails closed."""
    rows = {} if body is None else {cell: kind for cell, kind in _ROW.findall(body)}
    results = []
    for name in names:
        kind = rows.get(inline(name), "inconclusive")
        explanation = "" if inline(name) in rows else NOT_READ_BACK
        results.append(CheckResult(name=name, result=kind, explanation=explanation, evidence=""))
    return results


def closed_on_checks(outcome: CheckOutcome, modes: Mapping[str, Mode]) -> CheckOutcome:
    """An outcome decided without the checks' results (no validated review, a review published
    earlier that could not be read back, a skip resting on what the author sets): with an
    applicable `error` check, a `neutral` one fails closed, as `fail_on` does (the author writes
    what the model reads, so a review the author can end early must not pass an error check)."""
    errors = sum(mode == "error" for mode in modes.values())
    if not errors or outcome.conclusion != "neutral":
        return outcome
    checks = f"{errors} error check{'' if errors == 1 else 's'}"
    return replace(
        outcome,
        conclusion="failure",
        title=f"{checks} not decided. {RERUN_HINT}",
        summary=f"{outcome.summary}\n\n{checks} of .pr-review.toml applied to this change and "
        f"could not be decided, so the gate cannot pass it. {RERUN_HINT}",
        brief=f"Failed closed: {checks} not decided. {BRIEF_RERUN_HINT}",
    )
