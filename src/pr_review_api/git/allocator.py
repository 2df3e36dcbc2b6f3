"""The C allocator's threshold for large blocks, fixed, so a freed large buffer goes back.

glibc serves a block of at least M_MMAP_THRESHOLD bytes with a mapping of its own, returned to
the system when freed, and raises that threshold to the size of every such block freed (up
to 32 MiB). Preparing a wide tree holds git's output in 1 MiB chunks and frees them as they
are parsed: after the first free, the next chunks come from the heap instead, where the holes
they leave are not returned and Python's small objects (in pymalloc's own mappings) cannot
fill them. A 1,000,000-entry tree prepared whole then peaked at 305 MiB or 254 MiB, by the
order of a few allocations; with the threshold fixed at glibc's default, 223 MiB either way.
A store fixes it when made (`RepositoryStore`): every process that prepares trees makes one.
There is no Python interface to `mallopt`, hence `ctypes`; on another C library it does
nothing.
"""

from __future__ import annotations

import ctypes
import functools
import sys

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, no longer raised


@functools.cache
def fix_mmap_threshold() -> bool:
    """Fix the process's threshold (once); whether the C library took it."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the interpreter itself uses
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
