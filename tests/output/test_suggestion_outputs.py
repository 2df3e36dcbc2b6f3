"""Every output with suggestions (specification §14), and without: off, byte for byte as before.

The files under tests/data/suggestions-off/ were rendered by the code before suggestions
existed (commit e58bab1), from the same `review_result(every_severity(), trace=True)`.
"""

from __future__ import annotations

import json
from pathlib import Path

from markdown_it import MarkdownIt

from pr_review_api.loop.final_review import review_schema_json
from pr_review_api.loop.prompts import system_prompt
from pr_review_api.model import Finding, Suggestion
from pr_review_api.output import formats
from pr_review_api.output.common import OutputFormat
from pr_review_api.output.inert_markdown import code_block
from tests.builders import finding_model
from tests.output.test_formats import _sarif
from tests.results import every_severity, review_result

BEFORE = Path(__file__).parents[1] / "data" / "suggestions-off"
FILES: dict[OutputFormat, str] = {
    "text": "review.txt",
    "json": "review.json",
    "markdown": "review.md",
    "sarif": "review.sarif",
}
REPLACEMENT = "    validate_name(name)\n    save(record)"


def suggested(replacement: str = REPLACEMENT, start: int = 41, end: int = 43) -> Finding:
    suggestion = Suggestion(start_line=start, end_line=end, replacement=replacement)
    return finding_model().model_copy(update={"suggestion": suggestion})


def test_off_every_output_is_byte_for_byte_as_before() -> None:
    result = review_result(every_severity(), trace=True)
    for output_format, name in FILES.items():
        expected = (BEFORE / name).read_text(encoding="utf-8")
        assert formats.render(result, output_format) == expected, output_format
    assert system_prompt() == (BEFORE / "system-prompt.txt").read_text(encoding="utf-8")
    assert review_schema_json() == (BEFORE / "schema-review.json").read_text(encoding="utf-8")


def test_on_json_carries_the_field_null_or_kept() -> None:
    without = finding_model().model_copy(update={"suggestion": None})
    document = json.loads(formats.render(review_result([suggested(), without]), "json"))
    first, second = document["review"]["findings"]
    assert first["suggestion"] == {"start_line": 41, "end_line": 43, "replacement": REPLACEMENT}
    assert second["suggestion"] is None
    # A null suggestion changes nothing but the JSON's field.
    plain = review_result([finding_model()])
    nulled = review_result([without])
    for output_format in ("text", "markdown", "sarif"):
        assert formats.render(plain, output_format) == formats.render(nulled, output_format)


def test_text_shows_a_kept_suggestion_as_a_small_diff() -> None:
    text = formats.render(review_result([suggested()]), "text")
    assert "Suggested change (lines 41-43):" in text
    assert (
        "        @@ -41,3 +41,2 @@\n        +    validate_name(name)\n        +    save(record)\n"
        in text
    )


def test_text_strips_controls_from_a_suggestion() -> None:
    text = formats.render(review_result([suggested("x = 1\x1b[31m\u202e")]), "text")
    assert "+x = 1[31m\n" in text


def test_markdown_shows_it_as_a_diff_block_that_nothing_escapes() -> None:
    hostile = "x = 1  # ```` @octocat #12 <!-- y -->\n</details>"
    markdown = formats.render(review_result([suggested(hostile, 42, 42)]), "markdown")
    assert "**Suggested change** (line 42):" in markdown
    fences = [t for t in MarkdownIt("commonmark").parse(markdown) if t.type == "fence"]
    (block,) = fences
    assert block.info == "diff"
    assert block.content == "@@ -42,1 +42,2 @@\n+" + hostile.replace("\n", "\n+") + "\n"


def test_sarif_gives_it_as_a_fix_valid_against_the_schema() -> None:
    deleting = suggested("", 7, 7)
    document = _sarif(review_result([suggested(), deleting, finding_model()]))
    kept, deleted, plain = document["runs"][0]["results"]
    (fix,) = kept["fixes"]
    (change,) = fix["artifactChanges"]
    assert (
        change["artifactLocation"] == kept["locations"][0]["physicalLocation"]["artifactLocation"]
    )
    assert change["replacements"] == [
        {
            "deletedRegion": {"startLine": 41, "endLine": 43},
            "insertedContent": {"text": REPLACEMENT},
        }
    ]
    assert fix["description"]["text"] == "Suggested change (lines 41-43)."
    assert deleted["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"] == {
        "text": ""
    }
    assert "fixes" not in plain


def test_a_code_block_is_fenced_longer_than_any_run_inside() -> None:
    assert code_block("suggestion", "a") == "```suggestion\na\n```"
    assert code_block("suggestion", "a ```` b ``") == "`````suggestion\na ```` b ``\n`````"
    assert code_block("diff", "x\n\ny", "  ") == "  ```diff\n  x\n  \n  y\n  ```"
