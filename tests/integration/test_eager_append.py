"""The leader sends new entries in the tick that appended them (RaftTuning.eager_append).

Checked by instrumenting the leader: every pass that moved proposals into its log must also
have sent append messages covering them, before the tick goes back to waiting. With
`eager_append=False` (pysyncobj's own behaviour) the entries wait for the next append period,
and this test fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduler.core.commands import ReadBarrier
from scheduler.replication import RaftLog
from scheduler.replication.pysyncobj_compat import CURRENT_LOG_INDEX, SEND_APPEND_ENTRIES
from tests.fakes import T0_US
from tests.integration.test_raftlog import free_ports, leader_of, settings_for, submit

pytestmark = pytest.mark.integration


def _instrument(syncobj) -> list[tuple[int, int, bool]]:
    """Record (log index before, after, sent covering `after`) for every proposal pass."""
    passes: list[tuple[int, int, bool]] = []
    sent_up_to = [0]
    send, check = getattr(syncobj, SEND_APPEND_ENTRIES), syncobj._checkCommandsToApply
    current_log_index = getattr(syncobj, CURRENT_LOG_INDEX)

    def recording_send():
        sent_up_to[0] = current_log_index()
        send()

    def recording_check():
        before = current_log_index()
        sent_up_to[0] = 0
        check()
        after = current_log_index()
        if after > before:
            passes.append((before, after, sent_up_to[0] >= after))

    # pysyncobj calls both through the instance (self._checkCommandsToApply, and the mangled
    # self.__sendAppendEntries), so instance attributes stand in front of them.
    setattr(syncobj, SEND_APPEND_ENTRIES, recording_send)
    syncobj._checkCommandsToApply = recording_check
    return passes


@pytest.mark.parametrize("eager", [True, False], ids=["eager", "periodic"])
def test_new_entries_leave_in_the_tick_that_appended_them(tmp_path: Path, eager: bool) -> None:
    addresses = [f"127.0.0.1:{port}" for port in free_ports(3)]
    # A long append period, so a periodic send can never coincide with a proposal pass by luck.
    tuning = {
        "eager_append": eager,
        "append_entries_period_s": 0.2,
        "election_timeout_min_s": 1.0,
        "election_timeout_max_s": 2.0,
    }
    nodes = [RaftLog(settings_for(a, addresses, tmp_path / f"node{i}", **tuning)) for i, a in enumerate(addresses)]
    try:
        for node in nodes:
            node.start()
        leader = leader_of(nodes)
        passes = _instrument(leader._syncobj)
        for _ in range(10):
            submit(nodes, ReadBarrier(issued_at_us=T0_US), via=leader)
        assert len(passes) >= 10
        unsent = [p for p in passes if not p[2]]
        if eager:
            assert unsent == []
        else:
            assert len(unsent) == len(passes)
    finally:
        for node in nodes:
            node.close()
