"""Findings 6 and 7: the HTTP port (metrics, dashboard) bounds what its clients hold: 300
clients that send half a request line hold neither 300 threads of the node nor /metrics, and a
client too slow or too large with its headers is cut off. And a node does not serve its
dashboard off loopback without tokens unless told to."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs

import pytest
import yaml

from scheduler.dashboard.server import (
    HEAD_DEADLINE_S,
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_CLIENT,
    BadRequest,
    Dashboard,
)
from scheduler.local import LocalCluster, wait_until
from tests.integration.test_security import secured_cluster
from tests.security.conftest import free_port_base

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
        wait_until(
            lambda: metric(member.metrics_url, "raftcron_http_connections_refused_total") >= refused,
            30,
            "the connections beyond the client's share to be refused",
        )
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


def test_a_node_refuses_to_serve_its_dashboard_off_loopback_without_tokens(tmp_path):
    # 192.0.2.1 (TEST-NET-1) is on no interface here: even a node that did not refuse could not
    # expose anything; it would fail to bind, with another message.
    cluster = LocalCluster(tmp_path / "exposed", nodes=3, port_base=free_port_base(3))
    member = cluster.members[0]
    config = yaml.safe_load(member.config_path.read_text())
    member.config_path.write_text(yaml.safe_dump({**config, "metrics": "192.0.2.1:9100"}))
    serve = [sys.executable, "-m", "scheduler.cli", "serve", "--config", str(member.config_path)]
    refused = subprocess.run(serve, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0
    assert "refusing to serve the dashboard on 192.0.2.1:9100 without bearer tokens" in refused.stderr + refused.stdout


@pytest.mark.parametrize("path", ["/runs/j/" + "9" * 5000, "/runs/j/--5", "/jobs?page=" + "9" * 5000])
def test_numbers_in_a_dashboard_url_are_bounded_before_they_are_converted(path):
    # int() of 5,000 digits raises, and a page that raises is a 500 with a traceback in the node log.
    board = Dashboard.__new__(Dashboard)  # the checks come before any state is read
    page, _, query = path.partition("?")
    with pytest.raises(BadRequest):
        board.render(page, parse_qs(query))
