"""`pr-review dismissals list|remove`: the findings repositories dismissed (specification §15).

`ignore` in one of our findings' threads stores a dismissal (jobs/dismissals.py); later reviews
of that repository do not post the finding. `list` shows them, `remove` undoes one. The database
is the jobs database (`pr-review jobs` says which). Exit status: 0 done; 1 nothing to remove,
or the database failed; 2 bad input or configuration.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from pr_review_api.cli.jobs import Format, _format_option, _with_queue
from pr_review_api.jsonutil import dumps_compact

EXIT_NOTHING_REMOVED = 1


@click.group("dismissals")
def dismissals_command() -> None:
    """Findings dismissed with `ignore`: list them, or remove one so it is posted again.

    The database is PR_REVIEW_DATABASE_URL, or the embedded one under PR_REVIEW_DATA_DIR.
    """


@dismissals_command.command("list")
@click.option("--repository", metavar="OWNER/REPO", help="Only this repository's dismissals.")
@_format_option
def list_dismissals(repository: str | None, output_format: Format) -> None:
    """List the dismissed findings, newest first."""

    async def fetch(queue: Any) -> list[dict[str, Any]]:
        from pr_review_api.jobs.dismissals import DatabaseDismissals  # noqa: PLC0415

        found = await DatabaseDismissals(queue.connector.pool.connection).listed(repository)
        return [item.document() for item in found]

    items = _with_queue(fetch, output_format)
    if output_format == "json":
        click.echo(dumps_compact({"dismissals": items}))
        return
    if not items:
        click.echo("no dismissals")
        return
    for item in items:
        where = item["path"] or "-"
        click.echo(
            f"{item['repository']}  {item['fingerprint']}  {where}  {item['title']!r}  "
            f"by {item['dismissed_by']} at {item['dismissed_at']}"
        )


@dismissals_command.command("remove")
@click.argument("repository", metavar="OWNER/REPO")
@click.argument("fingerprint")
@_format_option
def remove_dismissal(repository: str, fingerprint: str, output_format: Format) -> None:
    """Undo a dismissal: the finding may be posted again."""

    async def remove(queue: Any) -> bool:
        from pr_review_api.jobs.dismissals import DatabaseDismissals  # noqa: PLC0415

        return await DatabaseDismissals(queue.connector.pool.connection).remove(
            repository, fingerprint
        )

    removed = _with_queue(remove, output_format)
    if output_format == "json":
        click.echo(dumps_compact({"repository": repository.lower(), "removed": removed}))
    else:
        click.echo("removed" if removed else "no such dismissal")
    if not removed:
        sys.exit(EXIT_NOTHING_REMOVED)
