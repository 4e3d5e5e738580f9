"""pysyncobj's TCP transport, bounded before authentication.

pysyncobj 0.3.17 trusts a frame's 4-byte length prefix up to 2 GiB and grows its read buffer
with `bytes +=` on the tick thread, which also runs all of Raft: tens of MiB sent after a huge
prefix stalled that thread (a quadratic copy holding the GIL) and deposed the leader, before a
single byte had been authenticated. It also never closes an incoming connection that sends
nothing: the timeout is checked only when the socket has an event.

`RaftcronTransport` keeps the wire format byte for byte (mixed versions interoperate) and adds:

- a frame cap: `PREAUTH_FRAME_MAX_BYTES` until a connection has delivered one message that
  decrypted with the cluster key, `FRAME_MAX_BYTES` after; a prefix above the cap closes the
  connection when its 4 bytes arrive, without reading what follows;
- a bounded read buffer (a bytearray, never more than one frame plus one read ahead);
- incoming connections that have not identified themselves as a peer within the connection
  timeout of being accepted are closed, and so are replaced (orphaned) ones idle that long;
- at most `PER_SOURCE_MAX_CONNECTIONS` open incoming connections per source address.

Every pysyncobj private this module touches is named in pysyncobj_compat.py, and
tests/unit/project/test_pysyncobj_compat.py fails when pysyncobj's version or any of them changes.
"""

from __future__ import annotations

import errno
import logging
import socket
import struct
import zlib
from collections import Counter
from collections.abc import Callable

from scheduler.replication.pysyncobj_compat import (
    CONN_LAST_READ_TIME,
    CONN_PARSE_MESSAGE,
    CONN_PROCESS_READ,
    CONN_READ_BUFFER,
    CONN_RECV_BUFFER_SIZE,
    CONN_SOCKET,
    POLL_EVENT_TYPE,
    SERVER_CONNECTION_TIMEOUT,
    SERVER_KEEPALIVE,
    SERVER_ON_NEW_CONNECTION,
    SERVER_ON_NEW_CONNECTION_CALLBACK,
    SERVER_POLLER,
    SERVER_RECV_BUFFER_SIZE,
    SERVER_SEND_BUFFER_SIZE,
    SERVER_SOCKET,
    TcpConnection,
    TcpServer,
    TCPTransport,
    globalDnsResolver,
    monotonic,
    overrides,
)
from scheduler.replication.pysyncobj_compat import raft_pickle as pysyncobj_pickle

log = logging.getLogger("raftcron.replication")

# The first message of a connection is a 32-byte random key (or a node address without a
# secret): ~200 bytes on the wire. Nothing larger is read before the cluster key checked out.
PREAUTH_FRAME_MAX_BYTES = 64 << 10
# The largest frame a peer sends is one append batch: entries are added until they reach
# raftlog's APPEND_BATCH_BYTES (4 MiB), so up to one more entry (MAX_ENTRY_BYTES, 1 MiB), plus
# pickling overhead per entry and Fernet's base64 (4/3): 11 MiB at worst (32-byte entries of
# random bytes). A frame over the cap closes the link, so a real batch must never reach it:
# tests/unit/replication/test_raft_transport.py builds that batch from raftlog's constants and holds it to
# half of this.
FRAME_MAX_BYTES = 32 << 20
# After authentication, read up to this much ahead of the head frame per event, as pysyncobj
# reads all that is available: one tick handles a burst of small appends.
READ_AHEAD_BYTES = 1 << 20
# Every peer on one host shares its address (127.0.0.1 in a loopback cluster): far above the
# 4 incoming links of a 5-node cluster, plus replaced links not yet swept and admin tools.
PER_SOURCE_MAX_CONNECTIONS = 16
# A flood of connections is accepted at once instead of one per tick (pysyncobj's backlog is 5).
LISTEN_BACKLOG = 128
ACCEPTS_PER_EVENT = 64
SWEEP_PERIOD_S = 0.1
WARN_EVERY_S = 10.0

_LENGTH = struct.Struct("i")  # pysyncobj's prefix: native int, signed


def frame_limit_bytes(authenticated: bool) -> int:
    return FRAME_MAX_BYTES if authenticated else PREAUTH_FRAME_MAX_BYTES


def read_goal_bytes(buffer: bytes | bytearray, limit_bytes: int) -> int | None:
    """How many buffered bytes complete the frame at the head of `buffer`; None when its length
    prefix is out of bounds (negative or above `limit_bytes`): close without reading on."""
    if len(buffer) < _LENGTH.size:
        return _LENGTH.size
    (length,) = _LENGTH.unpack_from(buffer, 0)
    if not 0 <= length <= limit_bytes:
        return None
    return _LENGTH.size + length


def should_close(
    now: float, accepted_at: float, last_read_at: float, identified: bool, current: bool, timeout_s: float
) -> bool:
    """Whether the sweep closes an incoming connection. Before it identified itself (the key
    exchange and the peer's address), its whole life is bounded by the timeout, however slowly
    it trickles bytes; an identified one that a newer link of the same peer replaced is closed
    once idle that long. The current link of a peer is pysyncobj's to judge (it closes one that
    read nothing for the timeout when it next sends, and every peer gets a keepalive a second)."""
    if not identified:
        return now - accepted_at > timeout_s
    return not current and now - last_read_at > timeout_s


class SourceLimit:
    """Open incoming connections per source address, against a cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._open: Counter[str] = Counter()

    def admit(self, source: str) -> bool:
        if self._open[source] >= self.cap:
            return False
        self._open[source] += 1
        return True

    def release(self, source: str) -> None:
        self._open[source] -= 1
        if self._open[source] <= 0:
            del self._open[source]

    def open_from(self, source: str) -> int:
        return self._open[source]


class _RateLimitedWarning:
    """One log line per WARN_EVERY_S for a repeated event, with the count folded in (as the
    tick watch does): an attacker must not be able to flood the log either."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._count = 0
        self._next = 0.0

    def __call__(self, detail: str) -> None:
        self._count += 1
        now = monotonic()
        if now >= self._next:
            log.warning("raft port: %s (%d since the last report; latest: %s)", self._what, self._count, detail)
            self._count = 0
            self._next = now + WARN_EVERY_S


_oversized = _RateLimitedWarning("closed connections whose frame length was out of bounds")
_refused = _RateLimitedWarning("refused connections past the per-source cap")
_expired = _RateLimitedWarning("closed incoming connections that did not identify themselves in time")
_accept_failed = _RateLimitedWarning("could not accept connections")


class BoundedTcpConnection(TcpConnection):
    """TcpConnection with a frame cap and a bytearray read buffer; the wire format is unchanged."""

    def __init__(
        self,
        *args,
        authenticated: bool = False,
        source: str = "",
        on_closed: Callable[[BoundedTcpConnection], None] | None = None,
        **kwargs,
    ) -> None:
        # `authenticated` starts True only where nothing is authenticated anyway (no secret, on a
        # link this node opened): pysyncobj then sends appends without a key exchange first.
        self._starts_authenticated = self.authenticated = authenticated
        self.source = source
        self.accepted_at = monotonic()
        self._on_closed = on_closed
        super().__init__(*args, **kwargs)

    @property
    def last_read_at(self) -> float:
        return getattr(self, CONN_LAST_READ_TIME)

    def connect(self, host, port) -> bool:
        # A link this node dials is reused for every reconnection: each is a new peer session.
        self.authenticated = self._starts_authenticated
        return super().connect(host, port)

    def disconnect(self) -> None:
        super().disconnect()
        on_closed, self._on_closed = self._on_closed, None
        if on_closed is not None:
            on_closed(self)

    def _frame_limit_bytes(self) -> int:
        return frame_limit_bytes(self.authenticated)

    def _read_goal_bytes(self, buffer: bytearray) -> int | None:
        goal = read_goal_bytes(buffer, self._frame_limit_bytes())
        if goal is None or not self.authenticated:
            return goal
        return max(goal, READ_AHEAD_BYTES)

    @overrides(CONN_PROCESS_READ)
    def _read_once(self) -> bool:
        """Read once; False stops pysyncobj's read loop. Unlike pysyncobj, stop as soon as the
        head frame is complete (the poller is level-triggered: the rest is read next tick) and
        close at once on a length prefix out of bounds."""
        buffer = getattr(self, CONN_READ_BUFFER)
        if type(buffer) is not bytearray:  # pysyncobj resets it to bytes() on (dis)connect
            buffer = bytearray(buffer)
            setattr(self, CONN_READ_BUFFER, buffer)
        goal = self._read_goal_bytes(buffer)
        if goal is not None and len(buffer) >= goal:
            return False
        sock = getattr(self, CONN_SOCKET)
        try:
            incoming = sock.recv(getattr(self, CONN_RECV_BUFFER_SIZE))
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK):
                self.disconnect()
            return False
        if not incoming or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self.disconnect()
            return False
        buffer += incoming
        goal = self._read_goal_bytes(buffer)
        if goal is None:
            (length,) = _LENGTH.unpack_from(buffer, 0)
            if self.authenticated:
                log.warning(
                    "raft port: a peer sent a %d-byte frame, above the %d-byte cap; closing the link",
                    length,
                    FRAME_MAX_BYTES,
                )
            else:
                _oversized(f"{length} bytes announced from {self.source or 'an outgoing link'}")
            self.disconnect()
            return False
        return len(buffer) < goal

    @overrides(CONN_PARSE_MESSAGE)
    def _parse_message(self):
        """pysyncobj's parser on a bytearray (consuming a frame is `del`, not a copy of the rest);
        the first message that decrypts raises the frame cap."""
        buffer = getattr(self, CONN_READ_BUFFER)
        goal = read_goal_bytes(buffer, self._frame_limit_bytes())
        if goal is None:
            self.disconnect()
            return None
        if len(buffer) < goal:
            return None
        data = bytes(buffer[_LENGTH.size : goal])
        try:
            if self.encryptor:
                timestamp = self.encryptor.extract_timestamp(data)
                if timestamp < self.recvLastTimestamp:
                    raise ValueError("a message older than the last one")
                self.recvLastTimestamp = timestamp
                data = self.encryptor.decrypt(data)
            message = pysyncobj_pickle.loads(zlib.decompress(data))
            if self.recvRandKey:
                rand_key, message = message
                if rand_key != self.recvRandKey:
                    raise ValueError("a message of another connection")
        except Exception:
            self.disconnect()
            return None
        del buffer[:goal]
        self.authenticated = True
        return message


class BoundedTcpServer(TcpServer):
    """TcpServer that accepts a burst at once and caps open connections per source address."""

    def __init__(self, *args, per_source_max: int = PER_SOURCE_MAX_CONNECTIONS, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.sources = SourceLimit(per_source_max)
        self.incoming: set[BoundedTcpConnection] = set()

    def bind(self) -> None:
        super().bind()
        getattr(self, SERVER_SOCKET).listen(LISTEN_BACKLOG)  # on Linux, listen() again resizes the backlog

    @overrides(SERVER_ON_NEW_CONNECTION)
    def _accept_burst(self, descr, event) -> None:
        if event & POLL_EVENT_TYPE.READ:
            for _ in range(ACCEPTS_PER_EVENT):
                try:
                    sock, address = getattr(self, SERVER_SOCKET).accept()
                except OSError as exc:
                    # pysyncobj unbinds (for good) on any accept error: a client that resets before
                    # the accept (ECONNABORTED) or a process out of descriptors (EMFILE) took the
                    # Raft port down. Only a broken listening socket does here.
                    if exc.errno in (errno.EBADF, errno.EINVAL, errno.ENOTSOCK):
                        self.unbind()
                        return
                    if exc.errno not in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNABORTED):
                        _accept_failed(exc.strerror or str(exc))
                    break
                self._admit(sock, str(address[0]))
        if event & POLL_EVENT_TYPE.ERROR:
            self.unbind()

    def _admit(self, sock: socket.socket, source: str) -> None:
        if not self.sources.admit(source):
            _refused(f"{source} has {self.sources.open_from(source)} open")
            sock.close()
            return
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, getattr(self, SERVER_SEND_BUFFER_SIZE))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, getattr(self, SERVER_RECV_BUFFER_SIZE))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setblocking(False)
        except OSError:  # reset before we got to it
            self.sources.release(source)
            sock.close()
            return
        conn = BoundedTcpConnection(
            poller=getattr(self, SERVER_POLLER),
            socket=sock,
            timeout=getattr(self, SERVER_CONNECTION_TIMEOUT),
            sendBufferSize=getattr(self, SERVER_SEND_BUFFER_SIZE),
            recvBufferSize=getattr(self, SERVER_RECV_BUFFER_SIZE),
            keepalive=getattr(self, SERVER_KEEPALIVE),
            source=source,
            on_closed=self._closed,
        )
        self.incoming.add(conn)
        getattr(self, SERVER_ON_NEW_CONNECTION_CALLBACK)(conn)

    def _closed(self, conn: BoundedTcpConnection) -> None:
        self.incoming.discard(conn)
        self.sources.release(conn.source)

    def unbind(self) -> None:
        super().unbind()
        for conn in list(self.incoming):
            conn.disconnect()


class RaftcronTransport(TCPTransport):
    """pysyncobj's TCPTransport with bounded connections (see the module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        self._next_sweep = 0.0
        super().__init__(*args, **kwargs)

    def _createServer(self) -> None:  # noqa: N802 (pysyncobj's name)
        # pysyncobj's own, with our server class.
        conf = self._syncObj.conf
        if conf.bindAddress is not None:
            host, port = conf.bindAddress.rsplit(":", 1)
        else:
            host, port = self._selfNode.address.rsplit(":", 1)
            host = "::" if ":" in host else "0.0.0.0"
        if host != "0.0.0.0":
            host = globalDnsResolver().resolve(host)
        self._server = BoundedTcpServer(
            self._syncObj._poller,
            host,
            port,
            onNewConnection=self._onNewIncomingConnection,
            sendBufferSize=conf.sendBufferSize,
            recvBufferSize=conf.recvBufferSize,
            connectionTimeout=conf.connectionTimeout,
        )

    def addNode(self, node) -> None:  # noqa: N802 (pysyncobj's name)
        # pysyncobj's own, with our connection class for the links this node opens.
        self._nodes.add(node)
        self._nodeAddrToNode[node.address] = node
        if not self._shouldConnect(node):
            return
        conf = self._syncObj.conf
        encryptor = self._syncObj.encryptor
        conn = BoundedTcpConnection(
            poller=self._syncObj._poller,
            timeout=conf.connectionTimeout,
            sendBufferSize=conf.sendBufferSize,
            recvBufferSize=conf.recvBufferSize,
            keepalive=conf.tcp_keepalive,
            authenticated=encryptor is None,
        )
        conn.encryptor = encryptor
        conn.setOnConnectedCallback(lambda: self._onOutgoingConnected(conn))
        conn.setOnMessageReceivedCallback(lambda message: self._onMessageReceived(node, message))
        conn.setOnDisconnectedCallback(lambda: self._onDisconnected(conn))
        self._connections[node] = conn

    def _onNodeDisconnected(self, node) -> None:  # noqa: N802 (pysyncobj's name)
        super()._onNodeDisconnected(node)
        # A follower that lost its leader's link checks whether the leader exited (leader_exit.py).
        link_closed = getattr(self._syncObj, "peer_link_closed", None)
        if link_closed is not None:
            link_closed(node)

    def _onTick(self) -> None:  # noqa: N802 (pysyncobj's name)
        super()._onTick()
        now = monotonic()
        if now >= self._next_sweep and isinstance(self._server, BoundedTcpServer):
            self._next_sweep = now + SWEEP_PERIOD_S
            self._sweep(now)

    def _sweep(self, now: float) -> None:
        timeout_s = self._syncObj.conf.connectionTimeout
        current = {id(conn) for conn in self._connections.values()}
        for conn in list(self._server.incoming):
            identified = conn not in self._unknownConnections
            if should_close(now, conn.accepted_at, conn.last_read_at, identified, id(conn) in current, timeout_s):
                if not identified:
                    _expired(f"from {conn.source}, {now - conn.accepted_at:.1f}s after it was accepted")
                conn.disconnect()
