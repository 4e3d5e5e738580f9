"""A real pysyncobj follower (no tick, no network) fed AppendEntries messages directly.

The control test pins what pysyncobj 0.3.17 does on its own: a stale heartbeat truncates
entries the follower already acknowledged. With FollowerAppendMixin it never does."""

from __future__ import annotations

import itertools
import logging

import pytest
from pysyncobj import SyncObj, SyncObjConf

from scheduler.replication.pysyncobj_compat import COMMIT_INDEX, ON_MESSAGE_RECEIVED, OTHER_NODES, RAFT_LOG, TRANSPORT
from scheduler.replication.raftlog import _RaftcronSyncObj

pytestmark = pytest.mark.integration

_ports = itertools.count(47100)


class Follower:
    def __init__(self, syncobj: SyncObj) -> None:
        self.syncobj = syncobj
        self.sent: list[dict] = []
        getattr(syncobj, TRANSPORT).send = lambda node, message: self.sent.append(message)
        self.leader = next(iter(getattr(syncobj, OTHER_NODES)))

    def append(self, prev: int, prev_term: int, entries: list, commit: int, term: int = 1) -> dict:
        getattr(self.syncobj, ON_MESSAGE_RECEIVED)(
            self.leader,
            {
                "type": "append_entries",
                "term": term,
                "commit_index": commit,
                "prevLogIdx": prev,
                "prevLogTerm": prev_term,
                "entries": entries,
            },
        )
        if isinstance(self.syncobj, _RaftcronSyncObj):
            self.syncobj._sync_then_answer()  # what the end of the tick does: answers wait for the sync
        return self.sent[-1]

    @property
    def log(self) -> list[tuple[int, int]]:
        journal = getattr(self.syncobj, RAFT_LOG)
        return [(journal[i][1], journal[i][2]) for i in range(len(journal))]

    @property
    def commit_index(self) -> int:
        return getattr(self.syncobj, COMMIT_INDEX)


def _entries(first: int, last: int, term: int = 1) -> list:
    return [(b"\x00", index, term) for index in range(first, last + 1)]


@pytest.fixture
def make_follower():
    made = []

    def make(kind=_RaftcronSyncObj, **kwargs) -> Follower:
        me, peer = f"127.0.0.1:{next(_ports)}", f"127.0.0.1:{next(_ports)}"
        syncobj = kind(me, [peer], SyncObjConf(autoTick=False), **kwargs)
        made.append(syncobj)
        follower = Follower(syncobj)
        follower.append(1, 0, _entries(2, 7), commit=7)  # log 1..7, all committed
        return follower

    yield make
    for syncobj in made:
        syncobj.destroy()


def test_control_pysyncobj_alone_truncates_acknowledged_entries_on_a_stale_heartbeat(make_follower):
    follower = make_follower(SyncObj)
    follower.append(3, 1, [], commit=7)
    assert follower.log[-1] == (3, 1), "pysyncobj changed: check whether FollowerAppendMixin is still needed"


def test_a_stale_heartbeat_keeps_the_log_and_acknowledges_its_previous_entry(make_follower):
    follower = make_follower(keepalive_period_s=1.0)
    answer = follower.append(3, 1, [], commit=7)
    assert follower.log[-1] == (7, 1)
    assert follower.commit_index == 7
    assert answer == {"type": "next_node_idx", "next_node_idx": 4, "reset": False, "success": True}


def test_a_duplicate_range_changes_nothing_and_logs_nothing(make_follower, caplog):
    follower = make_follower(keepalive_period_s=1.0)
    with caplog.at_level(logging.WARNING):
        answer = follower.append(2, 1, _entries(3, 5), commit=7)
    assert follower.log == [(1, 0)] + [(i, 1) for i in range(2, 8)]
    assert answer["next_node_idx"] == 6 and answer["success"]
    assert not caplog.records


def test_an_overlapping_append_adds_only_the_new_entries(make_follower):
    follower = make_follower(keepalive_period_s=1.0)
    answer = follower.append(5, 1, _entries(6, 10), commit=9)
    assert follower.log[-4:] == [(7, 1), (8, 1), (9, 1), (10, 1)]
    assert follower.commit_index == 9
    assert answer["next_node_idx"] == 11


def test_a_new_leaders_conflicting_entries_replace_the_uncommitted_tail(make_follower):
    follower = make_follower(keepalive_period_s=1.0)
    follower.append(7, 1, _entries(8, 9, term=1), commit=7)  # 8 and 9 never committed
    answer = follower.append(7, 1, _entries(8, 8, term=2), commit=8, term=2)
    assert follower.log[-2:] == [(7, 1), (8, 2)]
    assert follower.commit_index == 8
    assert answer["next_node_idx"] == 9 and answer["success"]


def test_a_heartbeat_cannot_commit_entries_past_what_it_verified(make_follower):
    follower = make_follower(keepalive_period_s=1.0)
    follower.append(7, 1, _entries(8, 9, term=1), commit=7)  # 8 and 9 from a leader that then died
    follower.append(7, 1, [], commit=20, term=2)  # the new leader's log may differ after 7
    assert follower.commit_index == 7
    assert follower.log[-1] == (9, 1)
