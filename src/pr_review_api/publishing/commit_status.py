"""A commit status on a change's head: the merge gate's mark where a forge shows it as one
(specification §16; gitlab/status.py, gitea/status.py), in no forge's words: each passes its own.

`CommitStatus` posts each state to one URL and never raises for the forge's answers: a refusal
of the token (401, 403, 404) gives the gate up for the review, logged once in the forge's words
(never a token or a body); a forge out of reach, or any other answer, is logged and the review
goes on. `one_line` makes a description of ours one bounded line.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pr_review_api.errors import ReviewError

logger = logging.getLogger(__name__)

MAX_STATUS_RESPONSE_BYTES = 64 * 1024
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
class StatusWords:
    """How a forge's refusals of the status are logged: its name, and what a refusal of the
    token most often means there."""

    forge: str
    no_access: str


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
        words: StatusWords,
        settled: Callable[[int, bytes], bool] | None = None,
    ) -> None:
        self.client = client
        self.url = url
        self.words = words
        self.settled = settled
        self.refused = False  # the forge said no to this token: the gate is given up

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
