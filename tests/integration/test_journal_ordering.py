"""No answer precedes the sync of what it acknowledges: a 3-node RaftLog cluster in one process,
every Raft message checked against its sender's journal at the moment it is sent.

A follower's `next_node_idx` answer with success acknowledges every entry before the index it
names: those must be synced already. Whatever commit index the leader sends must be covered by
its own synced entries (it counts itself toward every commit). Deterministic: the check runs on
the sending thread, at the send call, not by sampling."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from scheduler.core.commands import ReadBarrier
from scheduler.replication import RaftLog
from scheduler.replication.pysyncobj_compat import TRANSPORT
from tests.fakes import T0_US
from tests.integration.test_raftlog import free_ports, leader_of, settings_for, submit, wait_until

pytestmark = pytest.mark.integration


class Audit:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.answers_checked = 0
        self.commits_checked = 0
        self.violations: list[str] = []

    def watch(self, node: RaftLog) -> None:
        syncobj = node._syncobj
        transport = getattr(syncobj, TRANSPORT)
        journal = syncobj._journal
        send = transport.send

        def checked_send(peer, message):
            kind = message.get("type")
            durable = journal.durable_index()
            with self._lock:
                if kind == "next_node_idx" and message["success"]:
                    self.answers_checked += 1
                    if message["next_node_idx"] - 1 > durable:
                        self.violations.append(
                            f"{node.settings.self_address} acknowledged up to "
                            f"{message['next_node_idx'] - 1} with {durable} synced"
                        )
                elif kind == "append_entries" and message.get("entries"):
                    self.commits_checked += 1
                    if message["commit_index"] > durable:
                        self.violations.append(
                            f"leader {node.settings.self_address} sent commit index "
                            f"{message['commit_index']} with {durable} synced"
                        )
            return send(peer, message)

        transport.send = checked_send


def test_no_answer_or_commit_precedes_the_sync_it_depends_on(tmp_path: Path) -> None:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    nodes = [RaftLog(settings_for(a, addresses, tmp_path / f"node{i}")) for i, a in enumerate(addresses)]
    audit = Audit()
    try:
        for node in nodes:
            node.start()
            audit.watch(node)
        leader_of(nodes)
        futures = []
        for i in range(300):  # many in flight: several appends per tick, answered together
            futures.append(leader_of(nodes).propose(ReadBarrier(issued_at_us=T0_US + i)))
            if i % 25 == 24:
                for future in futures:
                    future.result(timeout=10)
                futures.clear()
        last = submit(nodes, ReadBarrier(issued_at_us=T0_US)).index
        wait_until(lambda: all(n.applied_index >= last for n in nodes), "every node applying the last write")
        syncs = [node._syncobj._journal.syncs for node in nodes]
    finally:
        for node in nodes:
            node.close()
    assert audit.answers_checked >= 20 and audit.commits_checked >= 10
    assert audit.violations == [], audit.violations[:5]
    # group commit: fewer syncs than entries on every node
    assert all(0 < count < last for count in syncs), (syncs, last)
