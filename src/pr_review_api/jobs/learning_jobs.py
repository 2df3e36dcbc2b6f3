"""The worker's side of `remember` and `forget` (specification §20), on every forge with comment
commands: the forge's `ChangeComments` (forge/comments.py) reads the command and
acknowledges it; here is what a job does with the learnings table (jobs/learnings.py).

- `remember <text>`: one learning for the change's repository, its author the command's, its
  URL the comment's; a job run again stores it once (the comment is the row's `origin`).
- `forget <id>`: the learning with that id, of this repository only, is removed.

Both answer with the forge's one reaction and no text; a command that changes nothing (a text
the table refuses, an id of no learning of this repository) gets no reaction. The webhook let
through only writers' commands, never a bot's or ours (service/webhooks.py,
service/gitlab_webhooks.py); the comments seam checks the last two again.
"""

from __future__ import annotations

from typing import Any

from pr_review_api.forge.comments import ChangeComments, Command, CommandRecord
from pr_review_api.jobs.commands import forgotten_id, learning_text
from pr_review_api.jobs.learnings import DatabaseLearnings


async def learning_command(
    learnings: DatabaseLearnings,
    record: CommandRecord,
    comments: ChangeComments,
    command: Command,
    kind: str,
) -> dict[str, Any]:
    """Run one `remember` or `forget` job: the result document `{"kind", "outcome", ...}`."""
    repository = comments.dismissals_key.lower()
    if kind == "remember":
        url = comments.comment_url(record.pull_request_url)
        origin = f"{repository}#{url}"
        stored = await learnings.add(
            repository, learning_text(command.text), command.author, url=url, origin=origin
        )
        if stored is None:
            return {"kind": kind, "outcome": "invalid"}
        await comments.acknowledge()
        return {"kind": kind, "outcome": "remembered", "learning_id": stored.id}
    learning_id = forgotten_id(command.text.split(maxsplit=1)[-1])
    if learning_id is None or not await learnings.remove(learning_id, repository):
        return {"kind": kind, "outcome": "not_found"}
    await comments.acknowledge()
    return {"kind": kind, "outcome": "forgotten", "learning_id": learning_id}
