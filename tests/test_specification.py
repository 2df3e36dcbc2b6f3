"""Citations a reader can follow: every `specification §n` in the code, the tests, the benchmarks
and the docs names a section docs/specification.md has, its contents lead to its headings, and
the code cites no document the repository does not ship (an outside contract's numbered
sections, or numbered issues)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPECIFICATION = ROOT / "docs" / "specification.md"
CITING = ("src", "tests", "bench", "docs")
SUFFIXES = {".py", ".md", ".toml", ".yml", ".yaml", ".txt"}

# `### 10. Publishing ...` and `### T4. The turn checks`.
HEADING = re.compile(r"^### (T?\d+)\. (.+)$", re.MULTILINE)
SECTION = r"T?\d+"
# `specification §10`, `specification §§10, 17`, `specification §§4 and 13`, `§§10/11`, across a
# line break too; the document itself cites its own sections as bare `§n`.
CITATION = re.compile(
    rf"specification\s+(?:#\s*)?§§?({SECTION}(?:\s*(?:,|/|and|-|–)\s*§?{SECTION})*)"
)
BARE = re.compile(rf"§§?({SECTION}(?:\s*(?:,|/|and|-|–)\s*§?{SECTION})*)")
# What the rewrite to `specification §n` replaces, and what a numbered issue looks like.
OUTSIDE_CONTRACT = re.compile(r"\bCONTRACT(?:\.md)?(?:\s+sections?)?\s+(?:#\s*)?\d")
NUMBERED_ISSUE = re.compile(r"\b[Ii]ssues?\s+\d")
TOC_LINK = re.compile(r"\]\(#([^)]+)\)")


def sections() -> dict[str, str]:
    return dict(HEADING.findall(SPECIFICATION.read_text(encoding="utf-8")))


def files(*folders: str) -> list[Path]:
    return sorted(
        path
        for folder in folders
        for path in (ROOT / folder).rglob("*")
        if path.suffix in SUFFIXES and path.is_file() and "__pycache__" not in path.parts
    )


def cited(text: str, pattern: re.Pattern[str]) -> list[str]:
    return [number for match in pattern.finditer(text) for number in re.findall(SECTION, match[1])]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as `-`."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def test_the_sections_are_numbered_as_they_are_cited() -> None:
    numbered = list(sections())
    part_one = [name for name in numbered if not name.startswith("T")]
    part_two = [name for name in numbered if name.startswith("T")]
    assert part_one == [str(n) for n in range(1, len(part_one) + 1)]
    assert part_two == [f"T{n}" for n in range(1, len(part_two) + 1)]
    assert len(part_one) >= 21  # the numbers the code has always cited keep their meaning


def test_the_contents_lead_to_every_section() -> None:
    text = SPECIFICATION.read_text(encoding="utf-8")
    anchors = {slug(f"{number}. {title}") for number, title in sections().items()}
    linked = set(TOC_LINK.findall(text))
    assert linked <= anchors, f"contents link to no heading: {sorted(linked - anchors)}"
    assert anchors <= linked, f"sections missing from the contents: {sorted(anchors - linked)}"


def test_every_citation_names_a_section_that_exists() -> None:
    known = set(sections())
    dangling = [
        f"{path.relative_to(ROOT)}: §{number}"
        for path in files(*CITING)
        for number in cited(path.read_text(encoding="utf-8"), CITATION)
        if number not in known
    ]
    own = cited(SPECIFICATION.read_text(encoding="utf-8"), BARE)
    dangling += [f"docs/specification.md: §{number}" for number in own if number not in known]
    assert not dangling, dangling


def test_the_citations_are_read_where_they_are() -> None:
    # The scan above must see the forms the code uses, or it proves nothing.
    text = "(specification §10), specification §§10, 17 and\n    # specification §§4\nand 13"
    assert cited(text, CITATION) == ["10", "10", "17", "4", "13"]
    assert cited("a stop turn (specification §T5's checks)", CITATION) == ["T5"]


def test_the_code_cites_no_document_the_repository_does_not_ship() -> None:
    this = Path(__file__).resolve()
    outside = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        for path in files("src", "tests", "bench")
        if path != this
        for text in [path.read_text(encoding="utf-8")]
        for match in OUTSIDE_CONTRACT.finditer(text)
    ]
    assert not outside, f"cite `specification §n` instead: {outside}"
    issues = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
        for path in files("src", "bench")
        for text in [path.read_text(encoding="utf-8")]
        for match in NUMBERED_ISSUE.finditer(text)
    ]
    assert not issues, f"name the rule, not the issue: {issues}"
