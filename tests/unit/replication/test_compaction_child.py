"""The snapshot pysyncobj pickles in its forked compaction child: encoded there, at a lower
CPU priority than the node, and only there."""

from __future__ import annotations

import os
import pickle

from scheduler.core import State, decode_snapshot, state_digest
from scheduler.replication.digest import CHILD_NICENESS
from scheduler.replication.raftlog import _LazySnapshot


def pickled_in_child(snapshot: _LazySnapshot) -> tuple[int, bytes]:
    """Fork, pickle `snapshot` in the child as pysyncobj does; the child's niceness after
    pickling, and the pickle."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report and leave without running the parent's cleanup
        try:
            data = pickle.dumps(snapshot)
            os.write(write_end, os.nice(0).to_bytes(4, "big", signed=True) + data)
        finally:
            os._exit(0)
    os.close(write_end)
    chunks = []
    while chunk := os.read(read_end, 1 << 16):
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    received = b"".join(chunks)
    return int.from_bytes(received[:4], "big", signed=True), received[4:]


def test_the_child_encodes_at_a_lower_priority() -> None:
    state = State(applied_index=7)
    parent_niceness = os.nice(0)
    child_niceness, data = pickled_in_child(_LazySnapshot(state))
    assert child_niceness == min(19, parent_niceness + CHILD_NICENESS)
    assert state_digest(decode_snapshot(pickle.loads(data))) == state_digest(state)


def test_pickling_in_the_node_itself_keeps_its_priority() -> None:
    before = os.nice(0)
    pickle.dumps(_LazySnapshot(State()))
    assert os.nice(0) == before
