"""What a GitHub delivery asks of the merge gate (specification §16), read from its payload alone.

Two kinds of delivery run a review again without a new head:

    check_run rerequested   someone pressed our check's re-run button: the run must be ours
                            (named `pr-review`; with App credentials, created by our App, whose
                            id the payload's `check_run.app.id` carries) and gate a pull
                            request's current head
    pull_request edited     the skip rules' inputs changed (`changes.title`, `changes.base`: a
    / labeled / unlabeled   new title or a retarget; a label added or removed), so the rules
                            are evaluated again on the head (a description edit is not one)

The pull request of a re-run is the entry of `check_run.pull_requests` whose head is the run's
head; GitHub leaves that list empty for a fork's head, so our run's `external_id`
(github/checks.py) names it then. Anything else asks for nothing (None, False): the webhook
answers `ignored`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pr_review_api.github.checks import CHECK_NAME, EXTERNAL_ID_PREFIX

SKIP_INPUT_ACTIONS = frozenset({"labeled", "unlabeled"})
EDITED_SKIP_INPUTS = ("title", "base")  # keys of an `edited` delivery's `changes`
MAX_PULL_NUMBER = 2**31 - 1
_SHA = re.compile(r"[0-9a-f]{40}", re.ASCII)
_EXTERNAL_ID = re.compile(re.escape(EXTERNAL_ID_PREFIX) + r"([1-9][0-9]{0,9})", re.ASCII)


@dataclass(frozen=True)
class Rerun:
    """A re-run of our check: the pull request it gates and the head it was set on."""

    number: int
    head_sha: str


def skip_inputs_changed(event: dict[str, Any]) -> bool:
    """Whether a `pull_request` delivery changed what the skip rules read: a label, or (an
    `edited` delivery) the title or the base branch."""
    action = event.get("action")
    if action in SKIP_INPUT_ACTIONS:
        return True
    changes = event.get("changes")
    if action != "edited" or not isinstance(changes, dict):
        return False
    return any(isinstance(changes.get(key), dict) for key in EDITED_SKIP_INPUTS)


def rerequested_run(event: dict[str, Any], app_id: int | None) -> Rerun | None:
    """The re-run a `check_run` delivery asks for, or None (see the module docstring)."""
    run = event.get("check_run")
    if event.get("action") != "rerequested" or not isinstance(run, dict):
        return None
    if run.get("name") != CHECK_NAME or not _ours(run.get("app"), app_id):
        return None
    sha = run.get("head_sha")
    if not isinstance(sha, str) or _SHA.fullmatch(sha) is None:
        return None
    number = _pull_of(run.get("pull_requests"), sha, run.get("external_id"))
    return None if number is None else Rerun(number, sha)


def _ours(app: object, app_id: int | None) -> bool:
    """Whether the run's app is ours; without App credentials there is no id to compare (a
    token cannot create check runs: such a service sets commit statuses)."""
    if app_id is None:
        return True
    return isinstance(app, dict) and app.get("id") == app_id


def _pull_of(pulls: object, sha: str, external_id: object) -> int | None:
    """The pull request whose head is `sha`; None when the listed ones moved on (a re-run of
    an older head gates nothing now). An empty list (a fork's head): our `external_id`."""
    if isinstance(pulls, list) and pulls:
        for pull in pulls:
            head = pull.get("head") if isinstance(pull, dict) else None
            if isinstance(head, dict) and head.get("sha") == sha:
                return _number(pull.get("number"))
        return None
    if not isinstance(external_id, str):
        return None
    found = _EXTERNAL_ID.fullmatch(external_id)
    return None if found is None else _number(int(found.group(1)))


def _number(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_PULL_NUMBER:
        return value
    return None
