"""`pr-review learnings list|add|remove|export`: what writers taught the reviewer
(specification §20).

`remember <text>` in a comment stores a learning for the repository (jobs/learnings.py); every
later review of it is given the newest. `list` shows them, `add` stores one, `remove` deletes
one by id, `export` prints them as `[[path_instructions]]` tables a team may commit to
`.pr-review.toml` (each learning's text as one table's `instructions`, for every path). A
repository is `OWNER/REPO` on GitHub, `gitlab:GROUP/PROJECT` on GitLab, `gitea:OWNER/REPO` on
Gitea or Forgejo. The database is the jobs database. A learning's text is shown escaped: on
one line, JSON-quoted, controls removed.
Exit status: 0 done; 1 nothing to remove, or the database failed; 2 bad input or configuration.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from pr_review_api.cli.jobs import Format, _format_option, _with_queue
from pr_review_api.jsonutil import dumps_compact
from pr_review_api.output.common import clean
from pr_review_api.settings import MAX_LEARNING_CHARS

EXIT_NOTHING_REMOVED = 1
EXIT_BAD_INPUT = 2
EXPORT_HEADER = (
    "# Learnings exported by `pr-review learnings export`: add these tables to .pr-review.toml\n"
    "# at the base branch to make them repository guidance (then `learnings remove` them).\n"
)


def _repository(value: str | None) -> str | None:
    """The repository key, lower case; exit 2 for anything that is not one."""
    if value is None:
        return None
    from pr_review_api.jobs.learnings import is_repository_key  # noqa: PLC0415

    if not is_repository_key(value):
        click.echo(
            "error: a repository is OWNER/REPO, gitlab:GROUP/PROJECT or gitea:OWNER/REPO", err=True
        )
        sys.exit(EXIT_BAD_INPUT)
    return value.lower()


def shown(text: str) -> str:
    """A learning's text for a terminal: controls removed, on one line, JSON-quoted."""
    return json.dumps(clean(text), ensure_ascii=False)


@click.group("learnings")
def learnings_command() -> None:
    """What writers taught the reviewer with `remember`: list, add, remove, export.

    The database is PR_REVIEW_DATABASE_URL, or the embedded one under PR_REVIEW_DATA_DIR.
    """


def _listed(repository: str | None, output_format: Format) -> list[dict[str, Any]]:
    async def fetch(queue: Any) -> list[dict[str, Any]]:
        from pr_review_api.jobs.learnings import DatabaseLearnings  # noqa: PLC0415

        found = await DatabaseLearnings(queue.connector.pool.connection).listed(repository)
        return [item.document() for item in found]

    return _with_queue(fetch, output_format)


@learnings_command.command("list")
@click.argument("repository", metavar="[OWNER/REPO]", required=False)
@_format_option
def list_learnings(repository: str | None, output_format: Format) -> None:
    """List the learnings, newest first (of one repository, or all)."""
    items = _listed(_repository(repository), output_format)
    if output_format == "json":
        click.echo(dumps_compact(items))
        return
    if not items:
        click.echo("no learnings")
        return
    for item in items:
        click.echo(
            f"{item['id']}  {item['repository']}  {shown(item['text'])}  "
            f"by {clean(item['author'])} at {item['created_at']}"
        )


@learnings_command.command("add")
@click.argument("repository", metavar="OWNER/REPO")
@click.argument("text")
@_format_option
def add_learning(repository: str, text: str, output_format: Format) -> None:
    """Store a learning for a repository (1-500 characters), as `remember` does."""
    key = _repository(repository)
    assert key is not None

    async def add(queue: Any) -> dict[str, Any] | None:
        from pr_review_api.jobs.learnings import DatabaseLearnings  # noqa: PLC0415

        stored = await DatabaseLearnings(queue.connector.pool.connection).add(key, text, "cli")
        return None if stored is None else stored.document()

    from pr_review_api.jobs.learnings import valid_text  # noqa: PLC0415

    if valid_text(text) is None:
        click.echo(
            f"error: a learning is 1-{MAX_LEARNING_CHARS} characters, no control characters",
            err=True,
        )
        sys.exit(EXIT_BAD_INPUT)
    stored = _with_queue(add, output_format)
    if output_format == "json":
        click.echo(dumps_compact(stored))
    elif stored is not None:
        click.echo(f"added {stored['id']}")


@learnings_command.command("remove")
@click.argument("learning_id", metavar="ID", type=click.IntRange(min=1))
@_format_option
def remove_learning(learning_id: int, output_format: Format) -> None:
    """Remove one learning by its id."""

    async def remove(queue: Any) -> bool:
        from pr_review_api.jobs.learnings import DatabaseLearnings  # noqa: PLC0415

        return await DatabaseLearnings(queue.connector.pool.connection).remove(learning_id)

    removed = _with_queue(remove, output_format)
    if output_format == "json":
        click.echo(dumps_compact({"id": learning_id, "removed": removed}))
    else:
        click.echo("removed" if removed else "no such learning")
    if not removed:
        sys.exit(EXIT_NOTHING_REMOVED)


@learnings_command.command("export")
@click.argument("repository", metavar="[OWNER/REPO]", required=False)
def export_learnings(repository: str | None) -> None:
    """Print the learnings as [[path_instructions]] TOML tables, oldest first."""
    items = _listed(_repository(repository), "table")
    click.echo(export_toml(items), nl=False)


def export_toml(items: list[dict[str, Any]]) -> str:
    """`[[path_instructions]]` tables, one per learning, oldest first; each text a TOML basic
    string (JSON's escapes are TOML's), so no text can end its string or add a key."""
    parts = [EXPORT_HEADER]
    for item in reversed(items):
        parts.append(
            f"\n# learning {item['id']} of {json.dumps(item['repository'], ensure_ascii=True)}, by "
            f"{json.dumps(item['author'], ensure_ascii=True)}\n"
            "[[path_instructions]]\n"
            'paths = ["**"]\n'
            f"instructions = {json.dumps(item['text'], ensure_ascii=True)}\n"
        )
    return "".join(parts)
