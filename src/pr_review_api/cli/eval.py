"""`pr-review eval CORPUS [--runs N] [--jobs N] [--format text|json|html]` (specification §§4
and 13), and `pr-review eval compare A.json B.json`.

`eval` is a group whose default command is `run`: a first argument that names no subcommand
(a corpus folder, an option) is `run`'s, so `pr-review eval CORPUS` works as the contract says;
a corpus folder named `compare` or `run` is given as `./compare`.

CORPUS is a built corpus (a folder with corpus.json and its repositories) or a corpus source
(a folder with cases/*.toml, such as this repository's eval/), which is built into a temporary
folder first. Every case is reviewed with the configured provider; the report goes to stdout,
one line per finished review to stderr. Exit status: 0 when every review ran (whatever each
ended with), 1 when the evaluation itself failed, 2 bad input or configuration.

`compare` reads two JSON reports of the same corpus and says, per figure, whether the
difference is beyond noise (evaluation/compare.py); exit 0, or 2 for a report it refuses.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Literal, NoReturn

import click

from pr_review_api.errors import InvalidRequest, ReviewError
from pr_review_api.evaluation.compare import compare_document, read_report, render_compare_text
from pr_review_api.evaluation.corpus import build_corpus, is_built, load_built
from pr_review_api.evaluation.report import render_json, render_text, report_document
from pr_review_api.evaluation.runner import MAX_EVAL_JOBS, ReviewOutcome, run_corpus
from pr_review_api.settings import load_settings

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
_INPUT_ERROR_CODES = frozenset({"invalid_request", "configuration_error"})
_FORMAT = click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for scripts.",
)
DEFAULT_COMMAND = "run"


class _EvalGroup(click.Group):
    """A group whose first argument, when it names no subcommand, belongs to `run`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [DEFAULT_COMMAND, *args]
        return super().parse_args(ctx, args)


@click.group("eval", cls=_EvalGroup)
def eval_command() -> None:
    """Measure review quality on CORPUS: precision, recall and F1 against golden issues.

    \b
      pr-review eval CORPUS [--runs N] [--format text|json]   (the same as `eval run`)
      pr-review eval compare A.json B.json                    which differences are not noise

    See docs/eval.md.
    """


@eval_command.command(DEFAULT_COMMAND)
@click.argument("corpus", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--runs",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="Reviews of each case.",
)
@click.option(
    "--case",
    "cases",
    multiple=True,
    metavar="ID",
    help="Review only this case (repeatable).",
)
@click.option(
    "--jobs",
    type=click.IntRange(1, MAX_EVAL_JOBS),
    default=1,
    show_default=True,
    help="Reviews run at once (for a hosted provider); the report keeps the corpus order.",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="text for people, json for scripts, html for a page with a precision/recall chart.",
)
def run_command(
    corpus: Path,
    runs: int,
    cases: tuple[str, ...],
    jobs: int,
    output_format: Literal["text", "json", "html"],
) -> None:
    """Measure review quality on CORPUS: precision, recall and F1 against golden issues.

    \b
      pr-review eval eval/                 build this repository's corpus, then review it
      pr-review eval BUILT --runs 3 --format json
      pr-review eval eval/ --jobs 4        four reviews at once (a hosted provider)
      pr-review eval eval/ --format html > report.html

    Findings match a golden issue by path and line (within its lines widened by 3).
    See docs/eval.md for the corpus format.
    """
    try:
        settings = load_settings()
        settings.require_provider_key()
        with tempfile.TemporaryDirectory(prefix="pr-review-eval-") as scratch:
            folder = corpus
            if not is_built(corpus):
                folder = Path(scratch) / "corpus"
                build_corpus(corpus, folder)
            built = load_built(folder)
            unknown = set(cases) - {case.id for case in built.cases}
            if unknown:
                raise InvalidRequest("A --case names no case of the corpus.")
            reports = asyncio.run(
                run_corpus(
                    folder,
                    built,
                    settings,
                    runs=runs,
                    cases=cases or None,
                    on_outcome=_progress,
                    jobs=jobs,
                )
            )
    except ReviewError as exc:
        _fail(exc, output_format)
    except (OSError, RuntimeError):  # the builder's git failed, or a folder is unwritable
        _fail(ReviewError("The corpus could not be built or read."), output_format)
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    document = report_document(reports, settings, runs, jobs=jobs)
    if output_format == "html":
        # Imported here: only this format needs the template engine.
        from pr_review_api.evaluation.report_html import render_html  # noqa: PLC0415

        click.echo(render_html(document))
    else:
        click.echo(render_json(document) if output_format == "json" else render_text(document))


@eval_command.command("compare")
@click.argument("first", type=click.Path(path_type=Path))
@click.argument("second", type=click.Path(path_type=Path))
@_FORMAT
def compare_command(first: Path, second: Path, output_format: Literal["text", "json"]) -> None:
    """Compare two JSON reports of the same corpus: per figure, second minus first.

    \b
      pr-review eval eval/ --format json > a.json
      REVIEW_REQUIRE_EVIDENCE=true pr-review eval eval/ --format json > b.json
      pr-review eval compare a.json b.json

    A paired bootstrap over the cases gives each difference (precision, recall, F1) a 95%
    interval; a difference is beyond noise when its interval excludes 0.
    """
    try:
        document = compare_document(read_report(first, "first"), read_report(second, "second"))
    except ReviewError as exc:
        _fail(exc, output_format)
    click.echo(render_json(document) if output_format == "json" else render_compare_text(document))


def _progress(done: int, total: int, outcome: ReviewOutcome) -> None:
    counts = outcome.counts
    click.echo(
        f"[{done}/{total}] {outcome.case_id} run {outcome.run}: {outcome.termination_reason}, "
        f"{counts.findings} findings, {counts.matched_golden}/{counts.golden} golden matched, "
        f"{outcome.tokens} tokens, {outcome.wall_seconds:.1f} s"
        + "".join(f", check {c.expected}->{c.got}" for c in outcome.checks)
        + _understood(outcome),
        err=True,
    )


def _understood(outcome: ReviewOutcome) -> str:
    """What the line adds of specification §21 when it was measured ("" otherwise)."""
    seen = outcome.understood
    parts = [] if seen.walkthrough is None else [f"walkthrough {seen.walkthrough:.2f}"]
    if seen.expected is not None:
        parts.append(f"linked issue {seen.verdict or 'none'} (expected {seen.expected})")
    return "".join(f", {part}" for part in parts)


def _fail(exc: ReviewError, output_format: str) -> NoReturn:
    if output_format == "json":
        click.echo(render_json(exc.to_body()))
    else:
        click.echo(f"error: {exc.message} ({exc.code})", err=True)
    sys.exit(EXIT_BAD_INPUT if exc.code in _INPUT_ERROR_CODES else EXIT_FAILED)
