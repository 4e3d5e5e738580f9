"""The alerting workflow on one real cluster: replicated routes delivering to a webhook (and a
route change applied with no restart), a deadline alert whose run goes on and succeeds, a job
that pauses itself after failures (resume clears it), a worker-less outage that yields one
coalesced alert per job, and a shell job's final exit code (no retry). Cancel, trigger payloads and alerts across a leader change are in
test_operations.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from google.protobuf.duration_pb2 import Duration

from scheduler.core.model import SECOND_US, AlertRoute, JobSpec, MisfirePolicy, RetryPolicy
from scheduler.local import LocalCluster, wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, route_to_pb, spec_to_pb
from tests.integration.conftest import FAST_RAFT, assert_clean_logs, free_port_base
from worker.api.v1 import runs_pb2
from worker.api.v1 import worker_pb2 as wpb

pytestmark = pytest.mark.integration


class _Receiver(BaseHTTPRequestHandler):
    received: list[tuple[str, dict]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Receiver.received.append((self.path, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    cluster = LocalCluster(
        tmp_path_factory.mktemp("workflows"), nodes=3, port_base=free_port_base(3), overrides=FAST_RAFT
    )
    try:
        cluster.start()
        cluster.wait_for_leader()
        for member in cluster.members:
            wait_until(
                lambda m=member.node_id: cluster.status(m).cluster_version >= 3, 30, "every node at log format 3"
            )
        _apply_routes(cluster, f"{base_url}/first")
        yield cluster, base_url
        assert_clean_logs(cluster)
    finally:
        cluster.stop()
        server.shutdown()


def _apply_routes(cluster, url: str) -> None:
    with cluster.client() as client:
        route = route_to_pb(AlertRoute("everyone", url, timeout_us=2 * SECOND_US), False)
        client.apply_jobs(routes=[route], declares_routes=True)


def _alerts(cluster, job_id: str, kind: str):
    with cluster.client() as client:
        return [a for a in client.list_alerts().alerts if a.job_id == job_id and a.kind == kind]


def _received(job_id: str, kind: str, path: str = "") -> list[dict]:
    return [b for p, b in list(_Receiver.received) if b["job_id"] == job_id and b["kind"] == kind and path in p]


def _lease(cluster, target: str, wait_s: int = 5):
    with cluster.client(timeout_s=wait_s + 5) as client:
        grants = client.lease(
            wpb.LeaseRequest(worker_id="w", targets=[target], max_runs=1, wait=Duration(seconds=wait_s))
        ).leases
    assert grants, f"nothing of {target} leased"
    g = grants[0]
    return wpb.LeaseRef(job_id=g.job_id, scheduled_at=g.scheduled_at, fencing_token=g.fencing_token)


def _complete(cluster, ref, kind) -> int:
    with cluster.client() as client:
        return client.complete(wpb.CompleteRequest(worker_id="w", lease=ref, kind=kind, error="boom")).outcome


def _job(job_id: str, target: str, **fields) -> JobSpec:
    fields.setdefault("schedule", "* * * * * *")
    return JobSpec(id=job_id, target_kind="handler", target=target, owner="team", jitter="pinned", **fields)


def test_a_deadline_alert_is_routed_and_the_run_goes_on_to_succeed(workflow):
    cluster, _ = workflow
    job = _job("late-report", "report", deadline_us=2 * SECOND_US, overlap="forbid")
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(job)])
    ref = _lease(cluster, "report")
    wait_until(lambda: _received("late-report", "deadline_missed", "/first"), 20, "the deadline alert at the route")
    (body,) = _received("late-report", "deadline_missed")[:1]
    assert "had not succeeded 2s after it was due (status leased, attempt 1)" in body["message"]
    assert _complete(cluster, ref, wpb.SUCCESS) == wpb.OK  # the run was not stopped
    with cluster.client() as client:
        client.pause_job(job_id="late-report", author="t", reason="test over")
        run = client.list_runs(runs_pb2.ListRunsRequest(job_id="late-report", page_size=1000)).runs
    assert "succeeded" in {STATUS_FROM_PB[r.status] for r in run}


def test_a_job_pauses_itself_after_failures_and_a_resume_clears_it(workflow):
    cluster, _ = workflow
    job = _job("flaky", "flaky", retry=RetryPolicy(max_attempts=1), pause_after_failures=2, overlap="forbid")
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(job)])
    for _ in range(2):
        assert _complete(cluster, _lease(cluster, "flaky"), wpb.FAILURE) == wpb.OK
    wait_until(lambda: _alerts(cluster, "flaky", "paused"), 20, "the job's own pause")
    with cluster.client() as client:
        assert client.get_job(job_id="flaky").job.paused
        client.resume_job(job_id="flaky", author="t", reason="fixed")
    # The resume started the count again: the job runs, and one more failure does not pause it.
    assert _complete(cluster, _lease(cluster, "flaky"), wpb.FAILURE) == wpb.OK
    assert _complete(cluster, _lease(cluster, "flaky"), wpb.SUCCESS) == wpb.OK
    with cluster.client() as client:
        assert not client.get_job(job_id="flaky").job.paused
        client.pause_job(job_id="flaky", author="t", reason="test over")


def test_a_worker_less_outage_is_one_alert_with_a_count_and_a_route_change_needs_no_restart(workflow):
    cluster, base_url = workflow
    _apply_routes(cluster, f"{base_url}/second")
    with cluster.client() as client:
        # No worker serves `nobody`: the first run stays queued and every later slot is skipped.
        client.apply_jobs(jobs=[spec_to_pb(_job("orphan", "nobody", overlap="forbid", misfire=MisfirePolicy()))])
    wait_until(lambda: _received("orphan", "skipped", "/second"), 20, "the outage's alert at the new route")
    wait_until(
        lambda: _alerts(cluster, "orphan", "skipped") and _alerts(cluster, "orphan", "skipped")[0].count >= 4,
        20,
        "the streak to count several slots",
    )
    (alert,) = _alerts(cluster, "orphan", "skipped")  # one alert, however many slots
    assert alert.count >= 4
    assert not _received("orphan", "skipped", "/first")
    with cluster.client() as client:
        client.pause_job(job_id="orphan", author="t", reason="test over")


def test_a_shell_jobs_final_exit_code_ends_the_run_failed_without_retry(workflow):
    from worker import Worker

    cluster, _ = workflow
    retry = RetryPolicy(max_attempts=3, backoff_initial_us=0, final_exit_codes=(3,))
    job = JobSpec(id="strict", schedule="0 0 1 1 *", target_kind="shell", target="exit 3", owner="team", retry=retry)
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(job)])
        client.trigger_job(job_id="strict", author="t")
    with Worker(cluster=cluster.cluster_arg, shell=True, lease_wait_s=1.0, concurrency=1):

        def ended():
            with cluster.client() as client:
                runs = client.list_runs(runs_pb2.ListRunsRequest(job_id="strict", page_size=10)).runs
            return [r for r in runs if STATUS_FROM_PB[r.status] == "failed"]

        (run,) = wait_until(ended, 20, "the shell run to end failed")
    assert (run.attempt, run.exit_code) == (1, 3)  # one attempt: exit code 3 is final
