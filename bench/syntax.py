"""The cost of the suggestion check's syntax proof (specification §14): parsing a file with
tree-sitter and counting its ERROR and MISSING nodes (`loop/syntax.py`).

A file's first suggestion costs a full parse of the head; each suggestion then costs an
incremental parse of the patched file from that tree (here: the middle line of the file
replaced by itself with a missing closing bracket). A file is at most 1 MiB (larger ones are
never read, so never parsed). Given files are parsed as the
language of their extension; without arguments the script parses a 1 MiB Python file made of
this interpreter's standard library (whole files, concatenated, cut at a line under 1 MiB) and,
when Debian's kernel tarball was unpacked under `--kernel`, the files named there.

    uv run python -m bench.syntax                       # the 1 MiB Python file
    uv run python -m bench.syntax path/to/big.c other.rs

`--review` measures the bounded suggestion check instead (docs/performance.md): a real
`pr-review review --repo` of 14 changed files of 1 MiB of Python each (the standard-library
file, and 1 MiB of one-letter lines, whose tree is ten times larger), against a scripted
provider whose final review offers one suggestion per file, with REVIEW_SUGGESTIONS on and off.
It prints the peak RSS of the process tree (pr-review and its children, summed, sampled every
20 ms) and of its largest process (wait4), and how many suggestions were kept. Then the 1 MiB
JavaScript array whose parse runs seconds after its last byte is read, with a 1 s budget: in
this process and in the child process.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sysconfig
import time
from pathlib import Path

from bench.syntax_review import review_memory, slow_javascript
from pr_review_api.loop.syntax import SyntaxBaseline, language_of, syntax_errors

MIB = 1024 * 1024


def python_mib() -> tuple[str, bytes]:
    """About 1 MiB of real Python: standard-library modules, whole, in name order."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    chunks: list[bytes] = []
    size = 0
    for path in sorted(stdlib.glob("*.py")):
        data = path.read_bytes()
        if size + len(data) > MIB:
            continue
        chunks.append(data + b"\n")
        size += len(data) + 1
    return "stdlib-1MiB.py", b"".join(chunks)


def time_parse(language: str, source: bytes, repeat: int) -> tuple[float, int]:
    """The median wall time of one parse and count, in seconds, and the errors counted."""
    times = []
    errors = 0
    for _ in range(repeat):
        started = time.perf_counter()
        errors = syntax_errors(language, source)
        times.append(time.perf_counter() - started)
    return statistics.median(times), errors


def time_edit(language: str, source: bytes, repeat: int) -> float:
    """The median wall time of counting the errors of an edited file from the head's tree."""
    baseline = SyntaxBaseline(language, source)
    middle = source.find(b"\n", len(source) // 2) + 1
    patched = source[:middle] + b"(\n" + source[middle:]
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        baseline.errors_with(patched)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--review", action="store_true", help="the suggestion check's memory")
    arguments = parser.parse_args()
    if arguments.review:
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        review_memory(python_mib()[1])
        slow_javascript()
        return
    samples = [python_mib()]
    samples += [(str(path), path.read_bytes()) for path in arguments.files]
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name, source in samples:
        language = language_of(name)
        if language is None:
            print(f"{name}: not a language we parse")
            continue
        seconds, errors = time_parse(language, source, arguments.repeat)
        edit = time_edit(language, source, arguments.repeat)
        print(
            f"{name}: {len(source):,} bytes, {language}, {errors} errors, "
            f"{seconds * 1000:.0f} ms per full parse, {edit * 1000:.0f} ms per edit "
            f"(medians of {arguments.repeat})"
        )


if __name__ == "__main__":
    main()
