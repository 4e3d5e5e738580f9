"""A tick applies committed entries for a bounded time (scheduler/replication/apply_budget.py).

A one-node RaftLog on loopback. Its tick thread is held while 48 entries are proposed, so one
tick commits them all; every applied entry costs 20 ms on the budget's clock (a counter the
apply advances, not wall time). pysyncobj alone applies all 48 in that tick (0.96 s of work:
the stall that cost a 100,000-run herd three elections); with the budget no tick applies more
than the 50 ms budget holds, and every entry is still applied, in order.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

import pytest

from scheduler.core.commands import ReadBarrier
from scheduler.replication import RaftLog
from scheduler.replication.apply_budget import APPLY_BUDGET_S
from tests.integration.test_raftlog import free_ports, settings_for, stop, wait_until

pytestmark = pytest.mark.integration

ENTRY_COST_S = 0.02
ENTRIES = 48


def test_no_tick_applies_more_committed_entries_than_the_budget_holds(tmp_path: Path) -> None:
    address = f"127.0.0.1:{free_ports(1)[0]}"
    node = RaftLog(settings_for(address, [address], tmp_path / "n1"))
    node.start()
    try:
        wait_until(lambda: node.is_leader(), "the single node to lead")
        syncobj = node._syncobj
        spent = [0.0]
        syncobj.apply_clock = lambda: spent[0]
        node.add_apply_listener(lambda command, result, state: spent.__setitem__(0, spent[0] + ENTRY_COST_S))

        per_tick: list[int] = []
        last = [syncobj.raftLastApplied]
        held, release = threading.Event(), threading.Event()

        def on_tick() -> None:
            applied = syncobj.raftLastApplied
            per_tick.append(applied - last[0])
            last[0] = applied
            if not release.is_set():
                held.set()
                release.wait(10)

        syncobj.addOnTickCallback(on_tick)
        assert held.wait(10), "the tick thread never reached the hold"
        start_index = syncobj.raftLastApplied
        futures = [node.propose(ReadBarrier(n)) for n in range(ENTRIES)]
        per_tick.clear()
        release.set()
        results = [f.result(timeout=30) for f in futures]

        assert [r.index for r in results] == list(range(results[0].index, results[0].index + ENTRIES))
        assert syncobj.raftLastApplied >= start_index + ENTRIES
        fits = math.ceil(APPLY_BUDGET_S / ENTRY_COST_S)
        assert max(per_tick) <= fits, per_tick
        assert sum(1 for n in per_tick if n) >= ENTRIES // fits
    finally:
        stop(node)


def test_the_commit_index_does_not_read_lower_while_a_chunk_applies(tmp_path: Path) -> None:
    """The budget lowers pysyncobj's commit index for the length of each chunk; what RaftLog
    reports (Status, metrics, the herd benchmark's "committed") must stay the true one."""
    address = f"127.0.0.1:{free_ports(1)[0]}"
    node = RaftLog(settings_for(address, [address], tmp_path / "n1"))
    node.start()
    try:
        wait_until(lambda: node.is_leader(), "the single node to lead")
        syncobj = node._syncobj
        seen: list[tuple[int, int]] = []  # (index being applied, commit index read meanwhile)
        node.add_apply_listener(lambda command, result, state: seen.append((result.index, node.commit_index)))
        held, release = threading.Event(), threading.Event()

        def on_tick() -> None:
            if not release.is_set():
                held.set()
                release.wait(10)

        syncobj.addOnTickCallback(on_tick)
        assert held.wait(10), "the tick thread never reached the hold"
        futures = [node.propose(ReadBarrier(n)) for n in range(ENTRIES)]
        seen.clear()
        release.set()
        last = [f.result(timeout=30) for f in futures][-1].index

        during = [commit for index, commit in seen if index < last]
        assert during, seen
        assert min(during) >= last, seen
    finally:
        stop(node)
