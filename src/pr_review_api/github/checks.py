"""The merge gate on GitHub: a check run `pr-review` on the head (specification §16).

What the check says (`CheckOutcome`: the conclusion, a title, a summary, the findings) is
output/gate_outcome.py's, the same on every forge. Here are GitHub's requests: one annotation
per finding, and `CheckReporter` (forge/gate.py's `GateReporter` on GitHub). `start` creates
the run `in_progress`; `complete` completes it (or creates it completed, when it was never
started) with the first 50 annotations, and sends the rest 50 at a time with PATCH, as GitHub
requires. A token that may not create check runs (GitHub answers 403 or 404: a personal
token, a workflow token without `checks: write`) gets a commit status `pr-review` with the
same outcome instead (`neutral`, which statuses lack, is `success`: neither blocks a merge;
`timed_out` and `action_required` are `failure`, the description saying which).

Nothing here ever fails a review: a refused or failed request is logged in fixed words and the
review goes on. Model text reaches only the annotations (plain text on GitHub, cut to its
limits); the title and the summary are ours.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from pr_review_api.errors import GitHubUnavailable
from pr_review_api.github.client import GitHubClient
from pr_review_api.model import Severity
from pr_review_api.output.gate_outcome import FAILING, CheckOutcome, GateFinding

logger = logging.getLogger(__name__)

CHECK_NAME = "pr-review"
MAX_ANNOTATIONS_PER_REQUEST = 50  # GitHub's limit for one create or update
MAX_ANNOTATION_TITLE_CHARS = 255
MAX_ANNOTATION_MESSAGE_CHARS = 4000
MAX_STATUS_DESCRIPTION_CHARS = 140
NO_ACCESS = (403, 404)  # the token may not create check runs
# Our run's `external_id`: the pull request it gates, read back from a `check_run`
# `rerequested` delivery when its `pull_requests` is empty (a fork's head: github/gate_events.py).
EXTERNAL_ID_PREFIX = "pr-review:pull/"

_LEVEL: dict[Severity, str] = {
    "critical": "failure",
    "high": "failure",
    "medium": "warning",
    "low": "notice",
    "info": "notice",
}


def annotation(finding: GateFinding) -> dict[str, Any]:
    line = finding.line or 1  # GitHub needs a line; a finding without one points at the top
    return {
        "path": finding.path,
        "start_line": line,
        "end_line": line,
        "annotation_level": _LEVEL[finding.severity],
        "title": f"{finding.severity}: {finding.title}"[:MAX_ANNOTATION_TITLE_CHARS],
        "message": finding.message[:MAX_ANNOTATION_MESSAGE_CHARS] or finding.title[:255],
    }


def batches(items: Sequence[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Annotations in requests of at most 50; one empty batch when there are none."""
    size = MAX_ANNOTATIONS_PER_REQUEST
    return [list(items[i : i + size]) for i in range(0, len(items), size)] or [[]]


class _CreatedWire(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int


class CheckReporter:
    """The `pr-review` check run (or commit status) on one head; see the module docstring."""

    def __init__(
        self,
        github: GitHubClient,
        owner: str,
        repo: str,
        head_sha: str,
        number: int | None = None,
    ) -> None:
        self.github = github
        self.base = f"{github.settings.github_api_url}/repos/{owner}/{repo}"
        self.head_sha = head_sha
        self.external_id = None if number is None else f"{EXTERNAL_ID_PREFIX}{number}"
        self.run_id: int | None = None
        self.use_status = False

    async def start(self) -> None:
        """The check run `in_progress` (or a `pending` status)."""
        payload = {
            "name": CHECK_NAME,
            "head_sha": self.head_sha,
            "status": "in_progress",
            "started_at": _now(),
        }
        await self._create(self._identified(payload))
        if self.use_status:
            await self._status("pending", "The review is running.")

    async def complete(self, outcome: CheckOutcome, review_url: str | None = None) -> None:
        """Complete the run with `outcome`: annotations 50 per request."""
        first, *rest = batches([annotation(f) for f in outcome.findings])
        finished = {
            "status": "completed",
            "conclusion": outcome.conclusion,
            "completed_at": _now(),
            "output": _output(outcome, first),
        }
        if self.run_id is None and not self.use_status:
            created = {"name": CHECK_NAME, "head_sha": self.head_sha, **finished}
            await self._create(self._identified(created))
        elif self.run_id is not None:
            await self._update(finished)
        if self.use_status:
            await self._status(*status_of(outcome), review_url)
            return
        if self.run_id is None:
            return
        for batch in rest:
            await self._update({"output": _output(outcome, batch)})

    def _identified(self, payload: dict[str, Any]) -> dict[str, Any]:
        return payload if self.external_id is None else {**payload, "external_id": self.external_id}

    async def _create(self, payload: dict[str, Any]) -> None:
        response = await self._send("POST", f"{self.base}/check-runs", payload)
        if response is None:
            return
        status, body = response
        if status in NO_ACCESS:
            logger.info("the token may not create check runs; a commit status stands in")
            self.use_status = True
            return
        if status not in (200, 201):
            logger.info("GitHub refused the check run (status %d)", status)
            return
        try:
            self.run_id = _CreatedWire.model_validate_json(body).id
        except ValidationError:
            logger.info("GitHub's answer to the check run has no id")

    async def _update(self, payload: dict[str, Any]) -> None:
        response = await self._send("PATCH", f"{self.base}/check-runs/{self.run_id}", payload)
        if response is not None and response[0] not in (200, 201):
            logger.info("GitHub refused to update the check run (status %d)", response[0])

    async def _status(self, state: str, description: str, url: str | None = None) -> None:
        payload: dict[str, Any] = {
            "state": state,
            "context": CHECK_NAME,
            "description": description[:MAX_STATUS_DESCRIPTION_CHARS],
        }
        if url:
            payload["target_url"] = url
        response = await self._send("POST", f"{self.base}/statuses/{self.head_sha}", payload)
        if response is not None and response[0] not in (200, 201):
            logger.info("GitHub refused the commit status (status %d)", response[0])

    async def _send(
        self, method: str, url: str, payload: dict[str, Any]
    ) -> tuple[int, bytes] | None:
        try:
            response = await self.github.request(method, url, json_body=payload)
        except GitHubUnavailable as exc:
            logger.info("the check could not be sent: %s", exc.message)
            return None
        return response.status, response.body


def status_of(outcome: CheckOutcome) -> tuple[str, str]:
    """A commit status's state and description for `outcome`: its one-line brief (a status
    has no title or summary). Statuses have neither `neutral` (shown as `success`, the brief
    saying "Neutral": neither blocks a merge) nor `timed_out` or `action_required` (shown as
    `failure`, the brief saying which: the gate fails closed, specification §16)."""
    state = "failure" if outcome.conclusion in FAILING else "success"
    return state, outcome.brief or outcome.title


def _output(outcome: CheckOutcome, annotations: list[dict[str, Any]]) -> dict[str, Any]:
    return {"title": outcome.title, "summary": outcome.summary, "annotations": annotations}


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
