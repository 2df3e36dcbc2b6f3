"""github/gate_events.py: which deliveries run the merge gate again (specification §16): our check's
re-run button, and the skip rules' inputs changing."""

from __future__ import annotations

from typing import Any

import pytest

from pr_review_api.github.gate_events import Rerun, rerequested_run, skip_inputs_changed

SHA = "c" * 40
APP = 77


def run_event(**run: Any) -> dict[str, Any]:
    check_run: dict[str, Any] = {
        "name": "pr-review",
        "head_sha": SHA,
        "app": {"id": APP},
        "external_id": "pr-review:pull/9",
        "pull_requests": [{"number": 7, "head": {"sha": SHA}}],
    }
    check_run.update(run)
    return {"action": "rerequested", "check_run": check_run}


def test_our_runs_rerun_names_the_pull_request_whose_head_it_gates() -> None:
    assert rerequested_run(run_event(), APP) == Rerun(7, SHA)
    assert rerequested_run(run_event(), None) == Rerun(7, SHA)  # no App: the name says it


@pytest.mark.parametrize(
    "event",
    [
        {**run_event(), "action": "requested_action"},
        {**run_event(), "action": "created"},
        run_event(name="ci"),
        run_event(name="PR-REVIEW"),
        run_event(app={"id": APP + 1}),
        run_event(app=None),
        run_event(head_sha="C" * 40),
        run_event(head_sha=None),
        # The pull request moved on: a re-run of an older head gates nothing now.
        run_event(pull_requests=[{"number": 7, "head": {"sha": "d" * 40}}]),
        run_event(pull_requests=[{"number": True, "head": {"sha": SHA}}]),
        run_event(pull_requests=[{"number": 0, "head": {"sha": SHA}}]),
        run_event(pull_requests=["7"]),
        {"action": "rerequested", "check_run": "x"},
        {"action": "rerequested"},
    ],
)
def test_anything_else_asks_for_nothing(event: dict[str, Any]) -> None:
    assert rerequested_run(event, APP) is None


@pytest.mark.parametrize(
    ("external_id", "expected"),
    [
        ("pr-review:pull/9", 9),
        ("pr-review:pull/0", None),
        ("pr-review:pull/09", None),
        ("pr-review:pull/99999999999", None),
        ("pr-review:pull/9/../8", None),
        ("other:pull/9", None),
        (None, None),
        (9, None),
    ],
)
def test_a_forks_run_lists_no_pull_request_and_our_external_id_names_it(
    external_id: object, expected: int | None
) -> None:
    found = rerequested_run(run_event(pull_requests=[], external_id=external_id), APP)
    assert found == (None if expected is None else Rerun(expected, SHA))


@pytest.mark.parametrize(
    ("event", "changed"),
    [
        ({"action": "labeled", "label": {"name": "x"}}, True),
        ({"action": "unlabeled"}, True),
        ({"action": "edited", "changes": {"title": {"from": "[WIP] a"}}}, True),
        ({"action": "edited", "changes": {"base": {"ref": {"from": "dev"}}}}, True),
        ({"action": "edited", "changes": {"body": {"from": "a"}}}, False),
        ({"action": "edited", "changes": {"title": "not an object"}}, False),
        ({"action": "edited"}, False),
        ({"action": "assigned"}, False),
        ({"action": "closed", "changes": {"title": {"from": "a"}}}, False),
    ],
)
def test_the_skip_rules_inputs_are_a_label_the_title_and_the_base(
    event: dict[str, Any], changed: bool
) -> None:
    assert skip_inputs_changed(event) is changed
