"""The read index decision on pysyncobj's facts as data, and RaftLog.read_index's loop on a fake
SyncObj (the pysyncobj release and the private names it reads are pinned in
test_pysyncobj_compat.py)."""

from __future__ import annotations

import contextlib
import threading

import pytest

from scheduler.replication import NotLeader, RaftLog, RaftSettings, ReplicationTimeout
from scheduler.replication import read_index as ri
from scheduler.replication.pysyncobj_compat import (
    COMMIT_INDEX,
    CURRENT_TERM,
    LAST_RESPONSE_TIME,
    NOOP_INDEX,
    OTHER_NODES,
    RAFT_STATE,
    SEND_APPEND_ENTRIES,
    RaftState,
)
from scheduler.replication.pysyncobj_compat import monotonic as pysyncobj_monotonic
from scheduler.replication.read_index import CONFIRMED, REFUSED, WAIT, LeaderFacts, read_index_step

STARTED_S = 100.0


def facts(answered=(101.0, 99.0), leading=True, term=3, commit=20, first=18) -> LeaderFacts:
    return LeaderFacts(leading, term, commit, first, {f"n{i + 2}": at for i, at in enumerate(answered)})


@pytest.mark.parametrize(
    ("case", "leader_facts", "outcome"),
    [
        ("one answer after the start makes 2 of 3", facts((101.0, 99.0)), CONFIRMED),
        ("answers only from before the read: an isolated leader", facts((99.0, 98.0)), WAIT),
        ("an answer at the very instant the read began does not count", facts((100.0, 50.0)), WAIT),
        ("no entry of this term committed yet", facts((101.0, 101.0), commit=17), WAIT),
        ("pysyncobj has no no-op of this term", facts((101.0, 101.0), first=None), WAIT),
        ("deposed: pysyncobj says follower", facts((101.0, 101.0), leading=False), REFUSED),
        ("a new term began during the read", facts((101.0, 101.0), term=4), REFUSED),
        ("5 voters: 2 fresh answers and itself are a majority", facts((101.0, 102.0, 1.0, 1.0)), CONFIRMED),
        ("5 voters: 1 fresh answer is not", facts((101.0, 1.0, 1.0, 1.0)), WAIT),
        ("a single node is its own majority", facts(()), CONFIRMED),
    ],
)
def test_read_index_decision(case, leader_facts, outcome):
    assert read_index_step(leader_facts, start_term=3, started_s=STARTED_S).outcome == outcome, case


class FakeNode:
    def __init__(self, node_id: str) -> None:
        self.id = node_id


class FakeSyncObj:
    """The attributes read_index reads, by their mangled names, set by the test; `tick()` runs
    the tick callbacks as pysyncobj's tick thread does."""

    def __init__(self, peers=("n2:1", "n3:1")) -> None:
        self.nodes = [FakeNode(p) for p in peers]
        setattr(self, RAFT_STATE, RaftState.LEADER)
        setattr(self, CURRENT_TERM, 3)
        setattr(self, COMMIT_INDEX, 20)
        setattr(self, NOOP_INDEX, 18)
        setattr(self, OTHER_NODES, set(self.nodes))
        setattr(self, LAST_RESPONSE_TIME, {node: 0.0 for node in self.nodes})
        setattr(self, SEND_APPEND_ENTRIES, self._send)
        self.tick_callbacks = []
        self.appends_sent = 0
        self.ticks = 0
        self.on_tick = lambda ticks: None

    def answer(self, node_index: int) -> None:
        getattr(self, LAST_RESPONSE_TIME)[self.nodes[node_index]] = pysyncobj_monotonic()

    def depose(self) -> None:
        setattr(self, RAFT_STATE, RaftState.FOLLOWER)

    def _send(self) -> None:
        self.appends_sent += 1

    def _isLeader(self):  # noqa: N802 (pysyncobj's name)
        return getattr(self, RAFT_STATE) == RaftState.LEADER

    def _getLeader(self):  # noqa: N802 (pysyncobj's name)
        return None

    def addOnTickCallback(self, callback):  # noqa: N802 (pysyncobj's name)
        self.tick_callbacks.append(callback)

    def tick(self) -> None:
        self.ticks += 1
        self.on_tick(self.ticks)
        for callback in list(self.tick_callbacks):
            callback()


@contextlib.contextmanager
def ticking(fake: FakeSyncObj):
    """pysyncobj's tick thread: ticks until the block ends."""
    stop = threading.Event()

    def run():
        while not stop.is_set():
            fake.tick()
            stop.wait(0.001)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)


def raftlog_with(fake: FakeSyncObj, applied: int, tmp_path) -> RaftLog:
    raftlog = RaftLog(RaftSettings("127.0.0.1:1", (), tmp_path, None))
    raftlog._syncobj = fake
    raftlog._state.applied_index = applied
    return raftlog


def test_read_index_returns_the_commit_index_once_a_majority_answers(tmp_path):
    fake = FakeSyncObj()
    raftlog = raftlog_with(fake, applied=20, tmp_path=tmp_path)
    answered_at = []

    def on_tick(ticks):
        if fake.appends_sent >= 2 and not answered_at:  # a follower answers an append sent after the read began
            fake.answer(0)
            answered_at.append(fake.appends_sent)

    fake.on_tick = on_tick
    with ticking(fake):
        assert raftlog.read_index(timeout_s=10.0) == 20
    assert len(fake.tick_callbacks) == 1  # one confirmer for the node's life
    assert answered_at == [2]  # while the read waited, every tick sent appends at once


def test_an_isolated_leader_refuses_instead_of_reading_stale_state(tmp_path):
    fake = FakeSyncObj()  # nobody answers
    with ticking(fake), pytest.raises(NotLeader, match="not confirmed"):
        raftlog_with(fake, applied=20, tmp_path=tmp_path).read_index(timeout_s=0.2)


def test_a_leader_deposed_during_the_read_refuses(tmp_path):
    fake = FakeSyncObj()
    fake.on_tick = lambda ticks: fake.depose() if fake.appends_sent else None
    with ticking(fake), pytest.raises(NotLeader, match="not the leader"):
        raftlog_with(fake, applied=20, tmp_path=tmp_path).read_index(timeout_s=10.0)


def test_a_follower_refuses_at_once(tmp_path):
    fake = FakeSyncObj()
    fake.depose()
    with pytest.raises(NotLeader, match="not the leader"):
        raftlog_with(fake, applied=20, tmp_path=tmp_path).read_index(timeout_s=10.0)
    assert fake.tick_callbacks == []


def test_the_read_waits_for_the_commit_index_to_be_applied(tmp_path):
    fake = FakeSyncObj(peers=())  # a single node confirms itself
    with ticking(fake), pytest.raises(ReplicationTimeout, match="index 20 not applied"):
        raftlog_with(fake, applied=19, tmp_path=tmp_path).read_index(timeout_s=0.2)


def test_the_confirmer_sends_appends_only_while_reads_wait_and_only_as_leader():
    fake = FakeSyncObj()
    confirmer = ri.ReadConfirmer(fake)
    confirmer()
    assert fake.appends_sent == 0  # nobody waits
    results = []
    reader = threading.Thread(target=lambda: results.append(confirmer.confirm(timeout_s=10.0)))
    reader.start()
    while not confirmer._waiting:
        threading.Event().wait(0.001)
    confirmer()
    confirmer()
    assert fake.appends_sent == 2 and not results
    fake.answer(1)
    confirmer()
    reader.join(timeout=10)
    ((step, index),) = results
    assert (step.outcome, index, fake.appends_sent) == (CONFIRMED, 20, 2)
    confirmer()
    assert fake.appends_sent == 2
