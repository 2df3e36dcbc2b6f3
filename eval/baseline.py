"""A reviewer with no model: `uv run python eval/baseline.py [CORPUS] [--case ID ...]`.

For each case it reports one finding, at the head line of the first `@@` hunk of
`git diff -U0 base head` (the first changed line of the first changed file, in path order),
and scores it with pr_review_api.evaluation.scoring, as `pr-review eval` scores a review.
A corpus on which this scores well rewards pointing into the diff, not finding the defect.
CORPUS is a corpus source (default: this folder) or a built corpus. The totals are printed
as `pr-review eval` prints them; `--format json` prints them as one document.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from pr_review_api.errors import ReviewError
from pr_review_api.evaluation.corpus import (
    CLEAN_KINDS,
    BuiltCase,
    build_corpus,
    is_built,
    load_built,
)
from pr_review_api.evaluation.scoring import Counts, Located, score_review

SOURCE = Path(__file__).resolve().parent
_FILE = re.compile(r"^\+\+\+ b/(.+)$")
_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")


def first_change(repo: Path, base: str, head: str) -> Located | None:
    """The path and head line of the first hunk of the zero-context diff (None: no change).

    A hunk that only removes lines names the line before the removal (at least line 1).
    """
    diff = subprocess.run(
        ["git", "diff", "--no-color", "--no-ext-diff", "-U0", base, head],
        cwd=repo,
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    path = None
    for line in diff.splitlines():
        named = _FILE.match(line)
        if named:
            path = named.group(1)
            continue
        hunk = _HUNK.match(line)
        if hunk and path is not None:
            return Located(path, max(int(hunk.group(1)), 1))
    return None


def baseline_counts(folder: Path, case: BuiltCase) -> Counts:
    """The baseline's one finding for a built case, scored against its golden issues."""
    found = first_change(folder / case.repository, case.base, case.head)
    return score_review([] if found is None else [found], case.golden)


def _figures(counts: Counts, cases: int) -> dict[str, object]:
    def ratio(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return {
        "cases": cases,
        "findings": counts.findings,
        "matched_findings": counts.matched_findings,
        "golden": counts.golden,
        "matched_golden": counts.matched_golden,
        "precision": ratio(counts.precision),
        "recall": ratio(counts.recall),
        "f1": ratio(counts.f1),
    }


def _cell(value: object) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, nargs="?", default=SOURCE)
    parser.add_argument("--case", dest="cases", action="append", metavar="ID")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    args = parser.parse_args()
    try:
        with tempfile.TemporaryDirectory(prefix="pr-review-baseline-") as scratch:
            folder = args.corpus
            if not is_built(folder):
                folder = Path(scratch) / "corpus"
                build_corpus(args.corpus, folder)
            corpus = load_built(folder)
            chosen = [c for c in corpus.cases if not args.cases or c.id in args.cases]
            if args.cases and len(chosen) != len(set(args.cases)):
                print("error: a --case names no case of the corpus", file=sys.stderr)
                return 2
            scored = {case.id: baseline_counts(folder, case) for case in chosen}
    except ReviewError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    defects = [c.id for c in chosen if c.kind not in CLEAN_KINDS]
    total = sum(scored.values(), Counts())
    document = {
        "cases": {case_id: _figures(counts, 1) for case_id, counts in scored.items()},
        "total": _figures(total, len(chosen)),
        "defect_cases": _figures(sum((scored[i] for i in defects), Counts()), len(defects)),
    }
    if args.format == "json":
        print(json.dumps(document, indent=2))
        return 0
    for case_id, counts in scored.items():
        mark = "-" if not counts.golden else f"{counts.matched_golden}/{counts.golden}"
        print(f"{case_id:<48} findings {counts.findings}  golden matched {mark}")
    for name in ("total", "defect_cases"):
        figures = document[name]
        assert isinstance(figures, dict)
        print(
            f"{name.upper().replace('_', ' ')}: {figures['cases']} cases, "
            f"{figures['findings']} findings, "
            f"golden matched {figures['matched_golden']}/{figures['golden']}, "
            f"precision {_cell(figures['precision'])}, recall {_cell(figures['recall'])}, "
            f"F1 {_cell(figures['f1'])}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
