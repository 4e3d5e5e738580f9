"""A replica's state digest without holding its state lock for the whole computation.

A digest encodes the whole state: seconds for a million runs. Computed under the state lock,
it held the node's applies, and so its Raft tick thread, for those seconds: enough for the
followers to start an election (seen at the end of every large benchmark, whose agreement
check polls digests). A large state is digested instead in a forked child, the way pysyncobj
writes snapshots: the fork takes the lock for a moment, the child sees the state as of that
index and reports the digest through a pipe, and the node goes on applying. The child also
runs at a lower priority. Memory: the child's copy-on-write pages, up to the state's size.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import ContextManager

from scheduler.core import State, state_digest

# Below this many jobs and runs a digest takes milliseconds: computed in place, no fork.
FORK_MIN_RECORDS = 50_000
# The priority of the digest and compaction children, below the node's. With a million runs each
# is tens of seconds of CPU, which the Raft threads of every node on a busy host need more.
CHILD_NICENESS = 10
_DIGEST_CHARS = 64  # sha256, hex


class DigestFailed(RuntimeError):
    """The child exited without a digest."""


def digest_at(
    read: Callable[[], ContextManager[State]],
    digest_fn: Callable[[State], str] = state_digest,
    fork_min_records: int = FORK_MIN_RECORDS,
) -> tuple[int, str]:
    """(applied index, digest of the state at that index). `read` holds the state still while
    its context lasts (RaftLog.read)."""
    with read() as state:
        index = state.applied_index
        if len(state.jobs) + state.run_count < fork_min_records:
            return index, digest_fn(state)
        read_end, write_end = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no memory or no process left for a child: the caller reports it
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:
            _digest_and_exit(state, digest_fn, read_end, write_end)
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as reader:
            digest = reader.read().decode("ascii", "replace")
    finally:
        _, status = os.waitpid(pid, 0)
    if len(digest) != _DIGEST_CHARS or os.waitstatus_to_exitcode(status) != 0:
        raise DigestFailed(f"digest child exited with {os.waitstatus_to_exitcode(status)} and {digest[:80]!r}")
    return index, digest


def _digest_and_exit(state: State, digest_fn: Callable[[State], str], read_end: int, write_end: int) -> None:
    """In the child: only the digest, then _exit (no cleanup of the parent's threads or files)."""
    code = 1
    try:
        os.close(read_end)
        with contextlib.suppress(OSError):
            os.nice(CHILD_NICENESS)
        digest = digest_fn(state).encode("ascii")
        while digest:
            digest = digest[os.write(write_end, digest) :]
        code = 0
    finally:
        os._exit(code)
