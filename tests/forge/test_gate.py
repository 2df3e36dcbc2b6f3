"""The merge gate's outcomes with custom checks (forge/gate.py, specification §20): where no check's
result is at hand, an applicable `error` check fails the gate closed, `fail_on` "none" or not;
a skip the base's own rules decide stays neutral."""

from __future__ import annotations

import asyncio

from pr_review_api.forge.gate import Gate
from pr_review_api.output.custom_checks import Mode
from pr_review_api.output.gate_outcome import CheckOutcome


def _gate(modes: dict[str, Mode]) -> tuple[Gate, list[CheckOutcome]]:
    seen: list[CheckOutcome] = []
    return Gate(None, "none", on_outcome=seen.append, check_modes=modes), seen


def test_a_skip_the_author_controls_fails_an_error_check_closed() -> None:
    gate, seen = _gate({"Migrations have a downgrade": "error"})
    asyncio.run(gate.skipped("a label matched skip_labels", author_controlled=True))
    asyncio.run(gate.skipped("the author matched skip_authors", author_controlled=False))
    asyncio.run(gate.ended("invalid_model_response"))
    assert [o.conclusion for o in seen] == ["failure", "neutral", "failure"]


def test_warning_checks_leave_those_outcomes_neutral() -> None:
    gate, seen = _gate({"Style": "warning"})
    asyncio.run(gate.skipped("a label matched skip_labels", author_controlled=True))
    asyncio.run(gate.ended("invalid_model_response"))
    assert [o.conclusion for o in seen] == ["neutral", "neutral"]
