"""The worker's side of the comment commands (specification §15; 17 on GitLab): one command job,
run.

- `review`: the review of the current head, published even when that head was (`force`).
- `help`: one reply listing the commands (in the command's thread, or on the change).
- `dismiss`: the finding of our comment the `ignore` replied to is stored for the repository
  (jobs/dismissals.py); the forge's acknowledgement on the `ignore` (a `+1` reaction, a
  `thumbsup` award), no text.
- `remember`, `forget`: a learning of the repository stored or removed
  (jobs/learning_jobs.py), acknowledged as a dismissal is.
- `answer`: the question is answered in the thread by the answer loop (loop/answer.py) at the
  commit the finding was posted on, its text made inert for the forge. At most
  PR_REVIEW_MAX_ANSWERS_PER_HOUR answers a change per hour; over it, one `eyes` reaction.

What is said on the change goes through the forge's `ChangeComments` (forge/comments.py:
GitHub's review comments, GitLab's discussion notes), picked by the change's URL
(forge/select.py); here are the job's mechanics. Every job works from the comment its delivery
carried (`review_jobs.command`). Our answers carry the question's id in a marker, and the thread
is read before answering: a job run again after its worker died never answers one question
twice. Nothing an answer says changes a finding's state. The result document is
`{"kind", "outcome", ...}`.
"""

from __future__ import annotations

import logging
from typing import Any

from pr_review_api.forge.clients import JobIdentities
from pr_review_api.forge.comments import ChangeComments, Command
from pr_review_api.forge.select import open_comments
from pr_review_api.git.store import RepositoryStore
from pr_review_api.jobs.dismissals import DatabaseDismissals
from pr_review_api.jobs.learning_jobs import learning_command
from pr_review_api.jobs.learnings import DatabaseLearnings
from pr_review_api.jobs.published_heads import Connections
from pr_review_api.jobs.records import JobRecord, answers_in_the_last_hour
from pr_review_api.jobs.runner import JobReviewer
from pr_review_api.llm.client import ModelClient
from pr_review_api.loop.answer import Question, answer_at
from pr_review_api.settings import Settings

logger = logging.getLogger(__name__)


class CommentJobs:
    """Runs the command jobs of `JobQueue` (see the module docstring)."""

    def __init__(
        self,
        connections: Connections,
        identities: JobIdentities,
        reviewer: JobReviewer,
        store: RepositoryStore | None = None,
        model: ModelClient | None = None,
    ) -> None:
        self._connections = connections
        self._identities = identities
        self._reviewer = reviewer
        self._store = store
        self.model = model  # tests pass a scripted model; else the provider of the settings
        self.dismissals = DatabaseDismissals(connections)
        self.learnings = DatabaseLearnings(connections)

    async def __call__(self, record: JobRecord, settings: Settings) -> dict[str, Any]:  # noqa: PLR0911  (one answer per command kind)
        kind = record.kind
        if kind == "review":
            return await self._reviewer(record, settings)
        async with open_comments(record, settings, self._identities) as comments:
            command = await comments.command()
            if command is None:
                return _outcome(kind, "ignored")
            if kind == "help":
                await comments.help()
                return _outcome("help", "replied")
            if kind == "dismiss":
                return await self._dismiss(comments, command)
            if kind == "answer":
                return await self._answer(record, settings, comments, command)
            if kind in ("remember", "forget"):  # specification §20: jobs/learning_jobs.py
                return await learning_command(self.learnings, record, comments, command, kind)
        return _outcome(kind, "ignored")

    async def _dismiss(self, comments: ChangeComments, command: Command) -> dict[str, Any]:
        finding = await comments.our_finding()
        if finding is None:
            return _outcome("dismiss", "not_our_finding")
        await self.dismissals.dismiss(
            comments.dismissals_key,
            finding.fingerprint,
            finding.title,
            finding.path,
            command.author,
        )
        await comments.acknowledge_dismissal()
        return {**_outcome("dismiss", "dismissed"), "fingerprint": finding.fingerprint}

    async def _answer(
        self,
        record: JobRecord,
        settings: Settings,
        comments: ChangeComments,
        command: Command,
    ) -> dict[str, Any]:
        finding = await comments.our_finding()
        if finding is None:
            return _outcome("answer", "not_our_finding")
        thread = await comments.thread()
        if thread.answered:
            return _outcome("answer", "answered")  # a run before this one posted it
        async with self._connections() as connection:
            answered = await answers_in_the_last_hour(connection, record.pr_key)
        if answered >= settings.pr_review_max_answers_per_hour:
            await comments.hold_off()
            return _outcome("answer", "rate_limited")
        question = Question(
            finding=finding.body,
            path=finding.path,
            line=finding.line,
            earlier=thread.earlier,
            asked_by=command.author,
            question=command.text,
        )
        store = self._store or self._reviewer.store_for(settings)
        answer = await answer_at(
            record.pull_request_url,
            finding.head,
            question,
            settings,
            comments.clients(),
            store,
            self.model,
        )
        reply_id = await comments.post_answer(answer.text)
        return {
            **_outcome("answer", "answered"),
            "reply_id": reply_id,
            "answer": answer.model_dump(mode="json"),
        }


def _outcome(kind: str, outcome: str) -> dict[str, Any]:
    return {"kind": kind, "outcome": outcome}
