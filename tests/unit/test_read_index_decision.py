"""The read index decision on pysyncobj's facts as data, RaftLog.read_index's loop on a fake
SyncObj, and a pin on the pysyncobj release and private names it reads."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest
from pysyncobj import SyncObj, SyncObjConf
from pysyncobj.monotonic import monotonic as pysyncobj_monotonic
from pysyncobj.syncobj import _RAFT_STATE

from scheduler.replication import NotLeader, RaftLog, RaftSettings, ReplicationTimeout
from scheduler.replication import read_index as ri
from scheduler.replication.read_index import CONFIRMED, REFUSED, WAIT, LeaderFacts, leader_facts, read_index_step

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
        setattr(self, ri.RAFT_STATE, _RAFT_STATE.LEADER)
        setattr(self, ri.CURRENT_TERM, 3)
        setattr(self, ri.COMMIT_INDEX, 20)
        setattr(self, ri.NOOP_INDEX, 18)
        setattr(self, ri.OTHER_NODES, set(self.nodes))
        setattr(self, ri.LAST_RESPONSE_TIME, {node: 0.0 for node in self.nodes})
        setattr(self, ri.SEND_APPEND_ENTRIES, self._send)
        self.tick_callbacks = []
        self.appends_sent = 0
        self.ticks = 0
        self.on_tick = lambda ticks: None

    def answer(self, node_index: int) -> None:
        getattr(self, ri.LAST_RESPONSE_TIME)[self.nodes[node_index]] = pysyncobj_monotonic()

    def depose(self) -> None:
        setattr(self, ri.RAFT_STATE, _RAFT_STATE.FOLLOWER)

    def _send(self) -> None:
        self.appends_sent += 1

    def _isLeader(self):  # noqa: N802 (pysyncobj's name)
        return getattr(self, ri.RAFT_STATE) == _RAFT_STATE.LEADER

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
    (step, index), = results
    assert (step.outcome, index, fake.appends_sent) == (CONFIRMED, 20, 2)
    confirmer()
    assert fake.appends_sent == 2


# -- the pin ----------------------------------------------------------------------------------
def test_pysyncobj_is_the_release_whose_private_state_read_index_reads():
    from pysyncobj.version import VERSION

    assert VERSION == ri.PYSYNCOBJ_VERSION, (
        f"pysyncobj {VERSION}: check its leader code (next_node_idx answers, the no-op of a new term, "
        "commit rule) against scheduler/replication/read_index.py, then update PYSYNCOBJ_VERSION")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_the_private_names_exist_on_a_syncobj(tmp_path):
    peer = f"127.0.0.1:{_free_port()}"
    syncobj = SyncObj(f"127.0.0.1:{_free_port()}", [peer], SyncObjConf(autoTick=False, journalFile=None))
    try:
        missing = [name for name in ri.PRIVATE_NAMES if not hasattr(syncobj, name)]
        assert not missing, f"pysyncobj no longer has {missing}"
        found = leader_facts(syncobj)
        assert not found.leading and set(found.answered_s) == {peer}
    finally:
        syncobj.destroy()
