"""The bounded Raft transport (scheduler/replication/transport.py): frame decisions on a fake
socket, and the wire format against pysyncobj's own connection. The pysyncobj privates it relies
on are pinned in test_pysyncobj_compat.py."""

from __future__ import annotations

import errno
import os
import struct

import pytest
from pysyncobj import SyncObjConf
from pysyncobj.encryptor import getEncryptor
from pysyncobj.node import TCPNode
from pysyncobj.poller import POLL_EVENT_TYPE
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection

from scheduler.replication.pysyncobj_compat import CONN_READ_BUFFER, SERVER_ON_NEW_CONNECTION, SERVER_SOCKET
from scheduler.replication.raftlog import APPEND_BATCH_BYTES, MAX_ENTRY_BYTES
from scheduler.replication.transport import (
    FRAME_MAX_BYTES,
    PREAUTH_FRAME_MAX_BYTES,
    READ_AHEAD_BYTES,
    BoundedTcpConnection,
    BoundedTcpServer,
    RaftcronTransport,
    SourceLimit,
    read_goal_bytes,
    should_close,
)

KEY = getEncryptor("a derived cluster key for the transport tests")
RECV_BYTES = 1 << 16


class FakePoller:
    def subscribe(self, descr, callback, event_mask) -> None:
        pass

    def unsubscribe(self, descr) -> None:
        pass


class FakeSocket:
    """Hands out `chunks` (an iterable of bytes) one recv at a time, then EAGAIN; keeps what is sent."""

    def __init__(self, chunks=()) -> None:
        self._chunks = iter(chunks)
        self.recv_calls = 0
        self.sent = bytearray()
        self.closed = False

    def fileno(self) -> int:
        return 99

    def recv(self, size: int) -> bytes:
        self.recv_calls += 1
        chunk = next(self._chunks, None)
        if chunk is None:
            raise OSError(errno.EAGAIN, "no data")
        assert len(chunk) <= size
        return chunk

    def send(self, data) -> int:
        self.sent += data
        return len(data)

    def getsockopt(self, *args) -> int:
        return 0

    def setsockopt(self, *args) -> None:
        pass

    def setblocking(self, flag: bool) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def connection(chunks=(), encryptor=KEY, **kwargs) -> tuple[BoundedTcpConnection, FakeSocket, list]:
    sock = FakeSocket(chunks)
    conn = BoundedTcpConnection(
        poller=FakePoller(), socket=sock, timeout=float("inf"), recvBufferSize=RECV_BYTES, source="10.9.9.9", **kwargs
    )
    conn.encryptor = encryptor
    delivered: list = []
    conn.setOnMessageReceivedCallback(delivered.append)
    return conn, sock, delivered


def read_event(conn: TcpConnection) -> None:
    conn._TcpConnection__processConnection(conn.fileno(), POLL_EVENT_TYPE.READ)


def wire(message, encryptor=KEY, rand_key: bytes | None = None) -> bytes:
    """The bytes pysyncobj's own TcpConnection puts on the wire for `message`."""
    sock = FakeSocket()
    # No timeout: pysyncobj drops what it sends on a connection idle longer, and encoding a
    # large message on a loaded machine takes a while.
    stock = TcpConnection(poller=FakePoller(), socket=sock, timeout=float("inf"))
    stock.encryptor = encryptor
    stock.sendRandKey = rand_key
    stock.send(message)
    return bytes(sock.sent)


def chunked(data: bytes, size: int = RECV_BYTES) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def endless(chunk: bytes):
    while True:
        yield chunk


class FakeSyncObj:
    def __init__(self, password: str | None = None) -> None:
        self.conf = SyncObjConf(bindAddress="127.0.0.1:7101", password=password)
        self._poller = FakePoller()
        self.encryptor = getEncryptor(password) if password else None

    def addOnTickCallback(self, callback) -> None:  # noqa: N802 (pysyncobj's name)
        pass


def test_the_transport_builds_bounded_servers_and_connections():
    syncobj = FakeSyncObj(password="x" * 32)
    tcp = RaftcronTransport(syncobj, TCPNode("127.0.0.1:7102"), [TCPNode("127.0.0.1:7101"), TCPNode("127.0.0.1:7103")])
    assert isinstance(tcp._server, BoundedTcpServer)
    # Only the lower address is ours to dial (pysyncobj's rule); with a secret it starts unauthenticated.
    (outgoing,) = tcp._connections.values()
    assert isinstance(outgoing, BoundedTcpConnection) and not outgoing.authenticated
    assert outgoing.encryptor is syncobj.encryptor
    # Without a secret, the node we dialled sends appends with no handshake first: full cap at once.
    plain = RaftcronTransport(FakeSyncObj(), TCPNode("127.0.0.1:7102"), [TCPNode("127.0.0.1:7101")])
    assert next(iter(plain._connections.values())).authenticated


# -- frames ----------------------------------------------------------------------------------------


def test_read_goal_is_the_head_frame_or_none_when_its_length_is_out_of_bounds():
    assert read_goal_bytes(b"\x01\x00", 100) == 4
    assert read_goal_bytes(struct.pack("i", 100), 100) == 104
    assert read_goal_bytes(struct.pack("i", 101) + b"x", 100) is None
    assert read_goal_bytes(struct.pack("i", -1), 100) is None


@pytest.mark.parametrize("announced", [2**31 - 1, PREAUTH_FRAME_MAX_BYTES + 1, -5])
def test_a_length_prefix_out_of_bounds_closes_before_the_body_is_read(announced):
    first = struct.pack("i", announced) + os.urandom(RECV_BYTES - 4)
    conn, sock, delivered = connection([first, *[os.urandom(RECV_BYTES)] * 100])
    read_event(conn)
    assert conn.state == CONNECTION_STATE.DISCONNECTED and sock.closed
    assert sock.recv_calls == 1 and delivered == []


def test_the_cap_is_small_until_a_message_decrypted_with_the_cluster_key():
    large = {"type": "append_entries", "entries": [(os.urandom(100_000), 1, 1)]}  # incompressible
    assert len(wire(large)) > PREAUTH_FRAME_MAX_BYTES
    conn, _, delivered = connection(chunked(wire(large)))
    read_event(conn)
    assert conn.state == CONNECTION_STATE.DISCONNECTED and delivered == []

    # One small message under the right key raises the cap for the rest of the connection.
    conn, _, delivered = connection(chunked(wire(os.urandom(32)) + wire(large)))
    read_event(conn)
    read_event(conn)
    assert conn.authenticated and conn.state == CONNECTION_STATE.CONNECTED
    assert len(delivered) == 2 and delivered[1] == large

    # A link this node dials starts each reconnection unauthenticated again.
    redial = BoundedTcpConnection(poller=FakePoller(), timeout=3.5)
    redial.authenticated = True
    redial.connect("127.0.0.1", 1)
    assert not redial.authenticated
    redial.disconnect()

    # Under another key it raises nothing: closed, nothing delivered.
    conn, _, delivered = connection([wire(os.urandom(32), encryptor=getEncryptor("another cluster's key"))])
    read_event(conn)
    assert not conn.authenticated and conn.state == CONNECTION_STATE.DISCONNECTED and delivered == []


def test_an_unauthenticated_connection_reads_no_further_than_its_head_frame():
    # A plausible 1000-byte frame followed by an endless stream: pysyncobj reads until EAGAIN.
    conn, sock, _ = connection([struct.pack("i", 1000) + os.urandom(RECV_BYTES - 4), *[os.urandom(RECV_BYTES)] * 1000])
    read_event(conn)
    assert sock.recv_calls == 1
    assert conn.state == CONNECTION_STATE.DISCONNECTED  # the frame did not decrypt


def test_an_authenticated_stream_is_read_in_bounded_steps_and_every_frame_delivered():
    frames = b"".join(wire({"n": n}, encryptor=None) for n in range(200))
    assert len(frames) <= RECV_BYTES
    conn, sock, delivered = connection(endless(frames), encryptor=None, authenticated=True)
    read_event(conn)  # an endless stream: pysyncobj's loop reads until EAGAIN, which never comes
    assert sock.recv_calls == -(-READ_AHEAD_BYTES // len(frames))
    assert [m["n"] for m in delivered] == [n % 200 for n in range(200 * sock.recv_calls)]
    assert len(getattr(conn, CONN_READ_BUFFER)) == 0


def test_many_frames_of_one_read_are_all_delivered_in_order():
    data = wire(os.urandom(32)) + b"".join(wire({"n": n}) for n in range(300))
    conn, _, delivered = connection(chunked(data))
    while len(delivered) < 301 and conn.state == CONNECTION_STATE.CONNECTED:
        read_event(conn)
    assert [m["n"] for m in delivered[1:]] == list(range(300))
    assert len(getattr(conn, CONN_READ_BUFFER)) == 0


def test_the_wire_format_is_pysyncobjs_both_ways():
    rand_key = os.urandom(32)
    message = {"type": "request_vote", "term": 7}
    conn, sock, delivered = connection([wire(os.urandom(32)), wire(message, rand_key=rand_key)])
    read_event(conn)  # before authentication, a read stops at the head frame
    conn.recvRandKey = rand_key  # what pysyncobj sets after the first message of the handshake
    read_event(conn)
    assert delivered[1] == message
    # And what the bounded connection sends, pysyncobj's own connection reads.
    conn.sendRandKey = rand_key
    conn.send(message)
    stock = TcpConnection(poller=FakePoller(), socket=FakeSocket(chunked(bytes(sock.sent))), timeout=float("inf"))
    stock.encryptor, stock.recvRandKey = KEY, rand_key
    received: list = []
    stock.setOnMessageReceivedCallback(received.append)
    read_event(stock)
    assert received == [message]


def test_the_largest_append_batch_fits_well_under_the_frame_cap():
    """pysyncobj adds entries until they reach APPEND_BATCH_BYTES, then one more may be as large
    as an entry gets; the smallest entries carry the most pickling overhead, and random bytes
    do not compress."""
    entries, total, index = [], 0, 1
    while total + 32 < APPEND_BATCH_BYTES:  # just short of the batch: one more entry is still added
        entries.append((os.urandom(32), index, 3))
        total += 32
        index += 1
    entries.append((os.urandom(MAX_ENTRY_BYTES + 64), index, 3))  # the command, wrapped by pysyncobj
    message = {
        "type": "append_entries",
        "term": 3,
        "commit_index": 1,
        "entries": entries,
        "prevLogIdx": 0,
        "prevLogTerm": 0,
    }
    frame_bytes = len(wire(message, rand_key=os.urandom(32)))
    assert APPEND_BATCH_BYTES + MAX_ENTRY_BYTES < frame_bytes <= FRAME_MAX_BYTES // 2


# -- connections -------------------------------------------------------------------------------------


def test_an_unidentified_connection_lives_at_most_the_timeout_however_it_trickles():
    assert not should_close(
        now=13.0, accepted_at=10.0, last_read_at=12.9, identified=False, current=False, timeout_s=3.5
    )
    assert should_close(now=13.6, accepted_at=10.0, last_read_at=13.5, identified=False, current=False, timeout_s=3.5)


def test_a_replaced_link_is_closed_once_idle_and_a_current_one_is_left_to_pysyncobj():
    assert should_close(now=20.0, accepted_at=0.0, last_read_at=16.0, identified=True, current=False, timeout_s=3.5)
    assert not should_close(now=20.0, accepted_at=0.0, last_read_at=17.0, identified=True, current=False, timeout_s=3.5)
    assert not should_close(now=99.0, accepted_at=0.0, last_read_at=0.0, identified=True, current=True, timeout_s=3.5)


def test_the_source_limit_counts_open_connections_per_address():
    limit = SourceLimit(cap=2)
    assert limit.admit("10.0.0.1") and limit.admit("10.0.0.1")
    assert not limit.admit("10.0.0.1")
    assert limit.admit("10.0.0.2")
    limit.release("10.0.0.1")
    assert limit.admit("10.0.0.1") and limit.open_from("10.0.0.1") == 2


def test_a_closed_incoming_connection_frees_its_slot_once():
    released: list = []
    conn, _, _ = connection(on_closed=released.append)
    conn.disconnect()
    conn.disconnect()
    assert released == [conn]


def test_the_server_closes_connections_past_the_per_source_cap_at_accept():
    accepted: list = []
    server = BoundedTcpServer(FakePoller(), "127.0.0.1", 0, onNewConnection=accepted.append, per_source_max=16)
    sockets = [FakeSocket() for _ in range(18)]
    for sock in sockets[:17]:
        server._admit(sock, "127.0.2.1")
    server._admit(sockets[17], "127.0.2.2")  # another address has its own count
    assert len(accepted) == 17 and sockets[16].closed and not any(sock.closed for sock in sockets[:16])
    accepted[0].disconnect()  # a closed connection frees its slot
    server._admit(FakeSocket(), "127.0.2.1")
    assert len(accepted) == 18 and server.sources.open_from("127.0.2.1") == 16


class FailingListener:
    def __init__(self, error: int) -> None:
        self.error = error

    def accept(self):
        raise OSError(self.error, os.strerror(self.error))


@pytest.mark.parametrize("error", [errno.ECONNABORTED, errno.EMFILE, errno.EAGAIN])
def test_an_accept_error_of_one_client_does_not_unbind_the_raft_port(error):
    server = BoundedTcpServer(FakePoller(), "127.0.0.1", 0, onNewConnection=lambda conn: None)
    setattr(server, SERVER_SOCKET, FailingListener(error))
    unbound: list = []
    server.unbind = lambda: unbound.append(True)
    getattr(server, SERVER_ON_NEW_CONNECTION)(0, POLL_EVENT_TYPE.READ)
    assert unbound == []
