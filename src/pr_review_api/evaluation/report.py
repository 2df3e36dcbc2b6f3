"""The evaluation report: one JSON document, or a text table for people.

Per case and in total: reviews run, the share that ended `final_review`, findings, precision,
recall, F1, tokens, rounds and wall time (specification §13), plus the termination reasons
seen and, when reviews report it, the inspected share of changed files (`coverage`). Unmatched
findings are split into duplicates (of a matched golden issue) and false positives, and the
findings REVIEW_REQUIRE_EVIDENCE dropped are counted. The total carries 95% bootstrap intervals
of precision, recall and F1 over the cases (evaluation/bootstrap.py). Each run that ended
without a review keeps its error: code, fixed message and, for a refused final review, the rule
that failed (`errors`, listed after the table in text and HTML).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from pr_review_api.evaluation import bootstrap
from pr_review_api.evaluation.check_scoring import check_figures, check_intervals, checks_line
from pr_review_api.evaluation.runner import FINAL_REVIEW, CaseReport, ReviewOutcome, RunError
from pr_review_api.evaluation.scoring import Counts, SuggestionCounts
from pr_review_api.evaluation.understanding import (
    run_figures,
    understanding_figures,
    understanding_line,
)
from pr_review_api.settings import Settings

# Settings that change what a review does; recorded so that two reports can be compared.
REPORTED_SETTINGS = (
    "opencode_model",
    "opencode_max_retries",
    "review_max_rounds",
    "review_max_tool_calls",
    "review_max_tool_calls_per_round",
    "review_timeout_seconds",
    "review_repair_attempts",
    "review_tolerant_final_json",
    "review_inline_diff_bytes",
    "review_verify_findings",
    "review_require_evidence",
    "review_suggestions",
    "review_walkthrough",
)


def _ratio(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _figures(outcomes: Sequence[ReviewOutcome]) -> dict[str, Any]:
    reviews = len(outcomes)
    counts = sum((o.counts for o in outcomes), Counts())
    finals = sum(1 for o in outcomes if o.termination_reason == FINAL_REVIEW)
    tokens = sum(o.tokens for o in outcomes)
    rounds = sum(o.rounds for o in outcomes)
    wall = sum(o.wall_seconds for o in outcomes)
    known = [o.coverage for o in outcomes if o.coverage is not None]
    per = max(reviews, 1)
    return {
        "reviews": reviews,
        "final_review": finals,
        "final_review_share": _ratio(finals / reviews) if reviews else None,
        "termination_reasons": dict(
            sorted(Counter(o.termination_reason for o in outcomes).items())
        ),
        "findings": counts.findings,
        "matched_findings": counts.matched_findings,
        "golden": counts.golden,
        "matched_golden": counts.matched_golden,
        "duplicates": counts.duplicates,
        "false_positives": counts.false_positives,
        "ungrounded_dropped": sum(o.ungrounded for o in outcomes),
        "precision": _ratio(counts.precision),
        "recall": _ratio(counts.recall),
        "f1": _ratio(counts.f1),
        "tokens": tokens,
        "tokens_per_review": round(tokens / per, 1),
        "rounds": rounds,
        "rounds_per_review": round(rounds / per, 2),
        "wall_seconds": round(wall, 3),
        "wall_seconds_per_review": round(wall / per, 3),
        "coverage": _ratio(sum(known) / len(known)) if known else None,
        "suggestions": _suggestion_figures(
            sum((o.suggestions for o in outcomes), SuggestionCounts())
        ),
        # specification §21: only when measured, so a report without them reads as before.
        **understanding_figures([o.understood for o in outcomes]),
    }


def _suggestion_figures(counts: SuggestionCounts) -> dict[str, Any]:
    """specification §14: suggestions offered, kept, dropped by rule; fixes of golden issues."""
    return {
        "offered": counts.offered,
        "kept": counts.kept,
        "dropped": dict(counts.dropped),
        "golden_with_fix": counts.golden_with_fix,
        "fixes": counts.fixes,
        "fix_rate": _ratio(counts.fix_rate),
    }


def _error(error: RunError | None) -> dict[str, Any] | None:
    if error is None:
        return None
    return {"code": error.code, "message": error.message, "rule": error.rule}


def errors(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Each run that ended without a review, in corpus order: its case, run and error."""
    return [
        {"case": case["id"], "run": run["run"], **run["error"]}
        for case in document["cases"]
        for run in case.get("runs", [])
        if run.get("error") is not None
    ]


def report_document(
    reports: Sequence[CaseReport], settings: Settings, runs: int, *, jobs: int = 1
) -> dict[str, Any]:
    """The `--format json` document (`jobs`: the reviews run at once, which wall times
    depend on)."""
    cases = []
    for report in reports:
        case = report.case
        cases.append(
            {
                "id": case.id,
                "kind": case.kind,
                "language": case.language,
                "golden_issues": len(case.golden),
                **_figures(report.outcomes),
                "runs": [
                    {
                        "run": o.run,
                        "termination_reason": o.termination_reason,
                        "findings": o.counts.findings,
                        "matched_findings": o.counts.matched_findings,
                        "matched_golden": o.counts.matched_golden,
                        "duplicates": o.counts.duplicates,
                        "ungrounded_dropped": o.ungrounded,
                        "tokens": o.tokens,
                        "rounds": o.rounds,
                        "wall_seconds": round(o.wall_seconds, 3),
                        "coverage": _ratio(o.coverage),
                        "locations": [[f.path, f.line] for f in o.findings],
                        "error": _error(o.error),
                        **({"checks": [asdict(c) for c in o.checks]} if case.checks else {}),
                        **run_figures(o.understood),
                    }
                    for o in report.outcomes
                ],
            }
        )
    every = [o for report in reports for o in report.outcomes]
    per_case = [sum((o.counts for o in report.outcomes), Counts()) for report in reports]
    found = bootstrap.intervals(per_case)
    document: dict[str, Any] = {
        "runs": runs,
        "jobs": jobs,
        "settings": {name: getattr(settings, name, None) for name in REPORTED_SETTINGS},
        "cases": cases,
        "total": {
            "cases": len(reports),
            **_figures(every),
            "intervals": {
                name: None if interval is None else interval.rounded()
                for name, interval in found.items()
            },
        },
        "bootstrap": bootstrap.METHOD,
    }
    scores = [[s for o in report.outcomes for s in o.checks] for report in reports]
    if any(scores):  # specification §20: only for a corpus whose cases expect custom checks
        document["total"]["checks"] = {
            **check_figures([s for case in scores for s in case]),
            "intervals": check_intervals(scores),
        }
    return document


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


_COLUMNS = (
    ("case", "<"),
    ("reviews", ">"),
    ("final", ">"),
    ("findings", ">"),
    ("precision", ">"),
    ("recall", ">"),
    ("F1", ">"),
    ("dup", ">"),
    ("FP", ">"),
    ("tokens/review", ">"),
    ("rounds/review", ">"),
    ("wall s/review", ">"),
    ("coverage", ">"),
)


def _row(name: str, figures: dict[str, Any]) -> list[str]:
    return [
        name,
        str(figures["reviews"]),
        _cell(figures["final_review_share"]),
        str(figures["findings"]),
        _cell(figures["precision"]),
        _cell(figures["recall"]),
        _cell(figures["f1"]),
        str(figures["duplicates"]),
        str(figures["false_positives"]),
        f"{figures['tokens_per_review']:.0f}",
        f"{figures['rounds_per_review']:.1f}",
        f"{figures['wall_seconds_per_review']:.1f}",
        _cell(figures["coverage"]),
    ]


def render_text(document: dict[str, Any]) -> str:
    """A plain table: one row per case, then the total, then the termination reasons."""
    rows = [_row(case["id"], case) for case in document["cases"]]
    rows.append(_row("TOTAL", document["total"]))
    header = [name for name, _ in _COLUMNS]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.ljust(width) if align == "<" else cell.rjust(width)
            for cell, width, (_, align) in zip(cells, widths, _COLUMNS, strict=True)
        ).rstrip()

    out = [line(header), *(line(r) for r in rows[:-1]), "-" * len(line(header)), line(rows[-1])]
    reasons = ", ".join(f"{k} {v}" for k, v in document["total"]["termination_reasons"].items())
    settings = document["settings"]
    out.append("")
    out.append(f"Ended: {reasons or 'no reviews'}.")
    out.extend(_error_lines(document))
    out.append(_intervals_line(document["total"]))
    dropped = document["total"]["ungrounded_dropped"]
    if dropped or settings.get("review_require_evidence"):
        out.append(f"Findings dropped for evidence quoting no code the model received: {dropped}.")
    if settings.get("review_suggestions"):
        out.append(_suggestions_line(document["total"]["suggestions"]))
    if "checks" in document["total"]:
        checks = document["total"]["checks"]
        out.append(checks_line(checks, checks["intervals"]))
    understanding = understanding_line(document["total"])
    if understanding is not None:
        out.append(understanding)
    out.append(
        f"Model {settings['opencode_model']}; {document['runs']} run(s) per case; "
        "final is the share that ended final_review; precision and recall match by path "
        "and line within the golden lines widened by 3; dup counts second findings on a "
        "matched golden issue, FP findings that match none."
    )
    return "\n".join(out)


def _error_lines(document: dict[str, Any]) -> list[str]:
    """One line per run that ended without a review: why, in the error's own fixed words."""
    lines = []
    for error in errors(document):
        rule = "" if error["rule"] is None else f" (rule: {error['rule']})"
        lines.append(
            f"  {error['case']} run {error['run']}: {error['code']}: {error['message']}{rule}"
        )
    return ["Runs that ended without a review:", *lines] if lines else []


def _intervals_line(total: dict[str, Any]) -> str:
    names = {"precision": "precision", "recall": "recall", "f1": "F1"}
    parts = []
    for key, label in names.items():
        interval = total["intervals"][key]
        shown = "-" if interval is None else f"{interval[0]:.2f}-{interval[1]:.2f}"
        parts.append(f"{label} {shown}")
    return (
        f"95% bootstrap intervals over the {total['cases']} cases "
        f"({bootstrap.RESAMPLES} resamples, seed {bootstrap.SEED}): " + ", ".join(parts) + "."
    )


def _suggestions_line(figures: dict[str, Any]) -> str:
    dropped = ", ".join(f"{rule} {n}" for rule, n in figures["dropped"].items()) or "none"
    return (
        f"Suggestions: {figures['offered']} offered, {figures['kept']} kept, dropped {dropped}; "
        f"{figures['fixes']} of {figures['golden_with_fix']} golden issues with a fix fixed "
        f"(rate {_cell(figures['fix_rate'])})."
    )


def render_json(document: dict[str, Any]) -> str:
    """The document as indented JSON."""
    return json.dumps(document, indent=2)
