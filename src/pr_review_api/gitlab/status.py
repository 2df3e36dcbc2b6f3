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

from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.jsonutil import loads_strict
from pr_review_api.publishing.commit_status import CommitStatus, ForgeStatus

MAX_DESCRIPTION_CHARS = 255  # what GitLab keeps of a status's description
MAX_TARGET_URL_CHARS = 255  # GitLab refuses a longer target_url
# A neutral outcome is `success`: `skipped` would block "Pipelines must succeed" (module doc).
GITLAB_STATUS = ForgeStatus(
    "GitLab",
    "a token without the Developer role, or a head the project does not hold",
    name_field="name",
    running="running",
    failed="failed",
    max_description_chars=MAX_DESCRIPTION_CHARS,
    max_target_url_chars=MAX_TARGET_URL_CHARS,
)
_SAME_STATE = "Cannot transition status via"


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


class StatusReporter(CommitStatus):
    """The `pr-review` commit status on one head of a merge request (see the module doc)."""

    def __init__(self, gitlab: GitLabClient, ref: MergeRequestRef, head_sha: str) -> None:
        url = ref.project_api_url(gitlab.settings, f"/statuses/{head_sha}")
        super().__init__(gitlab, url, GITLAB_STATUS, _same_state)
