"""Every pysyncobj private and internal raftcron touches, named in this one module.

raftcron is written against pysyncobj 0.3.17 (pinned in pyproject.toml) and reaches past its
public API in the places listed below. No other module spells a mangled name (`self.__x` inside
pysyncobj's class `C` is the attribute `_C__x`) or imports a pysyncobj private: they take them
from here. tests/unit/project/test_pysyncobj_compat.py fails, without a socket or a process, when the
installed release is not PYSYNCOBJ_VERSION, when a name here is gone, or when a method raftcron
overrides or calls changed its signature; after an upgrade, re-read each use below against the
new sources before moving the pin. Names with one leading underscore are ordinary attributes to
a subclass and are spelled where they are used, but are listed in PRIVATES so the test pins them.

Module internals:
- RaftState (`_RAFT_STATE`): a SyncObj's role as a number (role names, the leader checks).
- CommandType (`_COMMAND_TYPE`): the type byte in front of every entry (offline replay).
- syncobj_module and CREATE_JOURNAL: the global SyncObj.__init__ builds its journal with (journal_seam).
- Journal, FileJournal: the interface our journal implements, and pysyncobj's, which it converts.
- raft_pickle, to_bytes: how pysyncobj pickles entries, dumps and frames (journal, offline, transport).
- monotonic: pysyncobj's clock, on which its deadlines and answer times are kept.
- TcpConnection, TcpServer, TCPTransport: what the bounded transport subclasses.
- POLL_EVENT_TYPE, globalDnsResolver: the poller's event bits and the resolver, as TCPTransport uses them.

SyncObj privates (mangled):
- RAFT_STATE: this node's role, for the read index, eager append, reading before electing, stall logs.
- CURRENT_TERM: the term a read index is decided in, and the one a follower's append is checked against.
- VOTED_FOR: whom a follower voted for in its term; one that voted does not stand early when its
  leader exited (leader_exit.py).
- COMMIT_INDEX: the index a confirmed read index is served at.
- NOOP_INDEX: the new leader's first entry of its term, committed before a read index is served.
- LAST_RESPONSE_TIME: node -> when the leader last handled a `next_node_idx` answer from it (read index).
- OTHER_NODES: the voters to confirm a read with and to send keepalives to.
- SEND_APPEND_ENTRIES: sends every connected follower an append now, on the tick thread only (eager
  append, reads waiting for confirmation).
- RAFT_LOG: the follower's log, to find which entries of an append it already holds.
- TRANSPORT: the keepalive is sent on it, and a follower reads before it elects only once it is ready.
- ELECTION_DEADLINE: a follower past it reads its sockets before pysyncobj starts an election; one
  whose leader exited brings it forward (leader_exit.py).
- CURRENT_LOG_INDEX: whether a tick appended entries, and the next index of a held answer.
- SEND_NEXT_NODE_IDX: every answer to an append; overridden to hold answers until the journal syncs.
- ON_MESSAGE_RECEIVED: every message from a peer; overridden to read keepalives and rewrite appends.
- APPLY_LOG_ENTRIES: applies every committed entry; overridden to apply them a time budget at a
  time (COMMIT_INDEX lowered around the call), so a herd's entries never stall a tick.
- SERIALIZER: writes dumps (in a forked child) and installs the leader's snapshots.

Serializer (compaction_child.py says why):
- SERIALIZER_PID: the compaction child's pid (0: none), stopped before an installed snapshot lands.
- `setTransmissionData`: receives a snapshot's chunks and renames it into place on the last one;
  wrapped on the instance to stop the child first. `checkSerializing`: reaps the child.

SyncObj and SyncObjConsumer internals (one underscore): `_onTick` (overridden: syncs, keepalives,
stall watch), `_checkCommandsToApply` (overridden: eager append), `_poller` (the transport's poller,
polled early by a follower), `_isLeader`, `_getLeader` (no public equivalent), `_serialize` and
`_deserialize` (overridden: the snapshot goes through the core's codec).

TcpConnection (transport.py says why each limit is there):
- CONN_PROCESS_READ: one read of a link; overridden to cap the frame and stop once one is complete.
- CONN_PARSE_MESSAGE: one frame to a message; overridden to parse a bytearray, and to raise the cap
  once a message decrypted.
- CONN_SOCKET, CONN_RECV_BUFFER_SIZE: what the overriding read reads from, and how much at once.
- CONN_READ_BUFFER: the bytes read so far, made a bytearray (pysyncobj resets it to bytes).
- CONN_LAST_READ_TIME: when the link last read, for closing replaced links that idle.
- `recvRandKey`, `recvLastTimestamp`, `encryptor`: the checks pysyncobj's parser makes, made again.
- `connect`, `disconnect`: overridden, to restart the frame cap and to release a source's slot.
- `setOn...Callback`: how TCPTransport.addNode wires a link, done again for ours.

TcpServer:
- SERVER_ON_NEW_CONNECTION: the accept handler; overridden to accept a burst, capped per source.
- SERVER_SOCKET: the listening socket, given a longer backlog, and accepted from.
- SERVER_POLLER, SERVER_SEND_BUFFER_SIZE, SERVER_RECV_BUFFER_SIZE, SERVER_CONNECTION_TIMEOUT,
  SERVER_KEEPALIVE: what an accepted link is built with, as pysyncobj builds it.
- SERVER_ON_NEW_CONNECTION_CALLBACK: hands an accepted link to the transport.
- `bind`, `unbind`: overridden, for the backlog and to close the incoming links.

TCPTransport (one underscore):
- `_createServer`, `addNode`: overridden, to build our server and our links as pysyncobj builds its own.
- `_onTick`: overridden, to sweep incoming links that never identified themselves.
- `_onNodeDisconnected`: overridden, to tell the SyncObj a peer's link closed (a follower then
  checks whether its leader exited, leader_exit.py).
- `_syncObj`, `_server`, `_selfNode`, `_nodes`, `_nodeAddrToNode`, `_connections`, `_unknownConnections`:
  the state those overrides read and fill, as pysyncobj's own do.
- `_shouldConnect`, `_onOutgoingConnected`, `_onMessageReceived`, `_onDisconnected`,
  `_onNewIncomingConnection`: pysyncobj's callbacks, wired to our links as to its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pysyncobj.syncobj as syncobj_module
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, SyncObjConsumer, replicated
from pysyncobj import pickle as raft_pickle
from pysyncobj.dns_resolver import globalDnsResolver
from pysyncobj.journal import FileJournal, Journal
from pysyncobj.monotonic import monotonic
from pysyncobj.pickle import to_bytes
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.serializer import Serializer
from pysyncobj.tcp_connection import TcpConnection
from pysyncobj.tcp_server import TcpServer
from pysyncobj.transport import TCPTransport
from pysyncobj.version import VERSION as INSTALLED_VERSION

PYSYNCOBJ_VERSION = "0.3.17"

RaftState = syncobj_module._RAFT_STATE
CommandType = syncobj_module._COMMAND_TYPE
CREATE_JOURNAL = "createJournal"

# -- SyncObj ---------------------------------------------------------------------------------
RAFT_STATE = "_SyncObj__raftState"
CURRENT_TERM = "_SyncObj__raftCurrentTerm"
VOTED_FOR = "_SyncObj__votedForNodeId"
COMMIT_INDEX = "_SyncObj__raftCommitIndex"
NOOP_INDEX = "_SyncObj__noopIDx"
LAST_RESPONSE_TIME = "_SyncObj__lastResponseTime"
OTHER_NODES = "_SyncObj__otherNodes"
SEND_APPEND_ENTRIES = "_SyncObj__sendAppendEntries"
RAFT_LOG = "_SyncObj__raftLog"
TRANSPORT = "_SyncObj__transport"
ELECTION_DEADLINE = "_SyncObj__raftElectionDeadline"
CURRENT_LOG_INDEX = "_SyncObj__getCurrentLogIndex"
SEND_NEXT_NODE_IDX = "_SyncObj__sendNextNodeIdx"
ON_MESSAGE_RECEIVED = "_SyncObj__onMessageReceived"
APPLY_LOG_ENTRIES = "_SyncObj__applyLogEntries"
SERIALIZER = "_SyncObj__serializer"

# -- Serializer ------------------------------------------------------------------------------
SERIALIZER_PID = "_Serializer__pid"

# -- TcpConnection ---------------------------------------------------------------------------
CONN_PROCESS_READ = "_TcpConnection__processRead"
CONN_PARSE_MESSAGE = "_TcpConnection__processParseMessage"
CONN_SOCKET = "_TcpConnection__socket"
CONN_READ_BUFFER = "_TcpConnection__readBuffer"
CONN_RECV_BUFFER_SIZE = "_TcpConnection__recvBufferSize"
CONN_LAST_READ_TIME = "_TcpConnection__lastReadTime"

# -- TcpServer -------------------------------------------------------------------------------
SERVER_ON_NEW_CONNECTION = "_TcpServer__onNewConnection"
SERVER_SOCKET = "_TcpServer__socket"
SERVER_POLLER = "_TcpServer__poller"
SERVER_SEND_BUFFER_SIZE = "_TcpServer__sendBufferSize"
SERVER_RECV_BUFFER_SIZE = "_TcpServer__recvBufferSize"
SERVER_CONNECTION_TIMEOUT = "_TcpServer__connectionTimeout"
SERVER_KEEPALIVE = "_TcpServer__keepalive"
SERVER_ON_NEW_CONNECTION_CALLBACK = "_TcpServer__onNewConnectionCallback"

# (class, names): what raftcron reads, writes, calls or overrides on the class's instances where it
# reaches past pysyncobj's public API, with the public methods it overrides.
PRIVATES: dict[type, tuple[str, ...]] = {
    SyncObj: (
        RAFT_STATE,
        CURRENT_TERM,
        VOTED_FOR,
        COMMIT_INDEX,
        NOOP_INDEX,
        LAST_RESPONSE_TIME,
        OTHER_NODES,
        SEND_APPEND_ENTRIES,
        RAFT_LOG,
        TRANSPORT,
        ELECTION_DEADLINE,
        CURRENT_LOG_INDEX,
        SEND_NEXT_NODE_IDX,
        ON_MESSAGE_RECEIVED,
        APPLY_LOG_ENTRIES,
        SERIALIZER,
        "_onTick",
        "_checkCommandsToApply",
        "_poller",
        "_isLeader",
        "_getLeader",
    ),
    SyncObjConsumer: ("_serialize", "_deserialize"),
    Serializer: (SERIALIZER_PID, "setTransmissionData", "checkSerializing"),
    TcpConnection: (
        CONN_PROCESS_READ,
        CONN_PARSE_MESSAGE,
        CONN_SOCKET,
        CONN_READ_BUFFER,
        CONN_RECV_BUFFER_SIZE,
        CONN_LAST_READ_TIME,
        "recvRandKey",
        "recvLastTimestamp",
        "encryptor",
        "connect",
        "disconnect",
        "setOnConnectedCallback",
        "setOnMessageReceivedCallback",
        "setOnDisconnectedCallback",
    ),
    TcpServer: (
        SERVER_ON_NEW_CONNECTION,
        SERVER_SOCKET,
        SERVER_POLLER,
        SERVER_SEND_BUFFER_SIZE,
        SERVER_RECV_BUFFER_SIZE,
        SERVER_CONNECTION_TIMEOUT,
        SERVER_KEEPALIVE,
        SERVER_ON_NEW_CONNECTION_CALLBACK,
        "bind",
        "unbind",
    ),
    TCPTransport: (
        "_createServer",
        "addNode",
        "_onTick",
        "_onNodeDisconnected",
        "_syncObj",
        "_server",
        "_selfNode",
        "_nodes",
        "_nodeAddrToNode",
        "_connections",
        "_unknownConnections",
        "_shouldConnect",
        "_onOutgoingConnected",
        "_onMessageReceived",
        "_onDisconnected",
        "_onNewIncomingConnection",
    ),
}


def overrides(private_name: str) -> Callable[[Callable[..., Any]], Any]:
    """Decorate a method of a pysyncobj subclass (or of a mixin in front of one) to install it
    under pysyncobj's mangled `private_name` as well as under its own name. pysyncobj looks its
    mangled methods up on the instance, so a subclass can stand in front of them, but only under
    the mangled spelling, which stays in this module. In the method, `getattr(super(),
    private_name)` is the next one in line."""

    def install(method: Callable[..., Any]) -> _Override:
        return _Override(private_name, method)

    return install


class _Override:
    def __init__(self, private_name: str, method: Callable[..., Any]) -> None:
        self.private_name = private_name
        self.method = method

    def __set_name__(self, owner: type, name: str) -> None:
        # Called once the class exists: leave the plain function under both names.
        setattr(owner, name, self.method)
        setattr(owner, self.private_name, self.method)


__all__ = [
    "APPLY_LOG_ENTRIES",
    "CREATE_JOURNAL",
    "SERIALIZER",
    "SERIALIZER_PID",
    "FAIL_REASON",
    "INSTALLED_VERSION",
    "POLL_EVENT_TYPE",
    "PRIVATES",
    "PYSYNCOBJ_VERSION",
    "CommandType",
    "FileJournal",
    "Journal",
    "RaftState",
    "Serializer",
    "SyncObj",
    "SyncObjConf",
    "SyncObjConsumer",
    "TCPTransport",
    "TcpConnection",
    "TcpServer",
    "globalDnsResolver",
    "monotonic",
    "overrides",
    "raft_pickle",
    "replicated",
    "syncobj_module",
    "to_bytes",
    # SyncObj
    "RAFT_STATE",
    "CURRENT_TERM",
    "VOTED_FOR",
    "COMMIT_INDEX",
    "NOOP_INDEX",
    "LAST_RESPONSE_TIME",
    "OTHER_NODES",
    "SEND_APPEND_ENTRIES",
    "RAFT_LOG",
    "TRANSPORT",
    "ELECTION_DEADLINE",
    "CURRENT_LOG_INDEX",
    "SEND_NEXT_NODE_IDX",
    "ON_MESSAGE_RECEIVED",
    # TcpConnection, TcpServer
    "CONN_PROCESS_READ",
    "CONN_PARSE_MESSAGE",
    "CONN_SOCKET",
    "CONN_READ_BUFFER",
    "CONN_RECV_BUFFER_SIZE",
    "CONN_LAST_READ_TIME",
    "SERVER_ON_NEW_CONNECTION",
    "SERVER_SOCKET",
    "SERVER_POLLER",
    "SERVER_SEND_BUFFER_SIZE",
    "SERVER_RECV_BUFFER_SIZE",
    "SERVER_CONNECTION_TIMEOUT",
    "SERVER_KEEPALIVE",
    "SERVER_ON_NEW_CONNECTION_CALLBACK",
]
