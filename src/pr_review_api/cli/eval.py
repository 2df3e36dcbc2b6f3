"""`pr-review eval CORPUS [--runs N] [--format text|json|html]` (CONTRACT sections 4 and 13).

CORPUS is a built corpus (a folder with corpus.json and its repositories) or a corpus source
(a folder with cases/*.toml, such as this repository's eval/), which is built into a temporary
folder first. Every case is reviewed with the configured provider; the report goes to stdout,
one line per finished review to stderr. Exit status: 0 when every review ran (whatever each
ended with), 1 when the evaluation itself failed, 2 bad input or configuration.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Literal, NoReturn

import click

from pr_review_api.errors import InvalidRequest, ReviewError
from pr_review_api.evaluation.corpus import build_corpus, is_built, load_built
from pr_review_api.evaluation.report import render_json, render_text, report_document
from pr_review_api.evaluation.runner import ReviewOutcome, run_corpus
from pr_review_api.settings import load_settings

EXIT_BAD_INPUT = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
_INPUT_ERROR_CODES = frozenset({"invalid_request", "configuration_error"})


@click.command("eval")
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
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "html"]),
    default="text",
    show_default=True,
    help="text for people, json for scripts, html for a page with a precision/recall chart.",
)
def eval_command(
    corpus: Path,
    runs: int,
    cases: tuple[str, ...],
    output_format: Literal["text", "json", "html"],
) -> None:
    """Measure review quality on CORPUS: precision, recall and F1 against golden issues.

    \b
      pr-review eval eval/                 build this repository's corpus, then review it
      pr-review eval BUILT --runs 3 --format json
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
                    folder, built, settings, runs=runs, cases=cases or None, on_outcome=_progress
                )
            )
    except ReviewError as exc:
        _fail(exc, output_format)
    except (OSError, RuntimeError):  # the builder's git failed, or a folder is unwritable
        _fail(ReviewError("The corpus could not be built or read."), output_format)
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    document = report_document(reports, settings, runs)
    if output_format == "html":
        # Imported here: only this format needs the template engine.
        from pr_review_api.evaluation.report_html import render_html  # noqa: PLC0415

        click.echo(render_html(document))
    else:
        click.echo(render_json(document) if output_format == "json" else render_text(document))


def _progress(done: int, total: int, outcome: ReviewOutcome) -> None:
    counts = outcome.counts
    click.echo(
        f"[{done}/{total}] {outcome.case_id} run {outcome.run}: {outcome.termination_reason}, "
        f"{counts.findings} findings, {counts.matched_golden}/{counts.golden} golden matched, "
        f"{outcome.tokens} tokens, {outcome.wall_seconds:.1f} s",
        err=True,
    )


def _fail(exc: ReviewError, output_format: str) -> NoReturn:
    if output_format == "json":
        click.echo(render_json(exc.to_body()))
    else:
        click.echo(f"error: {exc.message} ({exc.code})", err=True)
    sys.exit(EXIT_BAD_INPUT if exc.code in _INPUT_ERROR_CODES else EXIT_FAILED)
