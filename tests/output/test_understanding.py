"""output/understanding.py: the walkthrough and linked issues in every output (specification §21),
and kept suggestions shown whole in the text and Markdown reports (specification §14); off, nothing
shows."""

from __future__ import annotations

import json
from pathlib import Path

from markdown_it import MarkdownIt

from pr_review_api.git.repository import PinnedRepository
from pr_review_api.github.layout import render_review_body
from pr_review_api.gitlab.note_text import render_note
from pr_review_api.loop.final_review import parse_final_review, review_schema_json
from pr_review_api.loop.prompts import system_prompt
from pr_review_api.loop.understanding import NO_UNDERSTANDING
from pr_review_api.model import LinkedIssue, ReviewResult, WalkthroughEntry
from pr_review_api.output import formats
from pr_review_api.output.gate_outcome import CheckOutcome
from pr_review_api.output.inert_markdown import escape_inline
from pr_review_api.output.understanding import MAX_OPEN_WALKTHROUGH_ROWS, with_linked_issues
from pr_review_api.publishing.placement import Placement
from tests.builders import finding_model
from tests.gitrepo import GitRepo
from tests.results import HOSTILE, every_severity, review_result

BEFORE = Path(__file__).parents[1] / "data" / "suggestions-off"
ENTRIES = [
    WalkthroughEntry(paths=["src/a.py", "src/b.py"], summary="Validation moves first."),
    WalkthroughEntry(paths=["docs/x.md"], summary="The page says so."),
]
VERDICT = LinkedIssue(ref="#12", addressed="partly", explanation="Only the API validates.")


def understood(entries: list[WalkthroughEntry] | None = None, **extra: object) -> ReviewResult:
    result = review_result([finding_model()])
    update: dict[str, object] = {"walkthrough": ENTRIES if entries is None else entries, **extra}
    return result.model_copy(update={"review": result.review.model_copy(update=update)})


def test_off_the_prompt_schema_and_outputs_are_as_before() -> None:
    assert system_prompt(understanding=NO_UNDERSTANDING) == (
        BEFORE / "system-prompt.txt"
    ).read_text(encoding="utf-8")
    assert review_schema_json() == (BEFORE / "schema-review.json").read_text(encoding="utf-8")
    result = review_result(every_severity(), trace=True)
    assert formats.render(result, "markdown") == (BEFORE / "review.md").read_text(encoding="utf-8")
    assert formats.render(result, "text") == (BEFORE / "review.txt").read_text(encoding="utf-8")


def test_text_and_markdown_show_the_walkthrough_before_the_findings() -> None:
    result = understood(linked_issues=[VERDICT])
    text = formats.render(result, "text")
    assert text.index("Walkthrough\n  src/a.py, src/b.py\n      Validation moves first.") < (
        text.index("Findings:")
    )
    assert "Linked issues\n  #12: partly\n      Only the API validates." in text
    markdown = formats.render(result, "markdown")
    assert markdown.index("### Walkthrough") < markdown.index("### 🟠 High")
    assert "| `src/a.py`, `src/b.py` | Validation moves first. |" in markdown
    assert "| \\#12 | partly | Only the API validates. |" in markdown.replace("\u2060", "")


def test_hostile_summaries_stay_inside_their_cells() -> None:
    entries = [WalkthroughEntry(paths=["a|b.py"], summary=HOSTILE[:300])]
    markdown = formats.render(understood(entries), "markdown")
    body, _ = render_review_body(understood(entries), Placement())
    for text in (markdown, body):
        tokens = MarkdownIt("commonmark").enable("table").parse(text)
        first = next(i for i, t in enumerate(tokens) if t.type == "table_open")
        last = next(i for i, t in enumerate(tokens) if t.type == "table_close")
        cells = [c.type for t in tokens[first:last] for c in t.children or []]
        assert not {"html_inline", "link_open", "image"} & set(cells)
        rows = [t for t in tokens[first:last] if t.type == "tr_open"]
        assert len(rows) == 2  # the header and the one entry: no cell broke out


def test_a_long_walkthrough_folds_into_details_on_both_forges() -> None:
    entries = [
        WalkthroughEntry(paths=[f"src/m{n}.py"], summary=f"Module {n} changes.")
        for n in range(MAX_OPEN_WALKTHROUGH_ROWS + 1)
    ]
    github, _ = render_review_body(understood(entries), Placement())
    gitlab, _ = render_note(understood(entries), Placement())
    for body in (github, gitlab):
        assert "<details>\n<summary>Walkthrough: 9 changed files in 9 entries</summary>" in body
        assert body.index("</details>") < body.index("<!-- pr-review:head=")
    short, _ = render_review_body(understood(), Placement())
    assert "#### Walkthrough" in short
    assert "<details>" not in short


def test_the_walkthrough_keeps_within_the_body_size() -> None:
    entries = [
        WalkthroughEntry(paths=[f"src/{'x' * 200}{n}.py"], summary="y" * 300) for n in range(2000)
    ]
    body, _ = render_review_body(understood(entries), Placement())
    assert len(body) <= 60_000
    assert "more rows did not fit." in body


def test_the_gate_summary_and_brief_carry_the_verdicts() -> None:
    outcome = CheckOutcome("success", "0 findings", "**Findings:** none", brief="0 findings.")
    review = understood([], linked_issues=[VERDICT]).review
    shown = with_linked_issues(outcome, review, escape_inline)
    assert "### Linked issues" in shown.summary
    assert "| partly |" in shown.summary
    assert shown.brief == "0 findings; linked issues: #12 partly."
    assert with_linked_issues(outcome, understood([]).review, escape_inline) is outcome


def test_reports_show_a_kept_suggestion_with_the_lines_it_replaces(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    base = repo.commit_files({"s.py": "pass\n"})
    head = repo.commit_files({"s.py": "def f(x):\n    save(x)\n    check(x)\n"})
    pinned = PinnedRepository.open(repo.git_dir, base, head)
    content = (
        '{"summary": "s", "notes": [], "findings": [{"severity": "high", "title": "t", '
        '"explanation": "e", "path": "s.py", "line": 2, "evidence": "v", '
        '"recommendation": "r", "suggestion": {"start_line": 2, "end_line": 3, '
        '"replacement": "    check(x)\\n    save(x)"}}]}'
    )
    review = parse_final_review(content, pinned, suggestions=True)
    result = review_result([]).model_copy(update={"review": review})
    diff = "@@ -2,2 +2,2 @@\n-    save(x)\n-    check(x)\n+    check(x)\n+    save(x)"
    text = formats.render(result, "text")
    assert diff.replace("\n", "\n        ") in text
    markdown = formats.render(result, "markdown")
    assert f"```diff\n{diff}\n```" in markdown
    assert '"suggestion":{"start_line":2' in formats.render(result, "json").replace(" ", "")


def test_sarif_carries_them_in_the_runs_properties_only_when_present() -> None:
    plain = json.loads(formats.render(understood([]), "sarif"))
    assert plain["runs"][0]["properties"]["walkthrough"] == []
    off = json.loads(formats.render(review_result([finding_model()]), "sarif"))
    assert "walkthrough" not in off["runs"][0]["properties"]
    shown = json.loads(formats.render(understood(linked_issues=[VERDICT]), "sarif"))
    properties = shown["runs"][0]["properties"]
    assert properties["linked_issues"] == [VERDICT.model_dump()]
    assert properties["walkthrough"][0]["paths"] == ["src/a.py", "src/b.py"]
