"""Workers as real processes: SIGKILL and SIGSTOP them, hang a handler, kill the leader while
leasing; the cluster fences stale attempts and the sink never accepts a stale write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest

from scheduler.core.model import SECOND_US, JobSpec, RetryPolicy
from scheduler.local import wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, parse_run_key, spec_to_pb, timestamp
from tests.integration.conftest import assert_clean_logs
from tests.integration.handlers import FencedSink
from worker.api.v1 import runs_pb2
from worker.api.v1 import worker_pb2 as wpb

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = "it.slow=tests.integration.handlers:slow_sink_job it.quick=tests.integration.handlers:quick_sink_job it.hang=tests.integration.handlers:hang_job"
FAST_LEASES = {"lease_ttl_s": 1.5}


def start_worker(
    cluster, sink_dir: Path, worker_id: str, concurrency: int = 4, isolation: str = "process"
) -> subprocess.Popen:
    env = {**os.environ, "RAFTCRON_TEST_SINK": str(sink_dir), "PYTHONPATH": str(ROOT)}
    log = open(cluster.data_dir / f"{worker_id}.log", "ab")
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scheduler.cli",
                "worker",
                "--cluster",
                cluster.cluster_arg,
                "--worker-id",
                worker_id,
                "--concurrency",
                str(concurrency),
                "--isolation",
                isolation,
                "--lease-wait",
                "1",
                "--handlers",
                *HANDLERS.split(),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()


@pytest.fixture
def workers():
    started: list[subprocess.Popen] = []
    yield started
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGCONT)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def run_of(cluster, run_key: str):
    with cluster.client() as client:
        return client.get_run(runs_pb2.GetRunRequest(run_key=run_key)).run


def status_of(cluster, run_key: str) -> str:
    return STATUS_FROM_PB.get(run_of(cluster, run_key).status, "")


def trigger(cluster, job_id: str) -> str:
    with cluster.client() as client:
        return client.trigger_job(job_id=job_id, author="test").run.run_key


def apply(cluster, *specs: JobSpec) -> None:
    with cluster.client() as client:
        client.apply_jobs(jobs=[spec_to_pb(s) for s in specs], author="test")


def manual_job(job_id: str, target: str, **fields) -> JobSpec:
    # A schedule that never fires within the test: runs come from explicit triggers.
    return JobSpec(id=job_id, schedule="0 0 1 1 *", target_kind="handler", target=target, jitter="pinned", **fields)


def late_complete(cluster, worker_id: str, run_key: str, token: int) -> int:
    job_id, scheduled_us = parse_run_key(run_key)
    ref = wpb.LeaseRef(job_id=job_id, scheduled_at=timestamp(scheduled_us), fencing_token=token)
    with cluster.client() as client:
        return client.complete(wpb.CompleteRequest(worker_id=worker_id, lease=ref, kind=wpb.SUCCESS)).outcome


def test_killed_worker_run_is_released_and_its_late_complete_fenced(make_cluster, workers, tmp_path):
    cluster = make_cluster(3, **FAST_LEASES)
    cluster.start()
    cluster.wait_for_leader()
    sink = FencedSink(tmp_path / "sink")
    apply(
        cluster,
        manual_job(
            "it-kill", "it.slow", payload_json='{"work_s":30}', retry=RetryPolicy(max_attempts=3, backoff_initial_us=0)
        ),
    )
    worker_a = start_worker(cluster, sink.root, "wA")
    workers.append(worker_a)
    run_key = trigger(cluster, "it-kill")
    first = wait_until(lambda: next((m for m in sink.read("started") if m["key"] == run_key), None), 30, "wA to start")
    os.killpg(worker_a.pid, signal.SIGKILL)
    worker_a.wait()
    workers.append(start_worker(cluster, sink.root, "wB"))
    second = wait_until(
        lambda: next((m for m in sink.read("started") if m["key"] == run_key and m["worker"] == "wB"), None),
        30,
        "the run to be leased again",
    )
    assert second["token"] > first["token"]
    assert late_complete(cluster, "wA", run_key, first["token"]) == wpb.FENCED
    run = run_of(cluster, run_key)
    assert run.attempts[0].outcome == "lease_expired" and run.attempts[0].fencing_token == first["token"]
    assert run.fencing_token == second["token"]
    cluster.wait_converged()
    assert_clean_logs(cluster)


def test_paused_worker_is_fenced_and_the_sink_refuses_its_stale_write(make_cluster, workers, tmp_path):
    cluster = make_cluster(3, **FAST_LEASES)
    cluster.start()
    cluster.wait_for_leader()
    sink = FencedSink(tmp_path / "sink")
    apply(
        cluster,
        manual_job(
            "it-pause", "it.slow", payload_json='{"work_s":3}', retry=RetryPolicy(max_attempts=3, backoff_initial_us=0)
        ),
    )
    worker_a = start_worker(cluster, sink.root, "wA")
    workers.append(worker_a)
    run_key = trigger(cluster, "it-pause")
    first = wait_until(lambda: next((m for m in sink.read("started") if m["key"] == run_key), None), 30, "wA to start")
    os.killpg(worker_a.pid, signal.SIGSTOP)  # paused well past its 1.5 s lease
    workers.append(start_worker(cluster, sink.root, "wB"))
    wait_until(lambda: status_of(cluster, run_key) == "succeeded", 60, "wB to finish the run")
    os.killpg(worker_a.pid, signal.SIGCONT)
    # wA wakes up, finishes its sleep and writes with its old token: the sink must refuse it.
    stale = wait_until(lambda: [e for e in sink.read() if e["worker"] == "wA"], 30, "wA's late write")
    assert stale == [{"key": run_key, "token": first["token"], "worker": "wA", "ok": False}]
    accepted = [e for e in sink.read() if e["ok"]]
    assert len(accepted) == 1 and accepted[0]["worker"] == "wB" and accepted[0]["token"] > first["token"]
    assert late_complete(cluster, "wA", run_key, first["token"]) == wpb.FENCED
    run = run_of(cluster, run_key)
    assert [a.outcome for a in run.attempts] == ["lease_expired", "success"]
    assert_clean_logs(cluster)


def test_hung_handler_is_ended_at_its_max_runtime(make_cluster, workers, tmp_path):
    cluster = make_cluster(3, lease_ttl_s=3.0)
    cluster.start()
    cluster.wait_for_leader()
    sink = FencedSink(tmp_path / "sink")
    apply(cluster, manual_job("it-hang", "it.hang", timeout_us=2 * SECOND_US, retry=RetryPolicy(max_attempts=1)))
    workers.append(start_worker(cluster, sink.root, "wA"))
    run_key = trigger(cluster, "it-hang")
    wait_until(lambda: sink.read("started"), 30, "the hung handler to start")
    started = time.monotonic()
    wait_until(lambda: status_of(cluster, run_key) == "timed_out", 30, "the run to time out")
    assert time.monotonic() - started < 15, "ended long after its 2 s max runtime"
    run = run_of(cluster, run_key)
    assert [a.outcome for a in run.attempts] == ["timed_out"]
    assert "maximum runtime" in run.attempts[0].error


def test_leader_killed_while_a_thousand_due_runs_are_leased(make_cluster, workers, tmp_path):
    cluster = make_cluster(3, lease_ttl_s=3.0)
    cluster.start()
    leader = cluster.wait_for_leader()
    sink = FencedSink(tmp_path / "sink")
    due_at = time.gmtime(time.time() + 8)
    schedule = f"{due_at.tm_sec} {due_at.tm_min} {due_at.tm_hour} {due_at.tm_mday} {due_at.tm_mon} *"
    specs = [
        JobSpec(id=f"herd-{i:04d}", schedule=schedule, target_kind="handler", target="it.quick", jitter="pinned")
        for i in range(1000)
    ]
    apply(cluster, *specs)
    for worker_id in ("wA", "wB"):
        # Threads: this test is about the leader's death, not 128 handler processes on two cores.
        workers.append(start_worker(cluster, sink.root, worker_id, concurrency=64, isolation="thread"))
    wait_until(lambda: len([e for e in sink.read() if e["ok"]]) >= 100, 60, "leasing to be under way")
    cluster.kill(leader)
    cluster.wait_for_leader(exclude=(leader,))

    def all_runs():
        with cluster.client() as client:
            return client.list_runs(runs_pb2.ListRunsRequest(page_size=1000)).runs

    wait_until(
        lambda: sum(STATUS_FROM_PB[r.status] == "succeeded" for r in all_runs()) == 1000, 120, "every run to succeed"
    )
    runs = all_runs()
    assert len(runs) == 1000 and {STATUS_FROM_PB[r.status] for r in runs} == {"succeeded"}
    assert len({e["key"] for e in sink.read() if e["ok"]}) == 1000
    for run in runs:
        tokens = [a.fencing_token for a in run.attempts]
        assert tokens == sorted(set(tokens)), f"{run.run_key}: tokens not strictly increasing"
        assert [a.outcome for a in run.attempts][-1] == "success"
    # A run key written twice is fine only if every later write carried a higher token.
    for key in {e["key"] for e in sink.read()}:
        tokens = [e["token"] for e in sink.read() if e["key"] == key and e["ok"]]
        assert tokens == sorted(tokens)
    cluster.start(leader)
    cluster.wait_converged(timeout_s=30)
    assert_clean_logs(cluster)


def test_a_follower_forwards_lease_and_names_the_leader(make_cluster):
    """The worker SDK then leases at the leader directly (tested against fakes in the unit tests)."""
    cluster = make_cluster(3)
    cluster.start()
    leader = cluster.member(cluster.wait_for_leader())
    follower = next(m for m in cluster.members if m.node_id != leader.node_id)
    request = wpb.LeaseRequest(worker_id="w-probe", targets=["it.nothing"], max_runs=1)

    def answers(client, named: str) -> bool:
        try:
            return client.lease(request).leader_address == named
        except grpc.RpcError as exc:  # a follower learns who leads from the leader's first append
            if exc.code() == grpc.StatusCode.UNAVAILABLE:
                return False
            raise

    for member, named in ((follower, leader.grpc_address), (leader, "")):
        with cluster.client(member.node_id, role="worker") as client:
            wait_until(lambda: answers(client, named), 30, f"{member.node_id} to answer leader_address {named!r}")
