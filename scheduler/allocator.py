"""glibc malloc settings for a long-running node: two arenas and a fixed mmap threshold.

By default glibc gives threads their own malloc arenas (up to eight per core) and raises its mmap
threshold each time a large block is freed, so the buffers of large requests (an ApplyJobs of
2,000 jobs is a few hundred KB in protobuf, msgpack and Raft messages) end up inside arenas that
never give memory back. With these settings large blocks are mapped and unmapped on their own
and the node's threads share two arenas: with 100,000 jobs, the node that served the writes
kept about 10 MiB more than the others before, about 7 after, and every node 2-3 MiB less
(`python -m bench scale` measures the nodes).

An operator who sets glibc's own variables (`MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`) keeps
them: glibc applied them at start, and the node leaves those settings alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass

# mallopt() parameters, from glibc's malloc.h.
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8


@dataclass(frozen=True)
class AllocatorSettings:
    arena_max: int = 2
    mmap_threshold_bytes: int = 64 * 1024


# (mallopt parameter, glibc's environment variable, setting)
_PARAMETERS = (
    (M_ARENA_MAX, "MALLOC_ARENA_MAX", "arena_max"),
    (M_MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_", "mmap_threshold_bytes"),
)


def _glibc_mallopt() -> Callable[[int, int], int] | None:
    if platform.libc_ver()[0] != "glibc":
        return None
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    mallopt = libc.mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt


def tune_allocator(
    settings: AllocatorSettings = AllocatorSettings(),
    environ: Mapping[str, str] = os.environ,
    mallopt: Callable[[int, int], int] | None = None,
) -> dict[str, int]:
    """Apply the settings the environment does not set; what was applied, by glibc's names.

    Call it before the process starts threads: an arena limit binds arenas created afterwards.
    Not glibc (musl, macOS): nothing is applied.
    """
    mallopt = mallopt or _glibc_mallopt()
    if mallopt is None:
        return {}
    applied = {}
    for parameter, variable, name in _PARAMETERS:
        if variable in environ:
            continue
        value = getattr(settings, name)
        if mallopt(parameter, value) == 1:  # mallopt returns 1 on success
            applied[variable] = value
    return applied
