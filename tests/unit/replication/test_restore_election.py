"""A follower that restores a snapshot waits a full election timeout before standing for election
(raftlog.restart_election_timeout): the restore ran inside the tick that then checked a deadline
set before it, so a restarted follower with a large state always stood for election first."""

from __future__ import annotations

import socket
from types import SimpleNamespace

import pytest
from pysyncobj.transport import Transport

from scheduler.replication import raftlog
from scheduler.replication.pysyncobj_compat import (
    COMMIT_INDEX,
    ELECTION_DEADLINE,
    RAFT_STATE,
    RaftState,
    SyncObj,
    SyncObjConf,
)
from scheduler.replication.pysyncobj_compat import monotonic as pysyncobj_monotonic
from scheduler.replication.raftlog import _CoreConsumer


@pytest.fixture
def syncobj(monkeypatch):
    monkeypatch.setattr(socket, "socket", lambda *a, **k: pytest.fail("opened a socket"))
    conf = SyncObjConf(autoTick=False, journalFile=None, raftMinTimeout=0.5, raftMaxTimeout=1.5)
    made = SyncObj("127.0.0.1:7101", ["127.0.0.1:7102"], conf, transport=Transport(None, None, []))
    yield made
    made.destroy()


def _restore_that_takes(seconds: float, clock: list[float]):
    return SimpleNamespace(_restore=lambda snapshot: clock.append(clock[-1] + seconds))


def test_a_slow_restore_leaves_the_follower_a_full_election_timeout(syncobj, monkeypatch):
    clock = [1_000.0]
    monkeypatch.setattr(raftlog, "pysyncobj_monotonic", lambda: clock[-1])
    setattr(syncobj, ELECTION_DEADLINE, clock[-1] + 0.7)  # set at start, before the dump loads
    consumer = _CoreConsumer(_restore_that_takes(8.0, clock))
    consumer._syncObj = syncobj
    consumer._deserialize({"snapshot": b""})
    assert clock[-1] + 0.5 <= getattr(syncobj, ELECTION_DEADLINE) <= clock[-1] + 1.5


def test_a_leader_keeps_its_state(syncobj):
    setattr(syncobj, RAFT_STATE, RaftState.LEADER)
    setattr(syncobj, ELECTION_DEADLINE, 0)
    raftlog.restart_election_timeout(syncobj)
    assert getattr(syncobj, ELECTION_DEADLINE) == 0


def test_a_restarted_node_replaying_what_it_had_committed_does_not_stand(syncobj, monkeypatch):
    """A restarted follower replaying a million jobs stood for election after every long tick and
    deposed the healthy leader each time (bench scale: five elections in 25 s)."""
    setattr(syncobj, COMMIT_INDEX, 500)  # as loaded from its journal; nothing applied yet
    setattr(syncobj, ELECTION_DEADLINE, 0)  # a long tick of replay has passed it
    assert raftlog.hold_election_while_replaying(syncobj, 500) == 500
    assert getattr(syncobj, ELECTION_DEADLINE) > pysyncobj_monotonic()


def test_the_hold_ends_once_the_commit_index_is_applied_or_was_clamped_below_it(syncobj):
    setattr(syncobj, COMMIT_INDEX, 0)  # a journal that lost its tail: the commit index was clamped
    setattr(syncobj, ELECTION_DEADLINE, 0)
    assert raftlog.hold_election_while_replaying(syncobj, 500) == 0
    assert getattr(syncobj, ELECTION_DEADLINE) == 0  # free to stand as pysyncobj decides
    assert raftlog.hold_election_while_replaying(syncobj, 0) == 0
