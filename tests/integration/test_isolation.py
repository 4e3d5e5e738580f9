"""A worker under process isolation, against a real cluster: a handler that ignores its deadline
is killed, and the worker keeps running other runs at its full concurrency."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from scheduler.core.model import SECOND_US, JobSpec, RetryPolicy
from scheduler.local import LocalCluster, wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb
from tests.integration.conftest import FAST_RAFT, free_port_base
from tests.integration.handlers import FencedSink
from worker.api.v1 import runs_pb2

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
JOBS = "tests.integration.isolation_jobs"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("isolation")
    cluster = LocalCluster(root / "cluster", nodes=3, port_base=free_port_base(3), overrides=dict(FAST_RAFT))
    sink = FencedSink(root / "sink")
    worker = None
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        specs = [
            manual_job("iso-hang", "it.ignores", timeout_us=2 * SECOND_US),
            *(manual_job(f"iso-pair-{name}", "it.second") for name in "ab"),
            manual_job("iso-beside", "it.second"),
        ]
        with cluster.client() as client:
            client.apply_jobs(jobs=[spec_to_pb(s) for s in specs], author="test")
        env = {**os.environ, "RAFTCRON_TEST_SINK": str(sink.root), "PYTHONPATH": str(ROOT)}
        with open(root / "worker.log", "ab") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "scheduler.cli", "worker", "--cluster", cluster.cluster_arg]
                + ["--worker-id", "iso", "--concurrency", "2", "--lease-wait", "1", "--shell-grace", "1"]
                + ["--isolation", "process", "--handlers", f"it.ignores={JOBS}:ignores_deadline"]
                + [f"it.second={JOBS}:takes_a_second"],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        yield cluster, sink, worker
    finally:
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        cluster.stop()


def manual_job(job_id: str, target: str, **fields) -> JobSpec:
    return JobSpec(
        id=job_id,
        schedule="0 0 1 1 *",
        target_kind="handler",
        target=target,
        jitter="pinned",
        retry=RetryPolicy(max_attempts=1),
        **fields,
    )


def trigger(cluster, job_id: str) -> str:
    with cluster.client() as client:
        return client.trigger_job(job_id=job_id, author="test").run.run_key


def run_of(cluster, run_key: str):
    with cluster.client() as client:
        return client.get_run(runs_pb2.GetRunRequest(run_key=run_key)).run


def status_of(cluster, run_key: str) -> str:
    return STATUS_FROM_PB.get(run_of(cluster, run_key).status, "")


def process_gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] == "Z"
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between open and read
        return True


def test_a_handler_ignoring_its_deadline_is_killed_and_the_worker_keeps_its_concurrency(setup):
    cluster, sink, worker = setup
    hung_key = trigger(cluster, "iso-hang")
    hung = wait_until(lambda: next(iter(sink.read("hung")), None), 30, "the deaf handler to start")
    # The other slot keeps serving while the deaf handler holds one.
    beside = trigger(cluster, "iso-beside")
    wait_until(lambda: status_of(cluster, beside) == "succeeded", 30, "a run beside the deaf one")
    wait_until(lambda: status_of(cluster, hung_key) == "timed_out", 30, "the deaf run to time out")
    wait_until(lambda: process_gone(hung["pid"]), 10, "the deaf handler's process to be killed")
    # Both slots are free again: two runs of a second each overlap.
    keys = [trigger(cluster, f"iso-pair-{name}") for name in "ab"]
    for key in keys:
        wait_until(lambda key=key: status_of(cluster, key) == "succeeded", 30, f"{key} to succeed")
    spans = {(m["key"], m["edge"]): m["at"] for m in sink.read("spans") if m["key"] in keys}
    a, b = keys
    assert max(spans[(a, "start")], spans[(b, "start")]) < min(spans[(a, "end")], spans[(b, "end")]), spans
    # What it printed before it was killed is on the attempt the cluster timed out.
    wait_until(lambda: "deadline" in run_of(cluster, hung_key).attempts[0].stdout_tail, 20, "the deaf run's output")
    assert worker.poll() is None
