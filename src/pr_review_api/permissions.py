"""Who may write on which repository, as its forge said lately (specification §15):
`PermissionCache`.

The cache is forge-neutral: it keeps yes-or-no answers per repository and user, and the
forge's own function asks when it has none (github/comments.py's `may_write`, over the
permission API). Its holder owns it: the service's job queue (its webhooks and its worker's
reviews), or one review; an answer is never taken from a comment's own claims.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

PERMISSION_TTL_SECONDS = 60.0
MAX_PERMISSION_ENTRIES = 4096


class PermissionCache:
    """A forge's answers to who may write on which repository, each kept for `ttl` seconds (at
    most `MAX_PERMISSION_ENTRIES`): a burst of commands asks the forge once per user."""

    def __init__(self, ttl: float = PERMISSION_TTL_SECONDS) -> None:
        self.ttl = ttl
        self._answers: dict[tuple[str, str], tuple[float, bool]] = {}

    async def answer(self, repository: str, user: str, ask: Callable[[], Awaitable[bool]]) -> bool:
        """Whether `user` may write on `repository` ("owner/repo", any case): the kept answer,
        else `ask()`'s, kept."""
        key = (repository.lower(), user.lower())
        now = time.monotonic()
        cached = self._answers.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        allowed = await ask()
        if len(self._answers) >= MAX_PERMISSION_ENTRIES:
            self._answers = {k: v for k, v in self._answers.items() if v[0] > now}
            if len(self._answers) >= MAX_PERMISSION_ENTRIES:
                self._answers.clear()
        self._answers[key] = (now + self.ttl, allowed)
        return allowed
