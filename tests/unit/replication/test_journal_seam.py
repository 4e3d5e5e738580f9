"""Pins how pysyncobj uses every internal the durable journal relies on (journal_seam.py; the
version and the names are pinned in test_pysyncobj_compat.py). When one of these fails after a
pysyncobj upgrade, re-read journal_seam.py's docstring against the new sources before changing
the expectation: a silently missed seam means an unsynced cluster."""

from __future__ import annotations

import inspect
import re

import pysyncobj
import pysyncobj.syncobj as syncobj_module
from pysyncobj import SyncObj
from pysyncobj.journal import FileJournal, Journal
from pysyncobj.serializer import Serializer

from scheduler.replication import journal_seam
from scheduler.replication.journal import DurableJournal
from scheduler.replication.pysyncobj_compat import ON_MESSAGE_RECEIVED, SEND_NEXT_NODE_IDX
from scheduler.replication.raftlog import _RaftcronSyncObj


def _source(function) -> str:
    return inspect.getsource(function)


def test_pysyncobj_exports_the_journal_factory():
    assert pysyncobj.createJournal is not None


def test_syncobj_builds_its_journal_through_the_module_global():
    init = _source(SyncObj.__init__)
    assert "self.__raftLog = createJournal(self.__conf.journalFile)" in init
    assert hasattr(syncobj_module, "createJournal")
    journal_seam.install()
    assert syncobj_module.createJournal is journal_seam._create_journal


def test_outside_building_pysyncobj_gets_its_own_journal(tmp_path):
    journal_seam.install()
    journal = syncobj_module.createJournal(str(tmp_path / "j"))
    try:
        assert type(journal) is FileJournal
    finally:
        journal._destroy()
    with journal_seam.building(lambda path: ("ours", path)):
        assert syncobj_module.createJournal(str(tmp_path / "k")) == ("ours", str(tmp_path / "k"))
    assert syncobj_module.createJournal(None).__class__.__name__ == "MemoryJournal"


def test_the_journal_interface_is_the_one_implemented():
    expected = {
        "add",
        "clear",
        "deleteEntriesFrom",
        "deleteEntriesTo",
        "__getitem__",
        "__len__",
        "_destroy",
        "setRaftCommitIndex",
        "getRaftCommitIndex",
        "setCurrentTerm",
        "getCurrentTerm",
        "getVotedForNodeId",
        "onOneSecondTimer",
    }
    assert {name for name, value in vars(Journal).items() if callable(value)} == expected
    for name in expected:
        assert name in vars(DurableJournal), name
    # the calls SyncObj makes on its journal are these and flush (which FileJournal adds)
    called = set(re.findall(r"self\.__raftLog\.(\w+)\(", inspect.getsource(syncobj_module)))
    assert called <= expected | {"flush"}, called - expected


def test_followers_answer_through_send_next_node_idx():
    send = getattr(SyncObj, SEND_NEXT_NODE_IDX)
    assert list(inspect.signature(send).parameters) == ["self", "node", "reset", "nextNodeIdx", "success"]
    assert "'type': 'next_node_idx'" in _source(send)
    on_message = _source(getattr(SyncObj, ON_MESSAGE_RECEIVED))
    # every answer to an append goes through it, none is sent by hand
    assert "'next_node_idx'" not in on_message.split("if message['type'] == 'next_node_idx'")[0]
    assert on_message.count("self.__sendNextNodeIdx(") >= 6
    assert SEND_NEXT_NODE_IDX in vars(_RaftcronSyncObj)


def test_on_tick_counts_the_leader_before_appending_and_reads_messages_last():
    tick = _source(SyncObj._onTick)
    commit_loop = tick.index("count = 1")
    appends = tick.index("self._checkCommandsToApply()")
    poll = tick.index("self._poller.poll(timeToWait)")
    assert commit_loop < appends < poll
    assert tick.rstrip().endswith("self._poller.poll(timeToWait)")
    assert "self.__raftLog.add(command, idx, term)" in _source(SyncObj._checkCommandsToApply)


def test_the_dump_is_renamed_unsynced_before_the_journal_is_cut():
    serialize = _source(Serializer.serialize)
    assert "atomicReplace(tmpFile, self.__fileName)" in serialize and "fsync" not in serialize
    install = _source(Serializer.setTransmissionData)
    assert "atomicReplace(tmpFile, self.__fileName)" in install
    compaction = _source(getattr(SyncObj, "_SyncObj__tryLogCompaction"))
    assert "self.__deleteEntriesTo(serializeID)" in compaction
    load = _source(getattr(SyncObj, "_SyncObj__loadDumpFile"))
    assert "self.__raftLog.clear()" in load


def test_the_snapshot_install_answer_follows_the_dump_load():
    on_message = _source(getattr(SyncObj, ON_MESSAGE_RECEIVED))
    assert re.search(
        r"self\.__loadDumpFile\(clearJournal=True\)\s+self\.__sendNextNodeIdx\(node, success=True\)", on_message
    )
