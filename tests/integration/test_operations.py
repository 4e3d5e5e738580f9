"""Kill switches with and without cancelling running runs, and alerts delivered to a real
webhook at least once, with their dedup key, across a leader change."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.protobuf.duration_pb2 import Duration

from scheduler.core.model import JobSpec
from scheduler.local import wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb
from tests.integration.conftest import assert_clean_logs
from worker.api.v1 import runs_pb2
from worker.api.v1 import worker_pb2 as wpb

pytestmark = pytest.mark.integration


def every_second(job_id: str, job_class: str, target: str = "h") -> JobSpec:
    return JobSpec(
        id=job_id,
        schedule="* * * * * *",
        target_kind="handler",
        target=target,
        job_class=job_class,
        owner="analytics",
        jitter="pinned",
    )


def runs(cluster, job_id: str):
    with cluster.client() as client:
        return list(
            client.list_runs(
                runs_pb2.ListRunsRequest(job_id=job_id, page_size=1000, newest_first=False, linearizable=True)
            ).runs
        )


def lease_one(cluster):
    with cluster.client(timeout_s=10) as client:
        grants = client.lease(
            wpb.LeaseRequest(worker_id="w", targets=["h"], max_runs=1, wait=Duration(seconds=5))
        ).leases
    assert grants, "nothing leased"
    g = grants[0]
    return wpb.LeaseRef(job_id=g.job_id, scheduled_at=g.scheduled_at, fencing_token=g.fencing_token)


def heartbeat(cluster, ref) -> int:
    with cluster.client() as client:
        return client.heartbeat(wpb.HeartbeatRequest(worker_id="w", leases=[ref])).results[0].outcome


@pytest.mark.parametrize("cancel_running", [False, True])
def test_kill_switch(make_cluster, cancel_running):
    cluster = make_cluster(3, lease_ttl_s=30)
    cluster.start()
    cluster.wait_for_leader()
    with cluster.client() as client:
        # Only batch-a's runs are leasable by lease_one (target h): the leased run is of the killed class.
        client.apply_jobs(
            jobs=[spec_to_pb(every_second("batch-a", "batch")), spec_to_pb(every_second("other", "web", "h2"))]
        )
    ref = lease_one(cluster)
    with cluster.client() as client:
        client.kill_class(job_class="batch", reason="db migration", author="carol", cancel_running=cancel_running)
    killed_at = len(runs(cluster, "batch-a"))
    wait_until(lambda: len(runs(cluster, "batch-a")) >= killed_at + 3, 20, "slots while killed")
    after_kill = runs(cluster, "batch-a")[killed_at:]
    assert {STATUS_FROM_PB[r.status] for r in after_kill} == {"skipped"}
    assert all(r.reason == "killed: db migration (by carol)" for r in after_kill)
    before = runs(cluster, "batch-a")[:killed_at]
    assert "queued" not in {STATUS_FROM_PB[r.status] for r in before}, "queued runs must not start after a kill"
    assert STATUS_FROM_PB[runs(cluster, "other")[-1].status] == "queued", "other classes keep firing"
    expected = wpb.RUN_CANCELLED if cancel_running else wpb.OK
    assert heartbeat(cluster, ref) == expected
    with cluster.client() as client:
        kills = client.list_kills()
        assert [k.job_class for k in kills.active] == ["batch"] and kills.audit[0].author == "carol"
        client.revive_class(job_class="batch", author="carol")
        assert [r.action for r in client.list_kills().audit[:2]] == ["revive", "kill"]
    wait_until(lambda: STATUS_FROM_PB[runs(cluster, "batch-a")[-1].status] == "queued", 20, "firing again after revive")
    assert_clean_logs(cluster)


def test_cancel_one_queued_and_one_leased_run(make_cluster):
    cluster = make_cluster(3, lease_ttl_s=30)
    cluster.start()
    leader = cluster.wait_for_leader()
    wait_until(lambda: cluster.status(leader).cluster_version >= 3, 30, "the cluster at log format 3")
    job = JobSpec(id="once", schedule="0 0 1 1 *", target_kind="handler", target="h", jitter="pinned", overlap="allow")
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(job)])
        queued = client.trigger_job(job_id="once", author="alice").run
    env = {**os.environ, "RAFTCRON_CLUSTER": cluster.cluster_arg}
    at = queued.scheduled_at.ToDatetime().isoformat() + "Z"
    shown = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "cancel", "once", "--at", at, "--reason", "wrong input", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    (printed,) = json.loads(shown.stdout)
    assert (
        printed["status"] == "cancelled" and "cancelled by" in printed["reason"] and "wrong input" in printed["reason"]
    )
    again = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "cancel", "once", "--at", at], env=env, capture_output=True, text=True
    )
    assert again.returncode != 0 and "already ended cancelled" in again.stderr

    with cluster.client() as client:
        client.trigger_job(job_id="once", author="alice")
    ref = lease_one(cluster)
    with cluster.client() as client:
        cancelled = client.cancel_run(job_id="once", scheduled_at=ref.scheduled_at, author="carol").run
    assert STATUS_FROM_PB[cancelled.status] == "cancelled"
    assert heartbeat(cluster, ref) == wpb.RUN_CANCELLED
    assert_clean_logs(cluster)


def test_a_trigger_with_its_own_payload_and_overlap_reaches_the_worker(make_cluster):
    cluster = make_cluster(3, lease_ttl_s=30)
    cluster.start()
    leader = cluster.wait_for_leader()
    wait_until(lambda: cluster.status(leader).cluster_version >= 3, 30, "the cluster at log format 3")
    job = JobSpec(
        id="report", schedule="0 0 1 1 *", target_kind="handler", target="h", overlap="forbid", payload_json='{"d":1}'
    )
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(job)])
        client.trigger_job(job_id="report", author="alice")
    lease_one(cluster)  # the job's own run is running: forbid refuses a plain trigger now
    env = {**os.environ, "RAFTCRON_CLUSTER": cluster.cluster_arg}
    cli = [sys.executable, "-m", "scheduler.cli", "trigger", "report"]
    refused = subprocess.run(cli, env=env, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "overlap is forbid" in refused.stderr
    allowed = subprocess.run(
        [*cli, "--overlap", "allow", "--payload", '{"d": 2, "rerun": true}'], env=env, capture_output=True, text=True
    )
    assert allowed.returncode == 0, allowed.stderr
    with cluster.client(timeout_s=10) as client:
        (grant,) = client.lease(worker_id="w", targets=["h"], max_runs=1, wait=Duration(seconds=5)).leases
    assert json.loads(grant.payload_json) == {"d": 2, "rerun": True}
    assert_clean_logs(cluster)


class Receiver(BaseHTTPRequestHandler):
    failing = True
    received: list[tuple[str, dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if Receiver.failing:
            self.send_response(503)
        else:
            Receiver.received.append((self.headers["Idempotency-Key"], body))
            self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_alerts_reach_the_owner_once_per_id_across_a_leader_change(make_cluster):
    server = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/alerts"
    try:
        cluster = make_cluster(3, alert_routes={"analytics": {"webhook": url}})
        cluster.start()
        leader = cluster.wait_for_leader()
        with cluster.client() as client:
            client.apply_jobs(jobs=[spec_to_pb(every_second(f"r{i}", "reports")) for i in range(3)])
            client.kill_class(job_class="reports", reason="bad data", author="dave")
            pending = client.list_alerts(pending_only=True)
        ids = {a.id for a in pending.alerts if a.kind == "killed"}
        assert len(ids) == 3
        # The receiver is down while the first leader tries; a new leader must deliver them.
        cluster.kill(leader)
        cluster.wait_for_leader(exclude=(leader,))
        Receiver.failing = False
        wait_until(lambda: ids <= {key for key, _ in Receiver.received}, 60, "the webhook to receive every alert")
        with cluster.client() as client:
            wait_until(lambda: client.list_alerts(pending_only=True).pending == 0, 20, "alerts marked delivered")
        for key, body in Receiver.received:
            assert body["id"] == key and body["owner"] == "analytics"
        assert len({key for key, _ in Receiver.received}) == len(ids)  # duplicates, if any, share the key
    finally:
        server.shutdown()
