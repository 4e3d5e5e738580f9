"""Probes of the Raft port (findings 3: frames and buffers before authentication, idle and
unauthenticated connections, connections per source). Each attacks the leader of a real 3-node
cluster and asserts that every node's Status answered within its deadline throughout, that the
leader and its term did not change, that the replicas still agree, and that the port disclosed
nothing and ran nothing."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

import pytest

from scheduler.local import LocalCluster, wait_until
from tests.integration.test_security import rce_frame
from tests.security.conftest import FAST_RAFT, assert_clean_logs, free_port_base

pytestmark = [pytest.mark.integration, pytest.mark.security]

# RaftSettings.to_conf: max(3.5, election_timeout_max_s); FAST_RAFT's maximum is 1.2 s.
CONNECTION_TIMEOUT_S = 3.5
STATUS_DEADLINE_S = 5.0
# The machine is shared and loaded: a generous margin, still far below "never".
CLOSE_MARGIN_S = 10.0


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = LocalCluster(
        tmp_path_factory.mktemp("raft-port"), nodes=3, port_base=free_port_base(3), overrides=dict(FAST_RAFT)
    )
    with cluster:
        cluster.start()
        cluster.wait_for_leader(60)
        yield cluster
    assert_clean_logs(cluster)


class Watch:
    """Polls every node's Status (each call with STATUS_DEADLINE_S) while an attack runs."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.failures: list[str] = []
        self.leaders: set[tuple[str, int]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:  # a first round at once, and a last one begun after the attack ended
            stopping = self._stop.is_set()
            self._round()
            if stopping:
                return
            self._stop.wait(0.25)

    def _round(self) -> None:
        for member in self.cluster.current_members:
            try:
                with self.cluster.client(member.node_id, timeout_s=STATUS_DEADLINE_S) as client:
                    status = client.status(address=member.grpc_address)
            except Exception as exc:  # noqa: BLE001 (any failure to answer counts)
                self.failures.append(f"{member.node_id}: {type(exc).__name__}")
                continue
            if status.role == "leader":
                self.leaders.add((status.node_id, status.term))


@contextlib.contextmanager
def steady(cluster: LocalCluster):
    """The leader, its term and the replicas' agreement survive the body; Status answers throughout."""
    leader = cluster.wait_for_leader(30)
    term = cluster.status(leader).term
    watch = Watch(cluster)
    watch._thread.start()
    try:
        yield cluster.member(leader)
    finally:
        watch._stop.set()
        watch._thread.join()
    assert not watch.failures, f"Status did not answer within {STATUS_DEADLINE_S}s: {watch.failures[:10]}"
    assert watch.leaders == {(leader, term)}, f"leadership changed during the attack: {sorted(watch.leaders)}"
    after = cluster.status(leader)
    assert (after.role, after.leader, after.term) == ("leader", leader, term)
    cluster.wait_converged(30)


def raft_endpoint(member) -> tuple[str, int]:
    host, _, port = member.raft_address.rpartition(":")
    return host, int(port)


def connect_from(source: str, endpoint: tuple[str, int]) -> socket.socket:
    """A connection from `source` (any 127.x.y.z is this host's loopback on Linux)."""
    sock = socket.socket()
    sock.bind((source, 0))
    sock.settimeout(10)
    sock.connect(endpoint)
    sock.setblocking(False)
    return sock


def closed_by_peer(sock: socket.socket, received: bytearray) -> bool:
    """True once the node closed `sock` (FIN or reset); what it sent before goes to `received`."""
    while True:
        try:
            chunk = sock.recv(65536)
        except BlockingIOError:
            return False
        except ConnectionResetError:
            return True
        if not chunk:
            return True
        received += chunk


def test_a_huge_length_prefix_is_refused_before_its_body_is_read(cluster, tmp_path):
    """pysyncobj buffers up to 2 GiB for an announced frame, growing bytes on the tick thread:
    48 MiB stalled it and deposed the leader. Now the prefix closes the connection."""
    marker = tmp_path / "pwned"
    frame = rce_frame(marker)
    chunk = frame * ((1 << 20) // len(frame) + 1)  # ~1 MiB of exploit frames
    budget_bytes, budget_s = 64 << 20, 10.0
    sent, error = 0, None
    with steady(cluster) as leader:
        with socket.create_connection(raft_endpoint(leader), timeout=budget_s) as sock:
            deadline = time.monotonic() + budget_s
            try:
                sock.sendall(struct.pack("i", 2**31 - 1))
                while sent < budget_bytes and time.monotonic() < deadline:
                    sock.sendall(chunk)
                    sent += len(chunk)
                received = bytearray()
                wait_until(
                    lambda: closed_by_peer(sock, received),
                    CONNECTION_TIMEOUT_S + CLOSE_MARGIN_S,
                    "the node to close the connection",
                )
            except OSError as exc:  # the node closed it under our feet: reset, broken pipe
                error = exc
    assert isinstance(error, (ConnectionResetError, BrokenPipeError)), (
        f"the node read {sent} bytes of an unauthenticated frame and kept the connection ({error!r})"
    )
    # What the kernel's socket buffers took before the reset, not what the node read.
    assert sent < 16 << 20
    assert not marker.exists()


def test_idle_and_trickling_connections_are_closed_within_the_connection_timeout(cluster):
    """200 connections that never authenticate (a few trickle a byte now and then, which kept
    pysyncobj's read clock fresh): all closed within the connection timeout, nothing sent."""
    with steady(cluster) as leader:
        endpoint = raft_endpoint(leader)
        opened_at = time.monotonic()
        sockets = [connect_from(f"127.0.1.{i}", endpoint) for i in range(1, 201)]
        trickling = sockets[:10]
        for sock in trickling:
            sock.send(struct.pack("i", 1000))  # a plausible frame that never completes
        received = [bytearray() for _ in sockets]
        open_ = set(range(len(sockets)))
        deadline = opened_at + CONNECTION_TIMEOUT_S + CLOSE_MARGIN_S
        try:
            while open_ and time.monotonic() < deadline:
                for i in list(open_):
                    if closed_by_peer(sockets[i], received[i]):
                        open_.discard(i)
                    elif sockets[i] in trickling:
                        with contextlib.suppress(OSError):
                            sockets[i].send(b"x")
                time.sleep(0.2)
        finally:
            for sock in sockets:
                sock.close()
    assert not open_, f"{len(open_)} of 200 unauthenticated connections still open after {deadline - opened_at:.0f}s"
    assert all(not data for data in received), "the node sent something to an unauthenticated connection"


def test_connections_past_the_per_source_cap_are_closed_at_once(cluster):
    """40 connections from one address: those past the cap (16) are closed when accepted, the
    first 16 only by the connection timeout; the peers (all on 127.0.0.1) keep their links."""
    cap = 16
    with steady(cluster) as leader:
        endpoint = raft_endpoint(leader)
        sockets = [connect_from("127.0.2.1", endpoint) for _ in range(40)]
        received = [bytearray() for _ in sockets]
        closed: list[int] = []
        try:

            def enough_closed() -> bool:
                closed.extend(
                    i for i, sock in enumerate(sockets) if i not in closed and closed_by_peer(sock, received[i])
                )
                return len(closed) >= len(sockets) - cap

            wait_until(
                enough_closed,
                CONNECTION_TIMEOUT_S + CLOSE_MARGIN_S,
                "the connections past the cap to close",
                interval_s=0.05,
            )
        finally:
            for sock in sockets:
                sock.close()
    assert set(closed) == set(range(cap, len(sockets))), (
        f"closed first: {sorted(closed)}; expected the ones past the first {cap}"
    )
    assert all(not data for data in received)
