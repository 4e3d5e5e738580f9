"""Output per attempt against a real node and worker: a shell job that writes to stdout and stderr
and fails once, then succeeds; `raftcron logs` shows both attempts with their own streams, and
/metrics the job's last success."""

from __future__ import annotations

import os
import re
import signal
import urllib.request

import pytest

from scheduler import cli
from scheduler.core.log_format import LOG_FORMAT
from scheduler.core.model import SECOND_US, JobSpec, RetryPolicy
from scheduler.local import wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb
from scheduler.security.principals import ADMIN, WORKER, Principal
from tests.security.principals_cluster import secured_cluster, start_worker

pytestmark = pytest.mark.integration

PRINCIPALS = [Principal("admin", ADMIN), Principal("shell-worker", WORKER, targets=("shell",))]
FLAKY = (
    'if [ "$RAFTCRON_ATTEMPT" = 1 ]; then echo "out of attempt 1"; echo "err of attempt 1" >&2; exit 3; fi; '
    'echo "out of attempt 2"; echo "err of attempt 2" >&2'
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = secured_cluster(tmp_path_factory.mktemp("attempt-output"), PRINCIPALS, metrics=True)
    worker = None
    try:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        # Before format 3 the node keeps only the combined tail: wait until every field is kept.
        wait_until(lambda: (s := cluster.status(leader)) and s.cluster_version >= LOG_FORMAT, 30, "log format 3")
        worker = start_worker(cluster, "shell-worker", "--shell")
        yield cluster
    finally:
        if worker is not None and worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        cluster.stop()


def _cli(cluster, capsys, *args: str) -> tuple[int, str, str]:
    env = cluster.credentials.client_env("admin")
    flags = ["--cluster", cluster.cluster_arg, "--ca", env["RAFTCRON_CA"], "--token-file", env["RAFTCRON_TOKEN_FILE"]]
    status = cli.main([*args, *flags])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_logs_shows_each_attempt_with_its_streams(cluster, capsys):
    retry = RetryPolicy(max_attempts=2, backoff_initial_us=SECOND_US, backoff_max_us=SECOND_US)
    spec = JobSpec(id="flaky", schedule="0 0 1 1 *", target_kind="shell", target=FLAKY, jitter="pinned", retry=retry)
    with cluster.client(timeout_s=10) as admin:
        admin.apply_jobs(jobs=[spec_to_pb(spec)])
        run_key = admin.trigger_job(job_id="flaky").run.run_key

    def succeeded():
        with cluster.client(timeout_s=10) as admin:
            return STATUS_FROM_PB[admin.get_run(run_key=run_key).run.status] == "succeeded"

    wait_until(succeeded, 30, f"{run_key} to succeed")
    status, out, err = _cli(cluster, capsys, "logs", "flaky")
    assert status == 0, err
    first, second = out.split("\nattempt ")[1:]
    assert first.startswith("1: failure, exit code 3 (worker shell-worker/"), out
    assert "--- stdout ---\n  out of attempt 1\n" in first and "--- stderr ---\n  err of attempt 1" in first
    assert second.startswith("2: success, exit code 0"), out
    assert "--- stdout ---\n  out of attempt 2\n" in second and "--- stderr ---\n  err of attempt 2" in second
    assert "attempt 2" not in first and "of attempt 1" not in second

    status, out, err = _cli(cluster, capsys, "logs", "flaky", "--attempt", "3")
    assert (status, out) == (2, "") and "has attempts 1-2; there is no attempt 3" in err

    member = cluster.current_members[0]
    with urllib.request.urlopen(member.metrics_url, timeout=10) as response:
        metrics = response.read().decode()
    assert re.search(r'raftcron_job_last_success_timestamp_seconds\{job="flaky",owner=""\} 1\.\d+e\+09', metrics)
    assert 'raftcron_job_last_success_duration_seconds{job="flaky",owner=""}' in metrics
