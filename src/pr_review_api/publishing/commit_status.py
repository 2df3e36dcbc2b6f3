"""A commit status on a change's head: the merge gate's mark where a forge shows it as one
(specification §16; gitlab/status.py, gitea/status.py), in no forge's words: each passes its own.

`CommitStatus` is forge/gate.py's `GateReporter` where the gate is a commit status `pr-review`
on the head: the forge's running state at the start, then the outcome's, its description one
line of ours (output/gate_outcome.py's `brief`), never model text. Each forge passes how it
takes a status (`ForgeStatus`: its field names, states and bounds). It posts each state to one
URL and never raises for the forge's answers: a refusal of the token (401, 403, 404) gives the
gate up for the review, logged once in the forge's words (never a token or a body); a forge out
of reach, or any other answer, is logged and the review goes on. `one_line` makes a
description of ours one bounded line.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pr_review_api.errors import ReviewError
from pr_review_api.output.gate_outcome import FAILING, CheckOutcome

logger = logging.getLogger(__name__)

MAX_STATUS_RESPONSE_BYTES = 64 * 1024
STATUS_NAME = "pr-review"
RUNNING_DESCRIPTION = "pr-review is reviewing this head."
NO_ACCESS = (401, 403, 404)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


class StatusAnswer(Protocol):
    """A forge client's answer: its status and its capped body."""

    @property
    def status(self) -> int: ...
    @property
    def body(self) -> bytes: ...


class StatusClient(Protocol):
    """The one request a commit status needs of a forge's API client."""

    async def request(
        self, method: str, url: str, *, json: object | None = None, limit: int = ...
    ) -> StatusAnswer: ...


@dataclass(frozen=True)
class ForgeStatus:
    """How one forge takes a commit status: its name and what a refusal of the token most
    often means there (for the log), the field that names the status, its states for a
    running review and a failing outcome, and its bounds on the description and the link."""

    forge: str
    no_access: str
    name_field: str  # "context"
    running: str  # "pending"
    failed: str  # "failure"
    max_description_chars: int
    max_target_url_chars: int

    def payload(self, state: str, description: str, target_url: str | None) -> dict[str, Any]:
        """A status's request body: the description one bounded line; a target URL too long
        for the forge is left out."""
        payload: dict[str, Any] = {
            "state": state,
            self.name_field: STATUS_NAME,
            "description": one_line(description, self.max_description_chars),
        }
        if target_url and len(target_url) <= self.max_target_url_chars:
            payload["target_url"] = target_url
        return payload


def one_line(text: str, max_chars: int) -> str:
    """`text` on one line, without controls, cut to `max_chars` (an ellipsis marks the cut)."""
    line = " ".join(_CONTROL.sub(" ", text).split())
    if len(line) <= max_chars:
        return line
    return line[: max_chars - 1].rstrip() + "…"


class CommitStatus:
    """The states posted to one commit status URL (see the module doc). `settled(status,
    body)` tells an answer that means the status already says it (GitLab's refusal to post the
    same state twice)."""

    def __init__(
        self,
        client: StatusClient,
        url: str,
        words: ForgeStatus,
        settled: Callable[[int, bytes], bool] | None = None,
    ) -> None:
        self.client = client
        self.url = url
        self.words = words
        self.settled = settled
        self.refused = False  # the forge said no to this token: the gate is given up

    async def start(self) -> None:
        """The forge's running state."""
        await self.post(self.words.payload(self.words.running, RUNNING_DESCRIPTION, None))

    async def complete(self, outcome: CheckOutcome, review_url: str | None = None) -> None:
        """The state of `outcome`, linking our review when known. A forge's status has no
        neutral state: a neutral outcome is `success`, its description saying "Neutral" and
        why (a review that did not run says nothing against the change); the gate failing
        closed (`timed_out`, `action_required`: specification §16) is the failed state, the
        description saying which."""
        state = self.words.failed if outcome.conclusion in FAILING else "success"
        await self.post(self.words.payload(state, outcome.brief or outcome.title, review_url))

    async def post(self, payload: dict[str, Any]) -> None:
        if self.refused:
            return
        try:
            response = await self.client.request(
                "POST", self.url, json=payload, limit=MAX_STATUS_RESPONSE_BYTES
            )
        except ReviewError as exc:
            logger.info("the commit status could not be sent: %s", exc.message)
            return
        status, forge = response.status, self.words.forge
        if 200 <= status < 300:
            return
        if status in NO_ACCESS:
            self.refused = True
            logger.info(
                "%s refused the commit status (status %d: %s); the merge gate is not set",
                forge,
                status,
                self.words.no_access,
            )
        elif self.settled is not None and self.settled(status, response.body):
            logger.debug("the commit status already said it")
        else:
            logger.info("%s refused the commit status (status %d)", forge, status)
