"""A stopped node's state rebuilt from its Raft directory, as a restart would rebuild it.

Replica agreement is normally checked live (every node reports its digest at its applied index),
which needs the nodes to sit at one index at the same time. A cluster whose state keeps moving
(time ticks, jobs firing every second) and is large enough that a digest takes seconds never
does. Stopped nodes can be compared instead: each one's dump plus journal, replayed through the
core up to an index every node holds (so every node has it committed), must give the same digest.
"""

from __future__ import annotations

import gzip
from dataclasses import dataclass
from pathlib import Path

from scheduler.core import State, decode_snapshot
from scheduler.core.codec import CodecError, NewerLogFormat, state_digest
from scheduler.replication.journal import JOURNAL_NAME, read_entries
from scheduler.replication.pysyncobj_compat import CommandType, raft_pickle
from scheduler.replication.raftlog import apply_encoded
from scheduler.replication.upgrades import UndecodableEntry

JOURNAL, DUMP = JOURNAL_NAME, "raft.dump"


@dataclass(frozen=True)
class RaftFiles:
    """What one node's Raft directory holds: its dump's index (0: none) and its journal's terms."""

    dump_index: int
    terms: dict[int, int]  # entry index -> term

    @property
    def last_index(self) -> int:
        return max(self.terms, default=self.dump_index)


def inspect(raft_dir: Path) -> RaftFiles:
    terms = {index: term for _command, index, term in read_entries(str(raft_dir / JOURNAL))}
    dump_index = _read_dump(raft_dir)[0] if (raft_dir / DUMP).exists() else 0
    return RaftFiles(dump_index, terms)


def state_at(raft_dir: Path, index: int) -> State:
    """The state after applying every entry up to `index` (the dump must not be past it).

    An entry or dump this code cannot decode raises UndecodableEntry, as it halts a live node:
    a replay never skips what a newer node would have applied."""
    dump_index, snapshot = _read_dump(raft_dir) if (raft_dir / DUMP).exists() else (0, None)
    if dump_index > index:
        raise ValueError(f"{raft_dir}: its dump is at {dump_index}, past {index}")
    try:
        state = decode_snapshot(snapshot) if snapshot is not None else State()
    except CodecError as exc:
        raise UndecodableEntry(f"{raft_dir}: dump at {dump_index}", str(exc), isinstance(exc, NewerLogFormat)) from None
    for command, entry_index, _term in read_entries(str(raft_dir / JOURNAL)):
        if dump_index < entry_index <= index and command[:1] == bytes((CommandType.REGULAR,)):
            _apply_entry(state, command, entry_index)
    return state


def common_index(files: list[RaftFiles]) -> int:
    """The highest index every journal holds with the same term. By Raft's log matching, the
    logs agree up to there; every possible leader holds those entries, so they are committed
    (pysyncobj persists its commit index lazily, so the journal's own figure lags)."""
    index = min(f.last_index for f in files)
    while index > 0 and len({f.terms.get(index) for f in files}) != 1:
        index -= 1
    if any(f.dump_index > index for f in files) or any(index not in f.terms for f in files):
        raise ValueError(
            f"no index every node can replay to (dumps at {[f.dump_index for f in files]}, "
            f"journals end at {[f.last_index for f in files]})"
        )
    return index


def common_digests(raft_dirs: dict[str, Path]) -> tuple[int, dict[str, str]]:
    """Digest of every node's state at the highest index all of them hold."""
    index = common_index([inspect(path) for path in raft_dirs.values()])
    return index, {name: state_digest(state_at(path, index)) for name, path in raft_dirs.items()}


def _read_dump(raft_dir: Path) -> tuple[int, bytes]:
    """The dump's index and its snapshot bytes (decoding them is left to who needs the state)."""
    with gzip.open(raft_dir / DUMP, "rb") as stream:
        data, last_applied_entry, _previous_entry, _cluster = raft_pickle.load(stream)
    consumer_data = data[1]  # [SyncObj attributes, our consumer's _serialize()]
    return last_applied_entry[1], consumer_data["snapshot"]


def _apply_entry(state: State, command: bytes, index: int) -> None:
    """What the live node does with a regular entry (RaftLog._apply_entry), minus the listeners."""
    call = raft_pickle.loads(command[1:])
    apply_encoded(state, call[1][0], index)  # call: (method id, (bytes,)) or (method id, (bytes,), kwargs)
