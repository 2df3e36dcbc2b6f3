"""What preparing a repository may cost, and the review's deadline, checked as the work runs.

Indexing a head tree costs time and memory in proportion to what the repository holds, and a
repository is untrusted input: a few thousand symbolic links of 4 KB `d/../d/..` targets, or a
tree of a million entries, fit in a few megabytes of git data. `PrepareLimits` holds the
budgets (from `Settings`); a `Work` counts one preparation against them and against its
review's deadline, so the indexing loop stops with a contract error when a budget runs out
and ends promptly (`ReviewTimeout`) once nobody waits for its result.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

from pr_review_api.errors import InvalidRepository, ReviewTimeout
from pr_review_api.settings import Settings

# An entry of the index costs about this much memory (path string, tuple, dict slot, the
# sorted listing): measured on the kernel tree, 80k entries in about 40 MB.
ENTRY_OVERHEAD_BYTES = 300


class RepositoryTooLarge(InvalidRepository):
    """Preparing the repository would exceed one of its budgets (entries, links, memory).

    The code stays `invalid_repository` (specification §5): the CLI exits 2, the HTTP service
    answers 422. The message names the budget's setting, never the repository's content."""


@dataclass(frozen=True, slots=True)
class PrepareLimits:
    """The budgets of preparing one head (see the PR_REVIEW_MAX_* settings)."""

    max_tree_entries: int = 1_000_000
    max_link_hops_total: int = 100_000
    max_link_target_bytes: int = 1024**2
    max_index_bytes: int = 512 * 1024**2

    @classmethod
    def from_settings(cls, settings: Settings) -> PrepareLimits:
        return cls(
            max_tree_entries=settings.pr_review_max_tree_entries,
            max_link_hops_total=settings.pr_review_max_link_hops_total,
            max_link_target_bytes=settings.pr_review_max_link_target_bytes,
            max_index_bytes=settings.pr_review_max_index_bytes,
        )


UNLIMITED = PrepareLimits(
    max_tree_entries=1 << 62,
    max_link_hops_total=1 << 62,
    max_link_target_bytes=1 << 62,
    max_index_bytes=1 << 62,
)


@dataclass(slots=True)
class Work:
    """One preparation's spending: budgets, a deadline (`time.monotonic()`) and a cancel flag.

    `check()` is cheap; the loops call it every few hundred steps."""

    limits: PrepareLimits = UNLIMITED
    deadline: float | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    entries: int = 0
    index_bytes: int = 0
    link_hops: int = 0
    link_bytes: int = 0

    def check(self) -> None:
        """Raise ReviewTimeout once the deadline has passed or the review was cancelled."""
        if self.cancel.is_set() or (self.deadline is not None and time.monotonic() > self.deadline):
            raise ReviewTimeout()

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def add_entries(self, count: int, path_bytes: int) -> None:
        self.entries += count
        self.index_bytes += count * ENTRY_OVERHEAD_BYTES + path_bytes
        if self.entries > self.limits.max_tree_entries:
            raise RepositoryTooLarge(
                "The repository's tree has more entries than PR_REVIEW_MAX_TREE_ENTRIES allows."
            )
        if self.index_bytes > self.limits.max_index_bytes:
            raise RepositoryTooLarge(
                "The repository's index would exceed PR_REVIEW_MAX_INDEX_BYTES."
            )

    def add_hop(self, target_bytes: int) -> None:
        self.link_hops += 1
        self.link_bytes += target_bytes
        if self.link_hops > self.limits.max_link_hops_total:
            raise RepositoryTooLarge(
                "The repository's symbolic links take more hops than "
                "PR_REVIEW_MAX_LINK_HOPS_TOTAL allows."
            )
        if self.link_bytes > self.limits.max_link_target_bytes:
            raise RepositoryTooLarge(
                "The repository's symbolic links expand to more than "
                "PR_REVIEW_MAX_LINK_TARGET_BYTES."
            )
        if self.link_hops % 256 == 0:
            self.check()
