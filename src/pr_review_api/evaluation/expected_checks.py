"""What a case of the corpus expects of its custom checks (specification §20): the `[[checks]]` of a
case file (evaluation/corpus.py), scored by evaluation/check_scoring.py. Apart from both, so
the corpus format imports no scoring."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field


class ExpectedCheck(BaseModel):
    """What a custom check of a case's base configuration should come out as (a case's
    `[[checks]]`, evaluation/corpus.py)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: Annotated[str, Field(min_length=1, max_length=80)]
    result: Literal["pass", "fail", "inconclusive"]


def none_expected(checks: list[ExpectedCheck]) -> bool:
    """A manifest leaves `checks` out when there are none (corpora build as before)."""
    return not checks


def expected_checks(kind: str, checks: Sequence[ExpectedCheck]) -> None:
    """A case's expected checks: at least one for a `check` case, each name once."""
    if kind == "check" and not checks:
        raise ValueError("a check case needs at least one expected check")
    names = [check.name for check in checks]
    if len(set(names)) != len(names):
        raise ValueError("an expected check is named twice")
