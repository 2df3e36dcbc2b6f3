"""How `run_review` runs, as one value: what the review does and what its holder lends it.

Every shell (the CLI, the service, a job, the evaluation, a test) builds one `ReviewOptions`
and passes it whole; a holder that keeps shared parts (a model client, a repository store,
its forge clients, its ledger) keeps one `ReviewOptions` of them and `dataclasses.replace`s
in each review's own flags.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pr_review_api.model import Usage

if TYPE_CHECKING:
    from pr_review_api.forge.base import ChangeForge
    from pr_review_api.forge.clients import ForgeClients
    from pr_review_api.forge.gate import OnOutcome
    from pr_review_api.git.store import RepositoryStore
    from pr_review_api.ledger import DismissedFindings, Learnings, PublishLedger
    from pr_review_api.llm.client import ModelClient
    from pr_review_api.metrics import Metrics
    from pr_review_api.permissions import PermissionCache


@dataclass(frozen=True)
class Progress:
    """What a review has done so far, for live progress output."""

    stage: str  # "preparing", "waiting_for_model", "running_tools", "validating", "verifying"
    round: int
    tool_calls: int
    usage: Usage


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class ReviewOptions:
    """How one review runs; every field has the default of a plain local review.

    What the review does: `post` publishes it on the change (specification §10) and sets the
    result's `publication`; a `post` that cannot publish (no token, a token the forge refuses)
    fails before the model is asked. `automatic` (a webhook's job, `review --automatic`)
    honours the base's skip rules (specification §16). `force` (the `review` command in a comment,
    specification §15) reviews and publishes a head already published; the findings already posted
    are still not repeated. `include_trace` keeps the conversation in the result.

    Who is told: `progress` of each stage; `on_check` of the `pr-review` check's outcome
    (the CLI's --check-file), set or not.

    What the holder lends (each made for the review and closed after it when not given):
    `model`, the model client (the service's pooled one, a test's `ScriptedModel`); `store`,
    the repository store (git/store.py); `metrics`, which counts how the review ended
    (specification §18); `forge`, the change's `ChangeForge`, else the one its URL names over
    `clients`, the forge clients of the holder's identity (at most one per forge; where the
    change's forge has none, one is made with the settings' token). With a `ledger` of
    published heads, a head already published answers its earlier review document before
    the model is asked; with `dismissals`, a finding the repository dismissed is not
    published; `permissions` keeps the forge's answers of who may dismiss; `learnings` are
    the repositories' (specification §20), given to every review.
    """

    post: bool = False
    automatic: bool = False
    force: bool = False
    include_trace: bool = False
    progress: ProgressCallback | None = None
    on_check: OnOutcome | None = None
    model: ModelClient | None = None
    store: RepositoryStore | None = None
    metrics: Metrics | None = None
    forge: ChangeForge | None = None
    clients: ForgeClients | None = None
    ledger: PublishLedger | None = None
    dismissals: DismissedFindings | None = None
    permissions: PermissionCache | None = None
    learnings: Learnings | None = None
