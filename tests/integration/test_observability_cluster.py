"""Metrics over HTTP, the gRPC health service and JSON logs of real node processes on loopback.

Each node serves Prometheus metrics on its own port (LocalCluster(metrics=True) gives node i
the port P+200+i); the test scrapes them, leases a run, and checks the health service
before and after the leader is killed.
"""

from __future__ import annotations

import json
import random
import socket
import urllib.request

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from prometheus_client.parser import text_string_to_metric_families

from scheduler.core.model import JobSpec
from scheduler.local import LocalCluster, wait_until
from scheduler.rpc.convert import spec_to_pb
from tests.integration.conftest import FAST_RAFT, PORT_BASES, assert_clean_logs
from worker.api.v1 import worker_pb2 as wpb

pytestmark = [
    pytest.mark.integration,
]

SERVING = 1  # grpc.health.v1.HealthCheckResponse.SERVING


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def port_base_with_metrics(nodes: int) -> int:
    """A base P such that Raft (P+i), gRPC (P+100+i) and metrics (P+200+i) ports are free."""
    for _ in range(100):
        base = random.randrange(PORT_BASES.start, PORT_BASES.stop, 300)
        if all(_free(base + offset + i) for offset in (0, 100, 200) for i in range(1, nodes + 1)):
            return base
    raise RuntimeError("no free port range found")


@pytest.fixture
def metrics_cluster(tmp_path):
    clusters: list[LocalCluster] = []

    def make(nodes: int = 3, **overrides) -> LocalCluster:
        cluster = LocalCluster(
            tmp_path / f"cluster{len(clusters)}",
            nodes=nodes,
            port_base=port_base_with_metrics(nodes),
            overrides={**FAST_RAFT, **overrides},
            metrics=True,
        )
        clusters.append(cluster)
        return cluster

    yield make
    for cluster in clusters:
        cluster.stop()


def scrape(member) -> dict[tuple[str, frozenset], float]:
    """(sample name, labels) -> value, from one node's /metrics over HTTP."""
    with urllib.request.urlopen(member.metrics_url, timeout=5) as response:
        text = response.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric(samples: dict, name: str, **labels) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def health_status(member, service: str = "") -> int | None:
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(member.grpc_address) as channel:
        try:
            return (
                health_pb2_grpc.HealthStub(channel)
                .Check(health_pb2.HealthCheckRequest(service=service), timeout=2)
                .status
            )
        except grpc.RpcError:
            return None


def every_second(job_id: str) -> JobSpec:
    return JobSpec(id=job_id, schedule="* * * * * *", target_kind="handler", target="h", jitter="pinned")


def test_metrics_and_health_on_every_node(metrics_cluster):
    cluster = metrics_cluster(3, lease_ttl_s=30)
    cluster.start()
    leader_id = cluster.wait_for_leader()
    leader = cluster.member(leader_id)
    followers = [m for m in cluster.members if m.node_id != leader_id]
    assert all(m.metrics_url.startswith("http://127.0.0.1:") for m in cluster.members)

    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(every_second("tick"))])
    wait_until(lambda: metric(scrape(leader), "raftcron_runs", status="queued") >= 2, 20, "queued runs in metrics")

    on_leader = scrape(leader)
    assert metric(on_leader, "raftcron_raft_is_leader") == 1
    assert metric(on_leader, "raftcron_raft_role", role="leader") == 1
    assert metric(on_leader, "raftcron_ready") == 1
    assert metric(on_leader, "raftcron_leading_epoch") == metric(on_leader, "raftcron_leader_epoch") >= 1
    assert metric(on_leader, "raftcron_jobs") == 1
    assert metric(on_leader, "raftcron_runs_claimed_total", status="queued") >= 2
    assert metric(on_leader, "raftcron_fire_lateness_seconds_count") >= 2
    assert metric(on_leader, "raftcron_raft_commit_index") >= metric(on_leader, "raftcron_raft_applied_index") > 0
    queued_in_dispatch = sum(
        value
        for (name, labels), value in on_leader.items()
        if name == "raftcron_dispatch_queue" and ("target", "h") in labels
    )
    assert queued_in_dispatch >= 1
    assert metric(on_leader, "process_resident_memory_bytes") > 0
    for follower in followers:
        on_follower = scrape(follower)
        assert metric(on_follower, "raftcron_raft_is_leader") == 0
        assert metric(on_follower, "raftcron_raft_role", role="follower") == 1
        assert metric(on_follower, "raftcron_leading_epoch") == 0
        assert not any(name == "raftcron_dispatch_queue" for name, _ in on_follower)

    with cluster.client(timeout_s=10) as client:
        request = wpb.LeaseRequest(worker_id="w", targets=["h"], max_runs=1, wait=Duration(seconds=5))
        leases = client.lease(request).leases
    assert leases
    for member in cluster.members:  # replicated: every node counts the grant and the leased run
        wait_until(lambda m=member: metric(scrape(m), "raftcron_runs", status="leased") >= 1, 10, "a leased run")
        assert metric(scrape(member), "raftcron_lease_grants_total") >= 1

    for member in cluster.members:
        wait_until(lambda m=member: health_status(m) == SERVING, 10, f"{member.node_id} SERVING")
        assert health_status(member, "raftcron.v1.JobService") == SERVING
        assert health_status(member, "raftcron.v1.WorkerService") == SERVING
        assert health_status(member, "raftcron.v1.ClusterService") == SERVING

    epoch = metric(on_leader, "raftcron_leader_epoch")
    cluster.kill(leader_id)
    new_leader = cluster.member(cluster.wait_for_leader(exclude=(leader_id,)))
    wait_until(lambda: health_status(new_leader) == SERVING, 10, "the new leader SERVING")
    on_new_leader = scrape(new_leader)
    assert metric(on_new_leader, "raftcron_raft_is_leader") == 1
    assert metric(on_new_leader, "raftcron_leader_epoch") > epoch
    wait_until(
        lambda: metric(scrape(new_leader), "raftcron_raft_peer_connected", peer=leader_id) == 0,
        10,
        "the dead leader's link reported down",
    )
    assert_clean_logs(cluster)


def test_json_logs(metrics_cluster):
    cluster = metrics_cluster(3, log_format="json")
    cluster.start()
    cluster.wait_for_leader()
    member = cluster.members[0]

    def started_line():
        for line in member.log_path.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                doc = json.loads(line)
                if doc.get("logger") == "raftcron.node" and "serving gRPC" in doc.get("message", ""):
                    return doc
        return None

    doc = wait_until(started_line, 10, "a JSON start line")
    assert doc["node"] == member.node_id and doc["level"] == "INFO" and doc["ts"].endswith("Z")
