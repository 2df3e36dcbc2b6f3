"""Renderers of a successful review: JSON, text for terminals, Markdown for PR comments, SARIF.

One module per format (`text`, `json`, `markdown`, `sarif`) over `common`; this module picks
one by name and re-exports their public names.

Everything the model wrote (summary, findings, notes, tool-call arguments in the trace) is
untrusted. The text renderer strips control and bidirectional-override characters so a review
cannot drive the terminal or reorder what the reader sees; the Markdown renderer also escapes
every construct that could break out of the comment's structure (tables, HTML, code fences,
links, headings, mentions). JSON and SARIF carry the text unchanged: JSON escaping is enough.
"""

from __future__ import annotations

from pr_review_api.model import ReviewResult
from pr_review_api.output.common import (
    LocalSubject,
    OutputFormat,
)
from pr_review_api.output.json import render_json
from pr_review_api.output.markdown import render_markdown
from pr_review_api.output.sarif import (
    render_sarif,
)
from pr_review_api.output.text import render_text


def render(
    result: ReviewResult,
    output_format: OutputFormat,
    *,
    color: bool = False,
    local: LocalSubject | None = None,
) -> str:
    """`result` in the named format (colour applies to text only). `local` names a local
    review's repository and revisions as the user gave them, for the text header."""
    if output_format == "json":
        return render_json(result.model_dump(mode="json"))
    if output_format == "markdown":
        return render_markdown(result)
    if output_format == "sarif":
        return render_sarif(result)
    return render_text(result, color=color, local=local)
