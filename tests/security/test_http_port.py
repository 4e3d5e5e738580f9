"""Finding 7: the HTTP port (metrics, dashboard) bounds what its clients hold: 300 clients that
send half a request line hold neither 300 threads of the node nor /metrics, and a client too
slow or too large with its headers is cut off."""

from __future__ import annotations

import socket
import time
import urllib.request
from pathlib import Path

import pytest

from scheduler.dashboard.server import HEAD_DEADLINE_S, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_CLIENT
from scheduler.localcluster import wait_until
from tests.integration.test_security import secured_cluster

pytestmark = [pytest.mark.security, pytest.mark.integration]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = secured_cluster(tmp_path_factory.mktemp("http"), 3, metrics=True)
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        yield cluster
    finally:
        cluster.stop()


def threads_of(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Threads:")))


def metric(url: str, name: str) -> float:
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines() if line.startswith(name + " "))


def half_requests(host: str, port: int, count: int, source: str) -> list[socket.socket]:
    """`count` connections from `source` that each send half a request line, and nothing more."""
    held = []
    for _ in range(count):
        sock = socket.socket()
        sock.bind((source, 0))  # another host of loopback: the attacker is not the scraper
        sock.settimeout(5)
        sock.connect((host, port))
        sock.sendall(b"GET /metr")
        held.append(sock)
    return held


def closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_half_sent_requests_hold_no_thread_and_leave_metrics_answering(cluster):
    leader = cluster.wait_for_leader(30)
    member = cluster.member(leader)
    term = cluster.status(leader).term
    host, port = member.metrics_address.rsplit(":", 1)
    before = threads_of(member.process.pid)
    held = half_requests(host, int(port), 300, "127.0.0.2")
    try:
        # /metrics answers a scraper meanwhile, and the node holds a bounded number of threads.
        refused = 300 - MAX_CONNECTIONS_PER_CLIENT
        wait_until(lambda: metric(member.metrics_url, "raftcron_http_connections_refused_total") >= refused, 30,
                   "the connections beyond the client's share to be refused")
        assert threads_of(member.process.pid) <= before + MAX_CONNECTIONS
        status = cluster.status(leader)
        assert status is not None and (status.role, status.term) == ("leader", term)
        # Past the deadline for its headers, each admitted connection is closed by the node.
        for sock in held:
            sock.settimeout(HEAD_DEADLINE_S + 20)
        started = time.monotonic()
        assert all(closed_by_peer(sock) for sock in held)
        assert time.monotonic() - started < HEAD_DEADLINE_S + 20
    finally:
        for sock in held:
            sock.close()
    wait_until(lambda: threads_of(member.process.pid) <= before + 2, 20, "the connection threads to end")
    assert cluster.leader() == leader


def test_a_request_head_larger_than_the_cap_is_cut_off(cluster):
    member = cluster.member(cluster.wait_for_leader(30))
    host, port = member.metrics_address.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET /metrics HTTP/1.1\r\n")
        try:
            for _ in range(64):
                sock.sendall(b"X-Filler: " + b"a" * 4096 + b"\r\n")
        except OSError:
            pass  # closed by the node mid-send
        assert closed_by_peer(sock)
    assert metric(member.metrics_url, "raftcron_http_connections_refused_total") >= 0  # still answering
