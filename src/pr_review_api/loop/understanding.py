"""Understanding the change (specification §21): what the final review gains when the walkthrough is
on (loop/walkthrough.py) or linked issues were read (loop/linked_issues.py).

`Understanding` is what one conversation must answer: the files its walkthrough names (None:
no walkthrough) and the issues it judges. It adds its fields to the final-review schema and its
rules to the system message; with neither, the schema, the prompts and the documents are
exactly as before (tests hold them byte for byte). The stop-turn checks take its fields out of
the model's JSON (`split_document`), validate the rest as section 8's review, then these
(`attach`): a failure is a final-review check failure in fixed words, never published.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import MISSING, BaseModel, ValidationError

from pr_review_api.jsonutil import truncate_utf8
from pr_review_api.loop.linked_issues import (
    LINKED_ISSUES_RULES,
    LINKED_ISSUES_SCHEMA,
    NO_LINKED_ISSUES,
    LinkedIssues,
    linked_issues_problem,
)
from pr_review_api.loop.walkthrough import (
    WALKTHROUGH_RULES,
    WALKTHROUGH_SCHEMA,
    batch_files,
    merge_walkthroughs,
    walkthrough_problem,
)
from pr_review_api.model import FinalReview, LinkedIssue, WalkthroughEntry
from pr_review_api.settings import MAX_FINAL_TEXT_BYTES

WALKTHROUGH = "walkthrough"
LINKED_ISSUES = "linked_issues"
FIELD_NAMES = frozenset(
    {WALKTHROUGH, LINKED_ISSUES, "paths", "summary", "ref", "addressed", "explanation"}
)
Problem = tuple[str, str]  # (the contract's sentence, the repair turn's words)
# A problem and the rule it broke (FinalReviewRejected.rule): "schema", or the field's name.
Rejection = tuple[str, str, str]
Entry = TypeVar("Entry", bound=BaseModel)


@dataclass(frozen=True)
class Understanding:
    """What one conversation's final review must add: a walkthrough of `walkthrough` (the
    files it names; None: off) and a verdict on each of `linked.issues`."""

    walkthrough: tuple[str, ...] | None = None
    linked: LinkedIssues = field(default=NO_LINKED_ISSUES)

    @property
    def fields(self) -> tuple[str, ...]:
        """The review's fields this adds, in the schema's order."""
        on = (self.walkthrough is not None, bool(self.linked.issues))
        return tuple(
            name for name, wanted in zip((WALKTHROUGH, LINKED_ISSUES), on, strict=True) if wanted
        )

    def for_batch(self, batch: Collection[str]) -> Understanding:
        """A batch's share (loop/batches.py): the walkthrough of its own files."""
        if self.walkthrough is None:
            return self
        return replace(self, walkthrough=batch_files(self.walkthrough, batch))


NO_UNDERSTANDING = Understanding()
_SCHEMAS: dict[str, dict[str, Any]] = {
    WALKTHROUGH: WALKTHROUGH_SCHEMA,
    LINKED_ISSUES: LINKED_ISSUES_SCHEMA,
}
_RULES = {WALKTHROUGH: WALKTHROUGH_RULES, LINKED_ISSUES: LINKED_ISSUES_RULES}


def extended_schema(schema: dict[str, Any], understanding: Understanding) -> dict[str, Any]:
    """`schema` with the fields `understanding` adds (required), or `schema` itself."""
    names = understanding.fields
    if not names:
        return schema
    extended = copy.deepcopy(schema)
    for name in names:
        extended["properties"][name] = _SCHEMAS[name]
    extended["required"] = [*extended["required"], *names]
    return extended


def understanding_rules(understanding: Understanding) -> str:
    """The system message's rules for the fields `understanding` adds ("" for none)."""
    return "".join(_RULES[name] for name in understanding.fields)


def split_document(
    document: object, understanding: Understanding
) -> tuple[object, dict[str, object], Problem | None]:
    """(the document without our fields, our fields, the problem): a field of ours that this
    review did not ask for is an unknown field, as specification §8's schema makes it."""
    if not isinstance(document, dict):
        return document, {}, None
    wanted = understanding.fields
    for name in (WALKTHROUGH, LINKED_ISSUES):
        if name in document and name not in wanted:
            return (
                document,
                {},
                (
                    f'The final review has the unknown field "{name}" at the top level.',
                    f'Your final review has the unknown field "{name}" at the top level.',
                ),
            )
    rest = {key: value for key, value in document.items() if key not in wanted}
    ours = {key: document[key] for key in wanted if key in document}
    return rest, ours, None


def attach(
    review: FinalReview, ours: dict[str, object], understanding: Understanding
) -> FinalReview | Rejection:
    """The review with our fields, validated against the change (not the model's word)."""
    update: dict[str, object] = {}
    if understanding.walkthrough is not None:
        entries = _entries(ours, WALKTHROUGH, WalkthroughEntry)
        if isinstance(entries, tuple):
            return (*entries, "schema")
        problem = walkthrough_problem(entries, understanding.walkthrough)
        if problem is not None:
            return (*problem, WALKTHROUGH)
        update[WALKTHROUGH] = entries
    if understanding.linked.issues:
        verdicts = _entries(ours, LINKED_ISSUES, LinkedIssue)
        if isinstance(verdicts, tuple):
            return (*verdicts, "schema")
        problem = linked_issues_problem(verdicts, understanding.linked.refs)
        if problem is not None:
            return (*problem, LINKED_ISSUES)
        update[LINKED_ISSUES] = verdicts
    return review.model_copy(update=update) if update else review


def _entries(ours: dict[str, object], name: str, model: type[Entry]) -> list[Entry] | Problem:
    value = ours.get(name)
    if not isinstance(value, list):
        return (
            f'The final review does not match its schema at "{name}".',
            f'Your final review must carry "{name}" as the schema says.',
        )
    entries: list[Entry] = []
    for index, item in enumerate(value, start=1):
        try:
            entries.append(model.model_validate(item))
        except ValidationError:
            return (
                f"The final review does not match its schema at {name}.{index}.",
                f"Your final review does not match the schema at {name}.{index}.",
            )
    return entries


def merge_understanding(reviews: Sequence[FinalReview]) -> dict[str, object]:
    """What batched reviews' fields become in the merged review: the walkthroughs' entries in
    batch order; one verdict per issue (the batches' when they agree, else "partly" when one
    found it addressed, "unclear" when none did), with each batch's explanation."""
    merged: dict[str, object] = {}
    if any(review.walkthrough is not MISSING for review in reviews):
        merged[WALKTHROUGH] = merge_walkthroughs([r.walkthrough_entries() for r in reviews])
    by_ref: dict[str, list[tuple[int, LinkedIssue]]] = {}
    for number, review in enumerate(reviews, start=1):
        for verdict in review.linked_issue_verdicts():
            by_ref.setdefault(verdict.ref, []).append((number, verdict))
    if by_ref:
        merged[LINKED_ISSUES] = [_merged_verdict(ref, found) for ref, found in by_ref.items()]
    return merged


def _merged_verdict(ref: str, found: list[tuple[int, LinkedIssue]]) -> LinkedIssue:
    verdicts = {verdict.addressed for _, verdict in found}
    if len(verdicts) == 1:
        addressed = next(iter(verdicts))
    elif verdicts & {"yes", "partly"}:
        addressed = "partly"
    else:
        addressed = "unclear"
    if len(found) == 1:
        explanation = found[0][1].explanation
    else:
        explanation = " ".join(f"Batch {n}: {v.explanation}" for n, v in found)
    return LinkedIssue(
        ref=ref, addressed=addressed, explanation=truncate_utf8(explanation, MAX_FINAL_TEXT_BYTES)
    )
