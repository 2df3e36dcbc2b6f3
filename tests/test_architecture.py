"""docs/architecture.md names every module of the package where it stands: each folder's
paragraph (`**`git/`**`) names each of its modules (`search`, or `search_index/reader` for a
package inside it), and each module at the top has a paragraph of its own (`**`model.py`**`).
A module added without a word in the architecture fails here, and so does one the document
still names in a package it left."""

from __future__ import annotations

import re
from pathlib import Path

import pr_review_api

ROOT = Path(__file__).resolve().parent.parent
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGE = Path(pr_review_api.__file__).parent
NOT_MODULES = {"__init__", "__main__"}
# A paragraph starts with the bold name of what it describes: **`git/`** or **`model.py`**.
HEADING = re.compile(r"^\*\*((?:`[^`]+`(?:, )?)+)\*\*", re.MULTILINE)


def paragraphs(text: str) -> dict[str, str]:
    """Each described name (`git/`, `model.py`) and the text of its paragraph."""
    starts = list(HEADING.finditer(text))
    found: dict[str, str] = {}
    for index, start in enumerate(starts):
        end = starts[index + 1].start() if index + 1 < len(starts) else len(text)
        for name in re.findall(r"`([^`]+)`", start.group(1)):
            found[name] = text[start.start() : end]
    return found


def named(paragraph: str, module: str) -> bool:
    """Whether `module` (a name, or `inner/name` inside the folder) stands in the paragraph as
    a word of code: `name`, `name.attribute`, `inner/name` or `inner.name`."""
    dotted = re.escape(module.replace("/", ".")) + "|" + re.escape(module)
    return re.search(rf"`(?:[\w./]*[./])?(?:{dotted})(?:[.(`]|\b)", paragraph) is not None


def unnamed(text: str) -> list[str]:
    described = paragraphs(text)
    missing = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.stem in NOT_MODULES:
            continue
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        if len(parts) == 1:
            if f"{parts[0]}.py" not in described:
                missing.append(f"{parts[0]}.py")
            continue
        paragraph = described.get(f"{parts[0]}/", "")
        inner = "/".join(parts[1:])
        if not (named(paragraph, inner) or named(paragraph, parts[-1])):
            missing.append("/".join(parts) + ".py")
    return missing


def test_the_architecture_names_every_module_where_it_stands() -> None:
    assert unnamed(ARCHITECTURE.read_text()) == []


def test_a_module_the_architecture_does_not_name_is_found() -> None:
    text = ARCHITECTURE.read_text()
    without_store = re.sub(r"`store(?=[.`])", "`somewhere", text)
    assert "git/store.py" in unnamed(without_store)
    without_model = text.replace("**`model.py`**", "**`the model`**")
    assert "model.py" in unnamed(without_model)
