"""The output formats: text, JSON, Markdown and SARIF renderings of a ReviewResult."""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import jsonschema  # type: ignore[import-untyped]  # no stubs in the lock file
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from markdown_it.token import Token

from pr_review_api import __version__
from pr_review_api.model import SEVERITIES, Publication, PublicationError
from pr_review_api.output import formats
from pr_review_api.output.common import clean
from pr_review_api.output.inert_markdown import WORD_JOINER, break_references
from pr_review_api.output.json import render_json
from pr_review_api.output.markdown import md_code, md_escape, md_inline, render_markdown
from pr_review_api.output.sarif import render_sarif
from pr_review_api.output.text import render_text
from tests.builders import finding_model
from tests.conftest import examples
from tests.github.test_publish_text import FORBIDDEN, GITHUB_RULES, rendered, visible_text
from tests.results import (
    HEAD_SHA,
    HOSTILE,
    MERGE_BASE_SHA,
    PR_URL,
    every_severity,
    review_result,
)

SARIF_SCHEMA_PATH = Path(__file__).parents[1] / "data" / "sarif-schema-2.1.0.json"
ANSI = re.compile(r"\x1b\[[0-9;]*m")
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


# --- JSON ------------------------------------------------------------------------------------


def test_json_is_the_compact_success_document() -> None:
    result = review_result(trace=True)
    rendered = formats.render(result, "json")
    assert json.loads(rendered) == result.model_dump(mode="json")
    assert rendered == json.dumps(
        result.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":")
    )


def test_json_keeps_hostile_text_exactly() -> None:
    result = review_result([finding_model(title=HOSTILE, explanation=HOSTILE)], summary=HOSTILE)
    document = json.loads(formats.render(result, "json"))
    assert document["review"]["summary"] == HOSTILE
    assert document["review"]["findings"][0]["title"] == HOSTILE


# --- text ------------------------------------------------------------------------------------


def test_text_groups_findings_by_severity_most_severe_first() -> None:
    text = render_text(review_result(every_severity()))
    headings = [text.index(f"\n{severity.upper()} (1)\n") for severity in SEVERITIES]
    assert headings == sorted(headings)
    titles = [text.index(f"{s.capitalize()} finding") for s in SEVERITIES]
    assert titles == sorted(titles)


def test_text_shows_location_summary_notes_and_usage_footer() -> None:
    text = render_text(review_result())
    assert "Review of acme/widget#7" in text
    assert PR_URL in text
    assert "src/widgets/service.py:42  Validation occurs after the write" in text
    assert "Validation occurs after persistence." in text
    assert "Evidence: save() runs before validate_name()." in text
    assert "Recommendation: Validate before saving." in text
    assert "- Inspected the service and its call sites." in text
    assert "Findings: 1 high" in text
    footer = text.rstrip("\n").splitlines()[-1]
    assert footer == (
        "deepseek-v4-flash · 2 rounds · 1 tool call · 8,760 tokens (8,400 prompt, 360 completion)"
    )


def test_text_location_without_a_line_is_the_path_alone() -> None:
    text = render_text(review_result([finding_model(path="README.md", line=None)]))
    assert "  README.md  Validation occurs after the write" in text


def test_text_says_so_when_there_are_no_findings() -> None:
    text = render_text(review_result([], notes=[]))
    assert "Findings: no findings" in text
    assert "Notes" not in text


def test_text_for_a_local_review_names_no_pull_request() -> None:
    text = render_text(review_result(pull_request=False))
    assert text.startswith("Review of a local repository\n")


def test_text_has_no_colour_unless_asked() -> None:
    assert not ANSI.search(render_text(review_result(every_severity())))


def test_text_has_colour_when_asked_and_the_same_words() -> None:
    result = review_result(every_severity())
    coloured = render_text(result, color=True)
    assert ANSI.search(coloured)
    assert ANSI.sub("", coloured) == render_text(result)


def test_text_strips_terminal_controls_and_bidi_overrides_from_model_text() -> None:
    hostile = finding_model(title=HOSTILE, explanation=HOSTILE, evidence=HOSTILE, path="a\x1bb.py")
    result = review_result([hostile], summary=HOSTILE, notes=[HOSTILE])
    for color in (False, True):
        text = ANSI.sub("", render_text(result, color=color))
        assert not UNSAFE.search(text.replace("\n", "")), color
        assert "[31mred[0m" in text  # the words stay, the escape character goes


def test_text_with_trace_lists_rounds_and_tool_calls() -> None:
    text = render_text(review_result(trace=True))
    assert "round 1: finish_reason=tool_calls → execute_tools · 4,380 tokens" in text
    assert 'read_repository_file {"path":"src/widgets/service.py"' in text
    assert "→ ok, 6,240 bytes, 3 ms" in text
    assert "round 2: finish_reason=stop → final_review" in text


@pytest.mark.parametrize(
    ("publication", "line"),
    [
        (
            Publication(status="published", url="https://x.test/r/1"),
            "Published: https://x.test/r/1",
        ),
        (
            Publication(status="already_published", url="https://x.test/r/1"),
            "Already published: https://x.test/r/1",
        ),
        (
            Publication(
                status="failed",
                error=PublicationError(code="github_publish_failed", message="GitHub said no."),
            ),
            "Publishing failed: GitHub said no.",
        ),
    ],
)
def test_text_ends_with_what_publishing_did(publication: Publication, line: str) -> None:
    result = review_result()
    assert render_text(result).splitlines()[-1] != line
    result.publication = publication
    assert render_text(result).splitlines()[-1] == line


def test_text_without_trace_has_no_trace_section() -> None:
    assert "Trace" not in render_text(review_result())


# --- Markdown --------------------------------------------------------------------------------


def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark").enable("table")


def _inline_text(token: Token) -> str:
    """What a reader sees of an inline token; fails on any markup inside it."""
    parts = []
    for child in token.children or []:
        assert child.type in {"text", "softbreak"}, (child.type, child.content)
        parts.append("\n" if child.type == "softbreak" else child.content)
    return "".join(parts)


def _expected_paragraphs(text: str) -> list[str]:
    """The paragraphs md_escape must show for `text`: cleaned, lines trimmed, GitHub's
    mention, reference and autolink filters defused (specification §10)."""
    lines = [break_references(line.strip()) for line in clean(text).split("\n")]
    joined = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
    return [paragraph for paragraph in joined.split("\n\n") if paragraph]


def _rendered_paragraphs(markdown: str) -> list[str]:
    tokens = _markdown().parse(markdown)
    kinds = {token.type for token in tokens}
    assert kinds <= {"paragraph_open", "inline", "paragraph_close"}, kinds
    return [_inline_text(token) for token in tokens if token.type == "inline"]


def test_markdown_escape_shows_hostile_text_literally() -> None:
    escaped = md_escape(HOSTILE)
    assert _rendered_paragraphs(escaped) == _expected_paragraphs(HOSTILE)
    assert "<" not in escaped
    assert "\x1b" not in escaped
    assert "\u202e" not in escaped


@settings(max_examples=examples(300), deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(
            [*"ab1 \t\n\r.)#*_-+=>|<&`~[]()!\\:@{}\"'/", "\u00e9", "\u3000", "\x1b", "\u202e"]
        ),
        max_size=60,
    )
)
def test_markdown_escape_never_lets_text_become_markup(text: str) -> None:
    assert _rendered_paragraphs(md_escape(text)) == _expected_paragraphs(text)


@pytest.mark.parametrize("text", FORBIDDEN)
def test_markdown_report_text_matches_no_github_filter(text: str) -> None:
    """Bare URLs, `#12`, `acme/widget#7`, `GH-3` and mentions in model text stay plain text in
    the `--format markdown` report, by GitHub's own rules (as tests/github/test_publish_text.py has
    them), so pasting the report into a comment links and notifies nobody."""
    result = review_result([finding_model(title=text, explanation=text, evidence=text)])
    result = result.model_copy(
        update={"review": result.review.model_copy(update={"summary": text, "notes": [text]})}
    )
    shown = visible_text(rendered(render_markdown(result)))
    shown = shown.replace("acme/widget#\u20607", "")  # the heading's own subject, defused
    for rule, pattern in GITHUB_RULES.items():
        assert pattern.search(shown) is None, (rule, text)


def test_markdown_code_spans_only_plain_paths() -> None:
    assert md_code("src/app.py:42") == "`src/app.py:42`"
    assert md_code("a`b|c.py") == "a\\`b\\|c.py"
    assert md_code("x <y>.py") == "x &lt;y&gt;.py"


def test_markdown_has_heading_summary_and_a_section_per_severity() -> None:
    markdown = render_markdown(review_result(every_severity()))
    # The subject is defused too: GitHub would turn `acme/widget#7` into a cross-reference.
    assert markdown.startswith(f"## pr-review: acme/widget#{WORD_JOINER}7\n")
    assert "### Summary\n\nValidation occurs after persistence." in markdown
    sections = [markdown.index(f" {s.capitalize()} (1)\n") for s in SEVERITIES]
    assert sections == sorted(sections)
    assert "`src/critical.py:13`" in markdown
    assert "`docs/a.md`" in markdown
    assert "| 🔴 critical | 1 |" in markdown


def test_markdown_structure_survives_hostile_model_text() -> None:
    hostile = finding_model(
        title=HOSTILE,
        explanation=HOSTILE,
        evidence=HOSTILE,
        recommendation=HOSTILE,
        path="src/a|b `c`.py",
    )
    result = review_result(
        [hostile, finding_model("low")], summary=HOSTILE, notes=[HOSTILE, "fine"]
    )
    tokens = _markdown().parse(render_markdown(result))

    headings = [
        (t.tag, tokens[i + 1].content) for i, t in enumerate(tokens) if t.type == "heading_open"
    ]
    assert [tag for tag, _ in headings] == ["h2", "h3", "h3", "h4", "h3", "h4", "h3"]
    assert headings[3][1] == md_inline(HOSTILE)
    html = [t.content.strip() for t in tokens if t.type in {"html_block", "html_inline"}]
    assert all(re.fullmatch(r"</?sub>", fragment) for fragment in html), html
    inline_html = [
        child
        for token in tokens
        if token.type == "inline"
        for child in token.children or []
        if child.type in {"html_inline", "link_open", "image", "code_inline"}
        and child.content not in {"<sub>", "</sub>"}
    ]
    # Code spans are ours only: the two commits, the coverage line's not-inspected path and the
    # one plain finding path; no links, images, HTML.
    assert [(c.type, c.content) for c in inline_html] == [
        ("code_inline", HEAD_SHA[:12]),
        ("code_inline", MERGE_BASE_SHA[:12]),
        ("code_inline", "src/widgets/models.py"),
        ("code_inline", "src/widgets/service.py:42"),
    ]
    assert not [t for t in tokens if t.type in {"fence", "code_block", "blockquote_open", "hr"}]
    items = [t for t in tokens if t.type == "list_item_open"]
    assert len(items) == 2  # the two notes, and nothing the model wrote
    rows = [t for t in tokens if t.type == "tr_open"]
    assert len(rows) == 3  # the severity table: header, high, low


def test_markdown_trace_is_a_collapsed_table() -> None:
    markdown = render_markdown(review_result(trace=True))
    assert "<details>\n<summary>Trace (2 rounds)</summary>" in markdown
    assert "| 1 | tool\\_calls | execute_tools | read\\_repository\\_file |" in markdown


def test_markdown_footer_has_usage() -> None:
    markdown = render_markdown(review_result())
    assert markdown.rstrip().endswith("8,760 tokens (8,400 prompt, 360 completion)</sub>")


# --- SARIF -----------------------------------------------------------------------------------


@cache
def _sarif_validator() -> Any:
    schema = json.loads(SARIF_SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())


def _sarif(result: Any) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(render_sarif(result))
    errors = sorted(_sarif_validator().iter_errors(document), key=str)
    assert not errors, [error.message for error in errors]
    return document


def test_the_shipped_schema_is_the_official_sarif_2_1_0_schema() -> None:
    schema = json.loads(SARIF_SCHEMA_PATH.read_text(encoding="utf-8"))
    assert schema["id"].endswith("/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json")
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]
    assert len(schema["definitions"]) == 52


def test_sarif_validates_against_the_official_schema() -> None:
    for result in (
        review_result(every_severity(), trace=True),
        review_result([]),
        review_result(pull_request=False),
    ):
        _sarif(result)


def test_sarif_an_invalid_document_is_caught_by_the_validator() -> None:
    document = json.loads(render_sarif(review_result()))
    document["runs"][0]["results"][0]["level"] = "critical"
    assert list(_sarif_validator().iter_errors(document))


def test_sarif_has_one_run_with_the_pr_review_driver_and_rules() -> None:
    document = _sarif(review_result(every_severity()))
    assert document["version"] == "2.1.0"
    assert document["$schema"].startswith("https://")
    (run,) = document["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "pr-review"
    assert driver["semanticVersion"] == __version__
    # Optional in SARIF 2.1.0, and no page would be true to name.
    assert "informationUri" not in driver
    rule_ids = [rule["id"] for rule in driver["rules"]]
    assert rule_ids == [f"pr-review/{severity}" for severity in SEVERITIES]
    assert len(run["results"]) == 5


@pytest.mark.parametrize(
    ("severity", "level"),
    [
        ("critical", "error"),
        ("high", "error"),
        ("medium", "warning"),
        ("low", "note"),
        ("info", "note"),
    ],
)
def test_sarif_level_follows_severity(severity: Any, level: str) -> None:
    document = _sarif(review_result([finding_model(severity)]))
    (result,) = document["runs"][0]["results"]
    assert result["level"] == level
    assert result["ruleId"] == f"pr-review/{severity}"
    rules = document["runs"][0]["tool"]["driver"]["rules"]
    assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    assert rules[result["ruleIndex"]]["defaultConfiguration"]["level"] == level
    assert result["properties"]["severity"] == severity


def test_sarif_result_location_message_and_region() -> None:
    document = _sarif(review_result())
    (result,) = document["runs"][0]["results"]
    physical = result["locations"][0]["physicalLocation"]
    assert physical["artifactLocation"] == {
        "uri": "src/widgets/service.py",
        "uriBaseId": "%SRCROOT%",
    }
    assert physical["region"] == {"startLine": 42}
    assert result["message"]["text"].startswith("Validation occurs after the write\n\n")
    assert "Recommendation: Validate before saving." in result["message"]["text"]


def test_sarif_finding_without_a_line_has_no_region() -> None:
    document = _sarif(review_result([finding_model(line=None)]))
    physical = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert "region" not in physical


@pytest.mark.parametrize(
    "path",
    ["my dir/a b.py", "c:/x.py", "a#b?c%d.py", "ünï/côdé.py", "a|b`c<d>.py", "x:y/z.py"],
)
def test_sarif_uri_is_a_relative_reference_to_the_same_path(path: str) -> None:
    document = _sarif(review_result([finding_model(path=path)]))
    uri = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"][
        "uri"
    ]
    parts = urlsplit(uri)
    assert (parts.scheme, parts.netloc, parts.query, parts.fragment) == ("", "", "", "")
    assert uri.isascii()
    assert unquote(uri) == path


def test_sarif_fingerprint_is_stable_when_lines_move() -> None:
    def fingerprint(**changes: Any) -> str:
        document = _sarif(review_result([finding_model(**changes)]))
        value: str = document["runs"][0]["results"][0]["partialFingerprints"]["prReviewFinding/v1"]
        return value

    assert fingerprint(line=42) == fingerprint(line=99) == fingerprint(line=None)
    assert fingerprint() != fingerprint(title="Another problem")


def test_sarif_points_at_the_reviewed_commit() -> None:
    run = _sarif(review_result())["runs"][0]
    assert run["versionControlProvenance"] == [
        {"repositoryUri": "https://github.com/acme/widget", "revisionId": HEAD_SHA}
    ]
    assert "versionControlProvenance" not in _sarif(review_result(pull_request=False))["runs"][0]


def test_sarif_keeps_hostile_text_as_data() -> None:
    document = _sarif(review_result([finding_model(title=HOSTILE)], summary=HOSTILE))
    result = document["runs"][0]["results"][0]
    assert result["message"]["text"].startswith(HOSTILE)
    assert document["runs"][0]["properties"]["summary"] == HOSTILE


def test_render_dispatches_every_format() -> None:
    result = review_result()
    assert formats.render(result, "text") == render_text(result)
    assert formats.render(result, "markdown") == render_markdown(result)
    assert formats.render(result, "sarif") == render_sarif(result)
    assert formats.render(result, "json") == render_json(result.model_dump(mode="json"))
