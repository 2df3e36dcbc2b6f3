"""A corpus case's linked issue (specification §21; docs/eval.md): the issue its change says it
closes, and the verdict a review should give on it."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class LinkedIssueCase(BaseModel):
    """`[linked_issue]` of a case file: the issue's title and body, and whether the change does
    what it asks (`expected`; a review's `unclear` never matches it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    title: Annotated[str, Field(min_length=1, max_length=8192)]
    body: Annotated[str, Field(max_length=8192)] = ""
    expected: Literal["yes", "partly", "no"]


def absent(value: object) -> bool:
    """Whether an optional field is left out of the built corpus (it is None)."""
    return value is None


class WithLinkedIssue(BaseModel):
    """A case's optional `linked_issue`, in the source and the built corpus alike (absent from
    corpus.json unless the case has one: older corpora read as before)."""

    linked_issue: LinkedIssueCase | None = Field(default=None, exclude_if=absent)
