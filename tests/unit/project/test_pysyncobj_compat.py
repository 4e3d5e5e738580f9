"""Pins pysyncobj to the release the adapter is written against (scheduler/replication/
pysyncobj_compat.py): the version, every private name raftcron touches, and the signatures of
what it overrides or calls. When one of these fails after an upgrade, re-read the uses listed in
pysyncobj_compat.py's docstring against the new sources before changing the expectation.

No socket, thread or process: the SyncObj here runs on pysyncobj's base Transport, never ticks,
and keeps its journal in memory."""

from __future__ import annotations

import inspect
import re
import socket
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from pysyncobj.node import TCPNode
from pysyncobj.transport import Transport

from scheduler.replication import pysyncobj_compat as compat
from scheduler.replication import raftlog
from scheduler.replication.apply_budget import ApplyBudgetMixin
from scheduler.replication.follower_append import FollowerAppendMixin
from scheduler.replication.leader_exit import LeaderExitMixin
from scheduler.replication.pysyncobj_compat import (
    PRIVATES,
    Serializer,
    SyncObj,
    SyncObjConf,
    SyncObjConsumer,
    TcpConnection,
    TcpServer,
    TCPTransport,
)
from scheduler.replication.raftlog import RaftSettings, _CoreConsumer, _RaftcronSyncObj
from scheduler.replication.read_index import leader_facts
from scheduler.replication.transport import BoundedTcpConnection, BoundedTcpServer, RaftcronTransport
from scheduler.replication.upgrades import LogFormatMixin

ROOT = Path(__file__).resolve().parents[3]
SELF, PEER = "127.0.0.1:7101", "127.0.0.1:7102"

# Each raftcron class that stands in front of pysyncobj, the pysyncobj class it stands in front
# of, and the methods it overrides there (a forgotten @overrides leaves one out).
ADAPTERS = {
    _RaftcronSyncObj: (SyncObj, {compat.SEND_NEXT_NODE_IDX, "_checkCommandsToApply", "_onTick"}),
    LogFormatMixin: (SyncObj, {compat.ON_MESSAGE_RECEIVED}),
    FollowerAppendMixin: (SyncObj, {compat.ON_MESSAGE_RECEIVED}),
    ApplyBudgetMixin: (SyncObj, {compat.APPLY_LOG_ENTRIES}),
    LeaderExitMixin: (SyncObj, set()),
    _CoreConsumer: (SyncObjConsumer, {"_serialize", "_deserialize"}),
    BoundedTcpConnection: (
        TcpConnection,
        {compat.CONN_PROCESS_READ, compat.CONN_PARSE_MESSAGE, "connect", "disconnect"},
    ),
    BoundedTcpServer: (TcpServer, {compat.SERVER_ON_NEW_CONNECTION, "bind", "unbind"}),
    RaftcronTransport: (TCPTransport, {"_createServer", "addNode", "_onTick", "_onNodeDisconnected"}),
}

# pysyncobj methods raftcron overrides or calls, with the parameters it is written against.
SIGNATURES = {
    (SyncObj, compat.SEND_NEXT_NODE_IDX): "(self, node, reset=False, nextNodeIdx=None, success=False)",
    (SyncObj, compat.ON_MESSAGE_RECEIVED): "(self, node, message)",
    (SyncObj, compat.CURRENT_LOG_INDEX): "(self)",
    (SyncObj, compat.SEND_APPEND_ENTRIES): "(self)",
    (SyncObj, compat.APPLY_LOG_ENTRIES): "(self)",
    (SyncObj, "_onTick"): "(self, timeToWait=0.0)",
    (SyncObj, "_checkCommandsToApply"): "(self)",
    (SyncObj, "_isLeader"): "(self)",
    (SyncObj, "_getLeader"): "(self)",
    (SyncObjConsumer, "_serialize"): "(self)",
    (SyncObjConsumer, "_deserialize"): "(self, data)",
    (TcpConnection, compat.CONN_PROCESS_READ): "(self)",
    (TcpConnection, compat.CONN_PARSE_MESSAGE): "(self)",
    (TcpConnection, "connect"): "(self, host, port)",
    (TcpConnection, "disconnect"): "(self)",
    (TcpServer, compat.SERVER_ON_NEW_CONNECTION): "(self, descr, event)",
    (TcpServer, "bind"): "(self)",
    (TCPTransport, "_createServer"): "(self)",
    (TCPTransport, "addNode"): "(self, node)",
    (TCPTransport, "_onNodeDisconnected"): "(self, node)",
    (TCPTransport, "_onTick"): "(self)",
    (TCPTransport, "_onNewIncomingConnection"): "(self, conn)",
    (TCPTransport, "_onOutgoingConnected"): "(self, conn)",
    (TCPTransport, "_onMessageReceived"): "(self, node, message)",
    (TCPTransport, "_onDisconnected"): "(self, conn)",
    (TCPTransport, "_shouldConnect"): "(self, node)",
    (Serializer, "setTransmissionData"): "(self, data)",
    (Serializer, "checkSerializing"): "(self)",
}

MANGLED = re.compile(
    r"_(?:SyncObj|SyncObjConsumer|TcpConnection|TcpServer|TCPTransport|Transport|Serializer)__[A-Za-z]"
)


@pytest.fixture
def no_sockets(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the pysyncobj pin opened a socket")

    monkeypatch.setattr(socket, "socket", refuse)


@pytest.fixture
def syncobj(no_sockets):
    made = SyncObj(SELF, [PEER], SyncObjConf(autoTick=False, journalFile=None), transport=Transport(None, None, []))
    yield made
    made.destroy()


def _parameters(function) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def test_the_installed_pysyncobj_is_the_pinned_release():
    assert compat.INSTALLED_VERSION == metadata.version("pysyncobj") == compat.PYSYNCOBJ_VERSION == "0.3.17", (
        f"pysyncobj {compat.INSTALLED_VERSION}: re-read every use in pysyncobj_compat.py against it, then move the pin"
    )
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["server"]
    assert f"pysyncobj=={compat.PYSYNCOBJ_VERSION}" in server  # the node's extra pins the release read here


def test_every_private_name_exists_on_a_constructed_object(syncobj):
    instances = {
        SyncObj: syncobj,
        SyncObjConsumer: SyncObjConsumer(),
        TcpConnection: TcpConnection(poller=None, timeout=3.5),
        TcpServer: TcpServer(None, "127.0.0.1", 0, onNewConnection=lambda conn: None),
        TCPTransport: TCPTransport(syncobj, TCPNode(SELF), [TCPNode(PEER)]),
        Serializer: getattr(syncobj, compat.SERIALIZER),
    }
    assert set(PRIVATES) == set(instances)
    for cls, names in PRIVATES.items():
        missing = [name for name in names if not hasattr(instances[cls], name)]
        assert not missing, f"pysyncobj's {cls.__name__} no longer has {missing}"
    assert hasattr(compat.syncobj_module, compat.CREATE_JOURNAL)
    assert {compat.RaftState.FOLLOWER, compat.RaftState.CANDIDATE, compat.RaftState.LEADER} == {0, 1, 2}
    assert getattr(syncobj, compat.RAFT_STATE) == compat.RaftState.FOLLOWER
    assert isinstance(compat.CommandType.REGULAR, int)


def test_every_mangled_name_in_the_compat_module_is_pinned():
    named = {value for value in vars(compat).values() if isinstance(value, str) and MANGLED.match(value)}
    pinned = {name for names in PRIVATES.values() for name in names}
    assert named and named <= pinned, named - pinned


def test_the_methods_raftcron_overrides_or_calls_keep_their_signatures():
    for (cls, name), expected in SIGNATURES.items():
        assert str(inspect.signature(getattr(cls, name))) == expected, f"{cls.__name__}.{name} changed"
    init = inspect.signature(TcpConnection.__init__).parameters
    assert {"poller", "socket", "timeout", "sendBufferSize", "recvBufferSize", "keepalive"} <= set(init)
    init = inspect.signature(TcpServer.__init__).parameters
    assert {
        "poller",
        "host",
        "port",
        "onNewConnection",
        "sendBufferSize",
        "recvBufferSize",
        "connectionTimeout",
    } <= set(init)
    init = inspect.signature(SyncObj.__init__).parameters
    assert {"consumers", "transport", "transportClass"} <= set(init)


def test_every_override_stands_where_pysyncobj_looks_and_takes_what_it_passes():
    for ours, (theirs, expected) in ADAPTERS.items():
        overridden = {
            name
            for name, value in vars(ours).items()
            if name != "__init__" and callable(value) and hasattr(theirs, name)
        }
        assert overridden == expected, f"{ours.__name__} overrides {overridden}, not {expected}"
        assert overridden <= set(PRIVATES[theirs]), (
            f"{overridden - set(PRIVATES[theirs])} not named in the compat module"
        )
        for name in overridden:
            assert _parameters(vars(ours)[name]) == _parameters(getattr(theirs, name)), f"{ours.__name__}.{name}"


def test_every_option_raftcron_sets_is_one_pysyncobj_reads(tmp_path, monkeypatch):
    """SyncObjConf ignores a keyword it does not know: a renamed option would silently fall back."""
    passed: dict = {}

    def recording_conf(**kwargs):
        passed.update(kwargs)
        return SyncObjConf(**kwargs)

    monkeypatch.setattr(raftlog, "SyncObjConf", recording_conf)
    RaftSettings(SELF, (PEER,), tmp_path / "raft", password=None).to_conf(lambda old, new: None)
    known = vars(SyncObjConf())
    assert passed and not set(passed) - set(known), set(passed) - set(known)


def test_read_index_reads_its_facts_off_a_real_syncobj(syncobj):
    found = leader_facts(syncobj)
    assert not found.leading and found.term == 0 and found.term_first_index is None
    assert set(found.answered_s) == {PEER}


def test_no_other_module_spells_a_mangled_name_or_imports_pysyncobj():
    compat_path = ROOT / "scheduler" / "replication" / "pysyncobj_compat.py"
    offenders = []
    for path in sorted((ROOT / "scheduler").rglob("*.py")):
        if path == compat_path:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if MANGLED.search(line) or re.match(r"\s*(from|import)\s+pysyncobj\b", line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "take pysyncobj's internals from pysyncobj_compat.py:\n" + "\n".join(offenders)


def test_pysyncobj_applies_up_to_the_commit_index_it_reads_at_the_call():
    """The apply budget lowers the commit index around pysyncobj's apply (apply_budget.py): that
    bounds the call only while the method reads no other bound than these two indexes."""
    source = inspect.getsource(getattr(SyncObj, compat.APPLY_LOG_ENTRIES))
    assert "count = self.__raftCommitIndex - self.__raftLastApplied" in source
    assert "self.__getEntries(self.__raftLastApplied + 1, count)" in source
    assert source.count("__raftCommitIndex") == 2


def test_an_installed_snapshot_is_renamed_in_the_last_chunks_call_and_a_child_is_reaped_by_its_pid():
    """compaction_child.py stops the child in front of the call that renames the installed dump,
    and pysyncobj must then see no child: it finds one only through the pid attribute."""
    set_data = inspect.getsource(Serializer.setTransmissionData)
    assert "data, isFirst, isLast = data" in set_data and "atomicReplace(tmpFile, self.__fileName)" in set_data
    check = inspect.getsource(Serializer.checkSerializing)
    assert "pid = self.__pid" in check and "if pid == 0:" in check
