"""Fixtures for tests that start real node processes on loopback."""

from __future__ import annotations

import random
import socket

import pytest

from scheduler.local import LocalCluster

# Tight timeouts keep failover tests short; epochs keep them safe.
FAST_RAFT = {
    "raft": {
        "election_timeout_min_s": 0.4,
        "election_timeout_max_s": 1.2,
        "leader_fallback_timeout_s": 1.2,
        "connection_retry_s": 0.5,
    }
}


def _ports_free(base: int, count: int) -> bool:
    for port in [base + i for i in range(1, count + 1)] + [base + 100 + i for i in range(1, count + 1)]:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


# Below Linux's ephemeral range (32768-60999 by default): a port drawn there can be handed to
# some process's outgoing connection between our probe and the node's bind, which failed a
# cluster test with "Address already in use". Above the e2e tests' range (10,000-20,000).
PORT_BASES = range(20_000, 32_000)


def free_port_base(count: int = 5) -> int:
    """A base P such that P+1.. and P+101.. are free on loopback."""
    for _ in range(100):
        base = random.randrange(PORT_BASES.start, PORT_BASES.stop, 200)
        if _ports_free(base, count):
            return base
    raise RuntimeError("no free port range found")


def free_ports(count: int) -> list[int]:
    """`count` free loopback ports outside the ephemeral range (see PORT_BASES)."""
    base = free_port_base(count)
    return [base + i for i in range(1, count + 1)]


@pytest.fixture
def make_cluster(tmp_path):
    """Build LocalClusters that are always stopped, even when the test fails."""
    clusters: list[LocalCluster] = []

    def make(nodes: int = 3, **overrides) -> LocalCluster:
        cluster = LocalCluster(
            tmp_path / f"cluster{len(clusters)}",
            nodes=nodes,
            port_base=free_port_base(nodes),
            overrides={**FAST_RAFT, **overrides},
        )
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()


def assert_clean_logs(cluster: LocalCluster) -> None:
    """pysyncobj's divergence warning and any CRITICAL line fail the test."""
    for member in cluster.members:
        text = member.log_path.read_text(errors="replace") if member.log_path.exists() else ""
        bad = [line for line in text.splitlines() if "CRITICAL" in line or "truncating already-applied" in line]
        assert not bad, f"{member.node_id} logged:\n" + "\n".join(bad[:5])
