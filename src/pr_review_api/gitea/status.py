"""The merge gate on a Gitea pull request: a commit status `pr-review` on the head
(specification §§16, 19).

`StatusReporter` is forge/gate.py's `GateReporter` on Gitea: `POST /repos/{owner}/{repo}/
statuses/{sha}` (`repoCreateStatus`, `CreateStatusOption`) with `context` `pr-review`, a
`state`, a `description` and, when our review's page is known, a `target_url`. Gitea's states
are `pending`, `success`, `error`, `failure` and `warning`: none is neutral. The review's start
is `pending`; a `success` outcome is `success`, a `failure` `failure`. A `neutral` outcome (a
review that ended without a final review while `fail_on` is "none", a skip rule of the base, a
head published before whose counts could not be read) is `success` whose description starts
"Neutral" and says why: a review that did not run says nothing against the change. The gate
failing closed (`timed_out`, and `action_required`, a skip that rests on the title or labels
while `fail_on` is set: Gitea has no state that asks for an action) is `failure`, its
description saying which and how to run the review again.

The description is one line of ours (output/gate_outcome.py's `brief`), never model text, cut
to `MAX_DESCRIPTION_CHARS`. Gitea's answers, none of which fails the review:

- 401, 403 (the token may not write the code: Gitea asks write access to the repository's
  code for a status) or 404 (the repository is not visible): the gate is given up for this
  review, logged once in fixed words (no token, no body);
- anything else, or Gitea out of reach: logged, and the review goes on.
"""

from __future__ import annotations

from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.publishing.commit_status import CommitStatus, ForgeStatus

MAX_DESCRIPTION_CHARS = 255  # one line on Gitea's status list; GitLab keeps as much
MAX_TARGET_URL_CHARS = 2048
# Gitea has no neutral state (see the module doc): the description says which outcome it is.
GITEA_STATUS = ForgeStatus(
    "Gitea",
    "a token without write access to the code",
    name_field="context",
    running="pending",
    failed="failure",
    max_description_chars=MAX_DESCRIPTION_CHARS,
    max_target_url_chars=MAX_TARGET_URL_CHARS,
)


class StatusReporter(CommitStatus):
    """The `pr-review` commit status on one head of a pull request (see the module doc)."""

    def __init__(self, gitea: GiteaClient, ref: PullRequestRef, head_sha: str) -> None:
        super().__init__(gitea, ref.repo_api_url(f"/statuses/{head_sha}"), GITEA_STATUS)
