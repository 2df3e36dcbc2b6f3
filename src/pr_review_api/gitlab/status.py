"""The merge gate on a GitLab merge request: a commit status `pr-review` on the head
(specification §§16, 17).

`StatusReporter` is forge/gate.py's `GateReporter` on GitLab: `POST /projects/:id/statuses/:sha`
with `name` `pr-review`, a `state`, a `description` and, when our note's page is known, a
`target_url`. The review's start is `running`; a `success` outcome is `success`, a `failure`
`failed`. A `neutral` outcome (the review ended without a final review, or a skip rule of the
base stopped it) is `success` with a description that starts "Neutral" and says why: GitLab's
`skipped` state would block a merge request whose project requires "Pipelines must succeed"
(unless it also allows skipped pipelines), and a review that did not run says nothing against
the change. With `fail_on` set, a review without a validated final review, or a skip by the
title or labels, is `failed` (the gate fails closed: specification §16), its description saying why.

The description is one line of ours (output/gate_outcome.py's `brief`: counts by severity,
coverage as numbers, or why the gate is neutral), never model text, cut to GitLab's 255
characters. GitLab's answers, none of which fails the review:

- 401, 403 (the token's user is not a Developer of the project) or 404 (the project or the
  commit is not visible: a fork's head that no branch of the project holds is one): the gate is
  given up for this review, logged once in fixed words (no token, no body);
- 400 "Cannot transition status via :run from :running": the same state posted again on a
  status still running (a job run again on the same head): the status already says it;
- anything else, or GitLab out of reach: logged, and the review goes on.
"""

from __future__ import annotations

from typing import Any

from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.jsonutil import loads_strict
from pr_review_api.output.gate_outcome import CheckOutcome, Conclusion
from pr_review_api.publishing.commit_status import CommitStatus, StatusWords, one_line

STATUS_NAME = "pr-review"
MAX_DESCRIPTION_CHARS = 255  # what GitLab keeps of a status's description
MAX_TARGET_URL_CHARS = 255  # GitLab refuses a longer target_url
RUNNING_DESCRIPTION = "pr-review is reviewing this head."
# A neutral outcome is `success`: `skipped` would block "Pipelines must succeed" (module doc).
# The gate failing closed (`timed_out`, `action_required`: specification §16) is `failed`, the
# description (the outcome's brief) saying which.
STATE: dict[Conclusion, str] = {
    "success": "success",
    "failure": "failed",
    "neutral": "success",
    "timed_out": "failed",
    "action_required": "failed",
}
GITLAB_STATUS = StatusWords(
    "GitLab", "a token without the Developer role, or a head the project does not hold"
)
_SAME_STATE = "Cannot transition status via"


def description_text(text: str) -> str:
    """`text` on one line, without controls, cut to GitLab's 255 characters (an ellipsis
    marks the cut)."""
    return one_line(text, MAX_DESCRIPTION_CHARS)


def status_payload(state: str, description: str, target_url: str | None) -> dict[str, Any]:
    """The request's body; a target URL GitLab would refuse (too long) is left out."""
    payload: dict[str, Any] = {
        "state": state,
        "name": STATUS_NAME,
        "description": description_text(description),
    }
    if target_url and len(target_url) <= MAX_TARGET_URL_CHARS:
        payload["target_url"] = target_url
    return payload


def _same_state(status: int, body: bytes) -> bool:
    """Whether an answer is GitLab's 400 refusing to post a state the status already has."""
    if status != 400:
        return False
    try:
        document = loads_strict(body)
    except ValueError:
        return False
    message = document.get("message") if isinstance(document, dict) else None
    return isinstance(message, str) and message.startswith(_SAME_STATE)


class StatusReporter:
    """The `pr-review` commit status on one head of a merge request (see the module doc)."""

    def __init__(self, gitlab: GitLabClient, ref: MergeRequestRef, head_sha: str) -> None:
        url = ref.project_api_url(gitlab.settings, f"/statuses/{head_sha}")
        self.status = CommitStatus(gitlab, url, GITLAB_STATUS, _same_state)

    async def start(self) -> None:
        """The status `running`."""
        await self.status.post(status_payload("running", RUNNING_DESCRIPTION, None))

    async def complete(self, outcome: CheckOutcome, review_url: str | None = None) -> None:
        """The status of `outcome`, linking our note when known."""
        description = outcome.brief or outcome.title
        await self.status.post(status_payload(STATE[outcome.conclusion], description, review_url))
