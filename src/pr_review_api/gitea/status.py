"""The merge gate on a Gitea pull request: a commit status `pr-review` on the head (CONTRACT 16,
19).

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

import logging
import re
from typing import Any

from pr_review_api.errors import GiteaUnavailable
from pr_review_api.gitea.client import GiteaClient
from pr_review_api.gitea.urls import PullRequestRef
from pr_review_api.output.gate_outcome import CheckOutcome, Conclusion

logger = logging.getLogger(__name__)

STATUS_CONTEXT = "pr-review"
MAX_DESCRIPTION_CHARS = 255  # one line on Gitea's status list; GitLab and GitHub keep less
MAX_TARGET_URL_CHARS = 2048
MAX_STATUS_RESPONSE_BYTES = 64 * 1024
NO_ACCESS = (401, 403, 404)
PENDING_DESCRIPTION = "pr-review is reviewing this head."
# Gitea has no neutral state (see the module doc): the description says which outcome it is.
STATE: dict[Conclusion, str] = {
    "success": "success",
    "failure": "failure",
    "neutral": "success",
    "timed_out": "failure",
    "action_required": "failure",
}
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def status_payload(state: str, description: str, target_url: str | None) -> dict[str, Any]:
    """The request's body: the description on one line without controls, cut (an ellipsis
    marks the cut); a target URL too long to be a link is left out."""
    line = " ".join(_CONTROL.sub(" ", description).split())
    if len(line) > MAX_DESCRIPTION_CHARS:
        line = line[: MAX_DESCRIPTION_CHARS - 1].rstrip() + "…"
    payload: dict[str, Any] = {"state": state, "context": STATUS_CONTEXT, "description": line}
    if target_url and len(target_url) <= MAX_TARGET_URL_CHARS:
        payload["target_url"] = target_url
    return payload


class StatusReporter:
    """The `pr-review` commit status on one head of a pull request (see the module doc)."""

    def __init__(self, gitea: GiteaClient, ref: PullRequestRef, head_sha: str) -> None:
        self.gitea = gitea
        self.url = ref.repo_api_url(f"/statuses/{head_sha}")
        self.refused = False  # Gitea said no to this token: the gate is given up

    async def start(self) -> None:
        """The status `pending`."""
        await self._post("pending", PENDING_DESCRIPTION, None)

    async def complete(self, outcome: CheckOutcome, review_url: str | None = None) -> None:
        """The status of `outcome`, linking our review when known."""
        await self._post(STATE[outcome.conclusion], outcome.brief or outcome.title, review_url)

    async def _post(self, state: str, description: str, target_url: str | None) -> None:
        if self.refused:
            return
        payload = status_payload(state, description, target_url)
        try:
            response = await self.gitea.request(
                "POST", self.url, json=payload, limit=MAX_STATUS_RESPONSE_BYTES
            )
        except GiteaUnavailable as exc:
            logger.info("the commit status could not be sent: %s", exc.message)
            return
        status = response.status
        if 200 <= status < 300:
            return
        if status in NO_ACCESS:
            self.refused = True
            logger.info(
                "Gitea refused the commit status (status %d: a token without write access to "
                "the code); the merge gate is not set",
                status,
            )
        else:
            logger.info("Gitea refused the commit status (status %d)", status)
