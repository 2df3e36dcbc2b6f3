"""Build this corpus into git repositories: `uv run python eval/build.py TARGET [--check]`.

TARGET must be empty or absent. Each case of eval/cases/*.toml becomes TARGET/repos/<id> with a
base and a head commit (fixed author and dates, so the SHAs are the same on every machine), and
TARGET/corpus.json names them with their golden issues. `--check` then proves every golden
range exists at the head and lies in the diff. `pr-review eval eval/` builds into a temporary
folder by itself; build here to keep the repositories, or to review a case by hand with
`pr-review review --repo TARGET/repos/<id> --base <base> --head <head>`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pr_review_api.errors import ReviewError
from pr_review_api.evaluation.corpus import build_corpus, check_case

SOURCE = Path(__file__).resolve().parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", type=Path, help="an empty or new folder")
    parser.add_argument("--check", action="store_true", help="check every golden issue")
    args = parser.parse_args()
    try:
        built = build_corpus(SOURCE, args.target)
    except ReviewError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return 2
    problems = (
        [p for case in built.cases for p in check_case(args.target, case)] if args.check else []
    )
    for problem in problems:
        print(problem, file=sys.stderr)
    print(f"built {len(built.cases)} cases into {args.target}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
