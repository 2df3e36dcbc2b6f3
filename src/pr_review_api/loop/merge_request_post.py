"""`post` on a GitLab merge request, as `run_review` does it (CONTRACT 10, 17).

Before the model is asked: the preflight (gitlab/preflight.py: no GITLAB_TOKEN, or a token
GitLab refuses, fails here and costs no review), then the service's ledger and our notes'
markers: a head already published answers `already_published` without a provider request, as
on GitHub; a re-review names the files changed since our last reviewed head. After the review:
gitlab/publish.py posts the discussions and the note.

With the service's dismissals (CONTRACT 15; the project's key is `gitlab:group/project`), the
first message names the findings dismissed in the changed files, and a finding whose
fingerprint was dismissed is not published (`publication.suppressed`).

What GitHub has and a merge request does not have here: check runs (section 16's gate is left
without a reporter; `--check-file` still gets the outcome), resolving our fixed threads, and
dismissals by reaction (read from GitHub at each review): those steps are skipped.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from pr_review_api.errors import ReviewError, ServerBusy
from pr_review_api.github.client import GitHubClient
from pr_review_api.github.history import PublishFailure, re_review_of
from pr_review_api.github.ledger import DismissedFindings, PublishLedger
from pr_review_api.gitlab.client import GitLabClient
from pr_review_api.gitlab.history import prior_state
from pr_review_api.gitlab.preflight import ensure_can_publish
from pr_review_api.gitlab.publish import merge_request_key, publish_merge_request
from pr_review_api.gitlab.urls import MergeRequestRef
from pr_review_api.loop.gate import Gate, already_posted
from pr_review_api.loop.workspace import PostedHead, Prepared
from pr_review_api.model import Publication, PullRequestInfo, ReviewResult
from pr_review_api.settings import Settings

if TYPE_CHECKING:
    from pr_review_api.metrics import Metrics

logger = logging.getLogger(__name__)


def is_merge_request(prepared: Prepared) -> bool:
    """Whether the review is of a GitLab merge request."""
    info = prepared.pull_request
    return info is not None and info.forge == "gitlab"


def _ref(info: PullRequestInfo) -> MergeRequestRef:
    return MergeRequestRef(owner=info.owner, repo=info.repo, number=info.number, url=info.url)


async def before_model(  # noqa: PLR0913  (as run.py's _before_model)
    prepared: Prepared,
    settings: Settings,
    gitlab: GitLabClient,
    github: GitHubClient,
    gate: Gate,
    *,
    ledger: PublishLedger | None,
    force: bool,
    dismissals: DismissedFindings | None = None,
) -> tuple[Prepared, ReviewResult | None]:
    """(prepared, None) to go on with the review, its context naming what changed since our
    last reviewed head; or (prepared, the `already_published` document) when this head is
    published and `force` is off. Raises the preflight's errors."""
    await ensure_can_publish(gitlab)
    info = prepared.pull_request
    assert info is not None
    ref, head = _ref(info), prepared.repository.revisions.head_sha
    posted = None if force else await _in_ledger(ledger, ref, gitlab, head)
    if posted is None:
        try:
            state = await prior_state(gitlab, ref, head_sha=head)
        except (PublishFailure, ReviewError):
            # publishing reads the notes again, and decides
            return await _with_dismissed_titles(prepared, ref, dismissals), None
        done = state.review_of(head)
        if done is not None and not force:
            posted = PostedHead(*done)
        else:
            found = await re_review_of(state, prepared.repository.git_dir, head)
            if found is not None:
                context = replace(
                    prepared.context,
                    last_reviewed_head=found.last_head,
                    changed_since_last_review=found.changed,
                )
                prepared = replace(prepared, context=context)
    if posted is None:
        return await _with_dismissed_titles(prepared, ref, dismissals), None
    # No model asked. GitLab has no check run to complete from the posted counts: the
    # outcome, for --check-file, is the gate's "unknown" of a head published before.
    quiet = Gate(None, gate.fail_on, gate.git_dir)
    result = await already_posted(prepared, settings, github, posted, quiet)
    await gate.finished(result)
    return prepared, result


async def _in_ledger(
    ledger: PublishLedger | None, ref: MergeRequestRef, gitlab: GitLabClient, head: str
) -> PostedHead | None:
    if ledger is None:
        return None
    try:
        recorded = await ledger.find(merge_request_key(ref, await gitlab.username(), head))
    except ServerBusy:
        logger.warning("the ledger of published reviews could not be read")
        return None
    return None if recorded is None else PostedHead(recorded.review_id, recorded.url)


async def after_review(  # noqa: PLR0913  (as run.py's _publish)
    result: ReviewResult,
    prepared: Prepared,
    gitlab: GitLabClient,
    *,
    deadline: float,
    ledger: PublishLedger | None,
    metrics: Metrics | None,
    force: bool,
    dismissals: DismissedFindings | None = None,
) -> Publication | None:
    """Publish the review on its merge request (gitlab/publish.py), without the findings
    the project dismissed."""
    dismissed: set[str] = set()
    info = prepared.pull_request
    if dismissals is not None and info is not None:
        try:
            dismissed = await dismissals.fingerprints(_ref(info).dismissals_key)
        except ServerBusy:  # the review is paid for: publish it, dismissals or not
            logger.warning("the dismissed findings could not be read")
    return await publish_merge_request(
        result,
        gitlab,
        prepared.repository.git_dir,
        deadline=deadline,
        ledger=ledger,
        metrics=metrics,
        force=force,
        dismissed=dismissed,
    )


async def _with_dismissed_titles(
    prepared: Prepared, ref: MergeRequestRef, dismissals: DismissedFindings | None
) -> Prepared:
    """The first message names the findings the project dismissed in the changed files."""
    if dismissals is None:
        return prepared
    paths = [path for _, path in prepared.context.changed_files]
    try:
        titles = await dismissals.titles(ref.dismissals_key, paths)
    except ServerBusy:
        return prepared
    return replace(prepared, context=replace(prepared.context, dismissed_titles=tuple(titles)))
