"""Targets are authority (hostile callers, finding 4): a submitter's jobs run only the targets its
principal lists, a shell job's environment holds none of the worker's credentials, and a reader
sees only its owners' output tails and payloads. Each probe asserts nothing ran or leaked."""

from __future__ import annotations

import base64
import os
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from scheduler.core.model import SECOND_US, JobSpec
from scheduler.local import wait_until
from scheduler.rpc.convert import STATUS_FROM_PB, spec_to_pb, timestamp
from scheduler.security.principals import ADMIN, READER, SUBMITTER, WORKER, Principal
from tests.security.principals_cluster import assert_responsive, refused, secured_cluster, start_worker

pytestmark = [pytest.mark.security, pytest.mark.integration]

PRINCIPALS = [
    Principal("admin", ADMIN),
    Principal("fin-ci", SUBMITTER, owners=("finance",), targets=("handler:reports.*",)),
    Principal("star-ci", SUBMITTER, owners=("*",), targets=("*",)),  # every handler: still no shell
    Principal("legacy-ci", SUBMITTER, owners=("finance",)),  # written before targets: no shell
    Principal("ops-ci", SUBMITTER, owners=("ops",), targets=("shell:ops",)),
    Principal("shell-worker", WORKER, targets=("shell", "reports.*")),
    Principal("fin-reader", READER, owners=("finance",)),
]


def shell_job(job_id: str, owner: str, command: str, payload: str = "") -> JobSpec:
    # Fires only when triggered within the test (a yearly slot).
    return JobSpec(
        id=job_id,
        schedule="0 0 1 1 *",
        target_kind="shell",
        target=command,
        owner=owner,
        jitter="pinned",
        payload_json=payload,
    )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    cluster = secured_cluster(tmp_path_factory.mktemp("targets"), PRINCIPALS, metrics=True)
    workers = []
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        # The worker as an operator starts it: its token file and the CA in its environment, its
        # working directory the one holding every principal's token.
        decoys = {"AWS_SECRET_ACCESS_KEY": "decoy-aws-secret"}
        workers.append(start_worker(cluster, "shell-worker", "--shell", "--shell-owners", "ops", "finance", env=decoys))
        if os.geteuid() == 0:  # and one that runs the sandbox owner's commands as nobody
            workers.append(
                start_worker(
                    cluster,
                    "shell-worker",
                    "--shell",
                    "--shell-owners",
                    "sandbox",
                    "--shell-user",
                    "nobody",
                    "--worker-id",
                    "sandboxed",
                )
            )
        cluster.worker_cwd = os.getcwd()
        yield cluster
    finally:
        for worker in workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
        cluster.stop()


def final_run(cluster, run_key: str, timeout_s: float = 60):
    def done():
        with cluster.client(timeout_s=10) as root:
            run = root.get_run(run_key=run_key, linearizable=True).run
        return run if STATUS_FROM_PB[run.status] in ("succeeded", "failed") else None

    return wait_until(done, timeout_s, f"{run_key} to end")


def job_ids(cluster) -> set[str]:
    with cluster.client(timeout_s=10) as root:
        return {job.spec.id for job in root.list_jobs(linearizable=True).jobs}


def test_a_submitter_without_shell_in_its_targets_cannot_run_a_shell_command(cluster, tmp_path):
    leader = cluster.wait_for_leader()
    marker = tmp_path / "submitter-ran-this"
    hostile = shell_job("fin-shell", "finance", f"touch {marker}")
    for principal in ("fin-ci", "star-ci", "legacy-ci"):
        with cluster.client(role=principal, timeout_s=10) as submitter:
            details = refused(lambda: submitter.apply_jobs(jobs=[spec_to_pb(hostile)]))
            assert principal in details and "'shell:finance'" in details
    # Not by changing a job it may change either: the admin's finance handler job made a shell job.
    with cluster.client(timeout_s=10) as root:
        root.apply_jobs(
            jobs=[
                spec_to_pb(
                    JobSpec(
                        id="fin-report",
                        schedule="0 0 1 1 *",
                        target_kind="handler",
                        target="reports.build",
                        owner="finance",
                        jitter="pinned",
                    )
                )
            ]
        )
    with cluster.client(role="fin-ci", timeout_s=10) as fin:
        refused(lambda: fin.apply_jobs(jobs=[spec_to_pb(shell_job("fin-report", "finance", f"touch {marker}"))]))
    # An ops submitter listing shell:ops runs shell jobs of ops, and of no other owner.
    with cluster.client(role="ops-ci", timeout_s=10) as ops:
        refused(lambda: ops.apply_jobs(jobs=[spec_to_pb(shell_job("ops-as-fin", "finance", f"touch {marker}"))]))
        ops.apply_jobs(jobs=[spec_to_pb(shell_job("ops-canary", "ops", "echo canary"))])
        canary = ops.trigger_job(job_id="ops-canary").run.run_key
    # The canary ran through the same worker: had the hostile job been accepted, it would have run too.
    assert STATUS_FROM_PB[final_run(cluster, canary).status] == "succeeded"
    assert not marker.exists()
    assert not job_ids(cluster) & {"fin-shell", "ops-as-fin"}
    assert_responsive(cluster, leader)


def test_a_shell_job_of_the_admins_owner_is_not_triggered_by_a_submitter_without_shell(cluster, tmp_path):
    marker = tmp_path / "triggered"
    with cluster.client(timeout_s=10) as root:
        root.apply_jobs(jobs=[spec_to_pb(shell_job("fin-cleanup", "finance", f"touch {marker}"))])
    with cluster.client(role="fin-ci", timeout_s=10) as fin:
        details = refused(lambda: fin.trigger_job(job_id="fin-cleanup"))
        assert "fin-ci" in details and "'shell:finance'" in details
        now = timestamp(int(time.time() * SECOND_US))
        refused(lambda: fin.backfill_job(job_id="fin-cleanup", to=now, **{"from": timestamp(SECOND_US)}))
        with cluster.client(timeout_s=10) as root:
            assert not root.list_runs(job_id="fin-cleanup", linearizable=True).runs
    assert not marker.exists()


def test_a_handler_outside_the_submitters_patterns_is_refused(cluster):
    payroll = JobSpec(
        id="fin-payroll",
        schedule="0 0 1 1 *",
        target_kind="handler",
        target="payroll.run",
        owner="finance",
        jitter="pinned",
    )
    with cluster.client(role="fin-ci", timeout_s=10) as fin:
        details = refused(lambda: fin.apply_jobs(jobs=[spec_to_pb(payroll)]))
        assert details.startswith("fin-ci may not use target 'handler:payroll.run' for job 'fin-payroll'")
        report = JobSpec(
            id="fin-weekly",
            schedule="0 0 1 1 *",
            target_kind="handler",
            target="reports.weekly",
            owner="finance",
            jitter="pinned",
        )
        assert fin.apply_jobs(jobs=[spec_to_pb(report)]).changes[0].change == "added"
    assert "fin-payroll" not in job_ids(cluster)


def test_the_environment_of_a_shell_job_holds_no_token_and_no_credentials_path(cluster, tmp_path):
    dump = tmp_path / "env-dump"
    tokens = {p.name: Path(cluster.credentials.token_file(p.name)).read_text() for p in PRINCIPALS}
    # What a hostile command would try: its environment, the token file it names and the
    # directory around it, and its working directory.
    command = (
        f'{{ env; echo CWD=$(pwd); ls -a; cat *.token "$RAFTCRON_TOKEN_FILE" '
        f'"$(dirname "${{RAFTCRON_TOKEN_FILE:-/nonexistent/x}}")"/*.token; }} > {dump} 2>&1'
    )
    with cluster.client(role="ops-ci", timeout_s=10) as ops:
        ops.apply_jobs(jobs=[spec_to_pb(shell_job("ops-env", "ops", command))])
        run_key = ops.trigger_job(job_id="ops-env").run.run_key
    assert STATUS_FROM_PB[final_run(cluster, run_key).status] in ("succeeded", "failed")
    seen = dump.read_text()
    assert "RAFTCRON_JOB_ID=ops-env" in seen  # the run's own variables are there
    for name, token in tokens.items():
        assert token not in seen, f"{name}'s token leaked into a shell job"
    assert str(cluster.credentials.directory) not in seen and "ca.pem" not in seen
    assert "decoy-aws-secret" not in seen
    for name in ("RAFTCRON_TOKEN", "RAFTCRON_TOKEN_FILE", "RAFTCRON_CA", "RAFTCRON_CLIENT_KEY", "RAFTCRON_CLIENT_CERT"):
        assert f"{name}=" not in seen
    assert f"CWD={cluster.worker_cwd}\n" not in seen


def run_path(run) -> str:
    return f"/runs/{run.job_id}/{run.scheduled_at.seconds * SECOND_US + run.scheduled_at.nanos // 1000}"


@pytest.mark.skipif(os.geteuid() != 0, reason="--shell-user needs a worker running as root")
def test_a_shell_job_run_as_the_shell_user_cannot_read_the_workers_files(cluster):
    admin_token = Path(cluster.credentials.token_file("admin")).read_text()
    command = (
        f"id -u; id -G; cat {cluster.credentials.token_file('admin')} {cluster.credentials.directory}/*; echo done"
    )
    with cluster.client(timeout_s=10) as root:
        root.apply_jobs(jobs=[spec_to_pb(shell_job("sandbox-probe", "sandbox", command))])
        run_key = root.trigger_job(job_id="sandbox-probe").run.run_key
    run = final_run(cluster, run_key)
    assert run.worker_id == "shell-worker/sandboxed"  # only the sandboxed worker leases shell:sandbox
    page = dashboard_page(cluster, run_path(run), "admin")
    assert "65534\n65534\n" in page and "done" in page and "Permission denied" in page
    assert admin_token not in page


def dashboard_page(cluster, path: str, principal: str) -> str:
    token = Path(cluster.credentials.token_file(principal)).read_text()
    basic = base64.b64encode(f"anyone:{token}".encode()).decode()
    request = urllib.request.Request(
        f"http://{cluster.members[0].metrics_address}{path}", headers={"Authorization": f"Basic {basic}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.read().decode()


def test_a_reader_sees_no_output_tail_or_payload_of_another_owner(cluster):
    with cluster.client(role="ops-ci", timeout_s=10) as ops:
        ops.apply_jobs(
            jobs=[spec_to_pb(shell_job("ops-tail", "ops", "echo ops-tail-secret", '{"key":"ops-payload-secret"}'))]
        )
        run_key = ops.trigger_job(job_id="ops-tail").run.run_key
    run = final_run(cluster, run_key)
    assert "ops-tail-secret" in dashboard_page(cluster, run_path(run), "admin")
    assert "ops-payload-secret" in dashboard_page(cluster, "/jobs/ops-tail", "admin")
    page = dashboard_page(cluster, run_path(run), "fin-reader")
    assert "ops-tail-secret" not in page and "succeeded" in page  # status stays visible
    assert "ops-payload-secret" not in dashboard_page(cluster, "/jobs/ops-tail", "fin-reader")
    with cluster.client(role="fin-reader", timeout_s=10) as reader:
        assert reader.get_job(job_id="ops-tail").job.spec.payload_json == ""
        assert not [j for j in reader.list_jobs().jobs if "ops-payload-secret" in j.spec.payload_json]
    with cluster.client(timeout_s=10) as root:
        assert "ops-payload-secret" in root.get_job(job_id="ops-tail").job.spec.payload_json
