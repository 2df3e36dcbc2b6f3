"""The `pr-review` command line (specification §4): a thin shell over `run_review()`.

Errors are mapped in one place, `_fail()`: `--format json` prints the HTTP API's error body on
stdout; every other format prints one line, `error: <message> (<code>)`, on stderr. Nothing
ever prints a traceback. Exit status: 0 a validated review, 1 the review ended without one,
2 bad input or configuration.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

import click

from pr_review_api import __version__
from pr_review_api.cli.dismissals import dismissals_command
from pr_review_api.cli.eval import eval_command
from pr_review_api.cli.jobs import jobs_command
from pr_review_api.cli.learnings import learnings_command
from pr_review_api.cli.progress import live_progress
from pr_review_api.cli.worker import worker as worker_command
from pr_review_api.errors import ConfigurationError, Interrupted, InvalidRequest, ReviewError
from pr_review_api.loop.final_review import review_schema_json
from pr_review_api.loop.run import ReviewOptions, run_review
from pr_review_api.loop.workspace import ChangeTarget, LocalTarget, ReviewTarget
from pr_review_api.output.common import OUTPUT_FORMATS, LocalSubject, OutputFormat
from pr_review_api.output.formats import render
from pr_review_api.output.gate_outcome import CheckOutcome
from pr_review_api.output.json import render_json
from pr_review_api.service.hosts import is_loopback
from pr_review_api.settings import load_settings

EXIT_NO_REVIEW = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130
# Codes that mean "fix the command or the configuration", not "the review failed".
INPUT_ERROR_CODES = frozenset(
    {"invalid_request", "invalid_pull_request_url", "invalid_repository", "configuration_error"}
)
# Fixed widths so that `--help` reads the same everywhere (and docs/cli.md can quote it).
HELP_WIDTH = 100
CONTEXT_SETTINGS = {
    "help_option_names": ["-h", "--help"],
    "terminal_width": HELP_WIDTH,
    "max_content_width": HELP_WIDTH,
}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(__version__, "--version", prog_name="pr-review")
def main() -> None:
    """Review GitHub, Gitea and Forgejo pull requests, GitLab merge requests and local git
    revisions with a language model through validated, read-only tools.

    Settings come from the environment and from .env in the working directory; a review needs
    OPENCODE_API_KEY. Run `pr-review review --help` for the exit statuses.
    """


@main.command()
@click.argument("pr_url", required=False, metavar="[PR_URL]")
@click.option(
    "--repo",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Review two revisions of the local git repository at PATH instead of a pull request.",
)
@click.option("--base", metavar="REV", help="With --repo: the revision the change starts from.")
@click.option("--head", metavar="REV", help="With --repo: the revision to review.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(OUTPUT_FORMATS),
    default="text",
    show_default=True,
    help="text for people, json for scripts (the HTTP API's body), markdown for a PR "
    "comment, sarif for code scanning.",
)
@click.option("--trace", is_flag=True, help="Include each round's provider turn and tool calls.")
@click.option(
    "--post",
    is_flag=True,
    help="Publish the validated review on the pull request (needs a token with write access "
    "to pull requests).",
)
@click.option(
    "--automatic",
    is_flag=True,
    help="Honour the skip rules of the base commit's .pr-review.toml: a skipped review asks no "
    "model, exits 0 and (with --post) sets only its check (neutral; action_required for a "
    "title or label rule while fail_on is set). The Action passes it.",
)
@click.option(
    "--check-file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="PATH",
    help="Write the merge gate's outcome (conclusion, title, summary) as JSON to PATH, "
    "whether or not a check run was set (the Action reads it).",
)
def review(  # noqa: PLR0913  (one keyword per option)
    *,
    pr_url: str | None,
    repo: Path | None,
    base: str | None,
    head: str | None,
    output_format: OutputFormat,
    trace: bool,
    post: bool = False,
    automatic: bool = False,
    check_file: Path | None = None,
) -> None:
    """Review the pull request at PR_URL, or --base..--head of the repository at --repo.

    PR_URL is a GitHub pull request, a GitLab merge request or a Gitea or Forgejo pull request
    (on GITEA_SERVER_URL).

    \b
      pr-review review https://github.com/OWNER/REPO/pull/N
      pr-review review https://gitlab.com/GROUP/PROJECT/-/merge_requests/N
      pr-review review https://codeberg.org/OWNER/REPO/pulls/N
      pr-review review --repo . --base main --head HEAD --format markdown

    \b
    Exit status:
      0  a validated final review was printed (or the head was published before, or a skip
         rule of --automatic skipped it)
      1  the review ended without one, or its publication failed (the reason is printed)
      2  bad input or configuration
    """
    target = _target(pr_url, repo, base, head, output_format)
    if post and isinstance(target, LocalTarget):
        _usage("--post needs a pull request URL, not --repo.", output_format)
    try:
        settings = load_settings()
        settings.require_provider_key()
        with live_progress(enabled=_is_terminal(sys.stderr)) as progress:
            result = asyncio.run(
                run_review(
                    target,
                    settings,
                    ReviewOptions(
                        post=post,
                        automatic=automatic,
                        include_trace=trace,
                        progress=progress,
                        on_check=None if check_file is None else _check_writer(check_file),
                    ),
                )
            )
    except ReviewError as exc:
        _fail(exc, output_format)
    except KeyboardInterrupt:
        _fail(Interrupted(), output_format)
    except Exception as exc:  # a bug: say what kind, never the message or a traceback
        _fail(ReviewError(f"An unexpected {type(exc).__name__} ended the review."), output_format)
    color = output_format == "text" and _is_terminal(sys.stdout) and "NO_COLOR" not in os.environ
    local = None
    if isinstance(target, LocalTarget):
        local = LocalSubject(str(target.repo), target.base, target.head)
    text = render(result, output_format, color=color, local=local)
    click.echo(text.rstrip("\n"), color=color)
    publication = result.publication
    if publication is not None and publication.error is not None:
        # specification §4: the review is printed, then the reason its publication failed.
        click.echo(f"error: {publication.error.message} ({publication.error.code})", err=True)
        sys.exit(EXIT_NO_REVIEW)


def _check_writer(path: Path) -> Callable[[CheckOutcome], None]:
    """Writes each outcome the gate completes with (the last one stays)."""

    def write(outcome: CheckOutcome) -> None:
        document = {
            "conclusion": outcome.conclusion,
            "title": outcome.title,
            "summary": outcome.summary,
        }
        try:
            path.write_text(json.dumps(document), encoding="utf-8")
        except OSError:
            click.echo("warning: the --check-file could not be written.", err=True)

    return write


def _target(
    pr_url: str | None,
    repo: Path | None,
    base: str | None,
    head: str | None,
    output_format: OutputFormat,
) -> ReviewTarget:
    if pr_url is not None and repo is not None:
        _usage("give either PR_URL or --repo, not both.", output_format)
    if repo is not None:
        if base is None or head is None:
            _usage("--repo needs both --base and --head.", output_format)
        return LocalTarget(repo=repo, base=base, head=head)
    if base is not None or head is not None:
        _usage("--base and --head go with --repo.", output_format)
    if pr_url is None:
        _usage("give a pull request URL, or --repo with --base and --head.", output_format)
    return ChangeTarget(pr_url)


def _usage(message: str, output_format: OutputFormat) -> NoReturn:
    if output_format == "json":
        click.echo(render_json(InvalidRequest(message[0].upper() + message[1:]).to_body()))
    raise click.UsageError(message)


def _fail(exc: ReviewError, output_format: OutputFormat) -> NoReturn:
    """The one place an error becomes output and an exit status."""
    if output_format == "json":
        click.echo(render_json(exc.to_body()))
    else:
        click.echo(f"error: {exc.message} ({exc.code})", err=True)
    if exc.code == Interrupted.code:
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(EXIT_BAD_INPUT if exc.code in INPUT_ERROR_CODES else EXIT_NO_REVIEW)


def _is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on.",
)
def serve(host: str, port: int) -> None:
    """Run the HTTP API: POST /v1/reviews, GET /healthz, GET /openapi.json.

    Listening on an address other than loopback requires PR_REVIEW_API_KEYS; clients then send
    `Authorization: Bearer <key>`. SIGTERM lets reviews in flight finish before exiting; the
    embedded database and its worker are stopped before `serve` exits.
    """
    try:
        _serve(host, port)
    except KeyboardInterrupt:  # a Ctrl-C during start-up, before the stop signals are ours
        sys.exit(EXIT_INTERRUPTED)


def _serve(host: str, port: int) -> None:
    # Imported here: the web stack takes a while to load and only `serve` needs it.
    import uvicorn  # noqa: PLC0415

    from pr_review_api.service.app import create_app  # noqa: PLC0415
    from pr_review_api.service.server import (  # noqa: PLC0415
        StopRequested,
        StopSignals,
        configure_service_logging,
        listen_socket,
        server_config,
    )

    try:
        settings = load_settings()
        settings.require_provider_key()
        if not settings.pr_review_api_keys and not is_loopback(host):
            raise ConfigurationError(
                "PR_REVIEW_API_KEYS is not set: set it to serve on a non-loopback address, "
                "or use --host 127.0.0.1."
            )
        app = create_app(settings)
        listener = listen_socket(host, port)  # a port in use is one line and exit 2
    except ReviewError as exc:
        _fail(exc, "text")
    configure_service_logging()
    # uvicorn says where it listens only when it binds the socket itself.
    bound_port = listener.getsockname()[1]
    logging.getLogger("pr_review_api.service").info("serving on http://%s:%d", host, bound_port)
    from pr_review_api.jobs.serve_database import service_database  # noqa: PLC0415
    from pr_review_api.metrics import serve_metrics  # noqa: PLC0415

    try:
        # Entered before the database starts: a stop signal from here on unwinds through its
        # cleanup. specification §11: the jobs database (an embedded one and its worker without a
        # URL).
        with StopSignals(), service_database(settings) as settings_with_jobs:
            app = create_app(settings_with_jobs, metrics=serve_metrics(settings))
            try:
                uvicorn.Server(server_config(app, settings_with_jobs, host=host, port=port)).run(
                    sockets=[listener]
                )
            finally:
                listener.close()
    except StopRequested as stop:
        sys.exit(EXIT_INTERRUPTED if stop.signal_number == signal.SIGINT else 0)


@main.command()
@click.argument("which", type=click.Choice(["tools", "review"]))
def schema(which: str) -> None:
    """Print the `tools` value sent to the provider, or the final-review JSON schema."""
    if which == "tools":
        # Imported here: only this subcommand needs the tools module and what it imports.
        from pr_review_api.tools import TOOLS  # noqa: PLC0415

        click.echo(json.dumps(TOOLS, indent=2))
    else:
        # The schema the model is given: with `suggestion` when REVIEW_SUGGESTIONS is on.
        try:
            settings = load_settings()
        except ReviewError as exc:
            _fail(exc, "text")
        click.echo(
            review_schema_json(
                suggestions=settings.review_suggestions, walkthrough=settings.review_walkthrough
            )
        )


main.add_command(eval_command)
main.add_command(worker_command)
main.add_command(jobs_command)
main.add_command(dismissals_command)
main.add_command(learnings_command)
