"""The pysyncobj adapter: a Raft log of bytes feeding the pure core, with propose() futures, and the
coalescer every node uses to put many small requests into one entry."""

from scheduler.replication.errors import (
    EntryTooLarge,
    LogFormatNotEnabled,
    NodeHalted,
    NotLeader,
    OutcomeUnknown,
    Overloaded,
    ReplicationError,
    ReplicationTimeout,
)
from scheduler.replication.raftlog import RaftLog, RaftSettings, RaftTuning

__all__ = [
    "EntryTooLarge",
    "LogFormatNotEnabled",
    "NodeHalted",
    "NotLeader",
    "OutcomeUnknown",
    "Overloaded",
    "RaftLog",
    "RaftSettings",
    "RaftTuning",
    "ReplicationError",
    "ReplicationTimeout",
]
