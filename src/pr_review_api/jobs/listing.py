"""What a listing of review jobs may ask for: the statuses and the page sizes.

Kept apart from `jobs.records` and `jobs.admin`, which load the database driver and the queue
library, so that the command line can name these in its options without loading either.
"""

from __future__ import annotations

JOB_STATUSES: tuple[str, ...] = ("queued", "running", "succeeded", "failed", "superseded")
MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 20
