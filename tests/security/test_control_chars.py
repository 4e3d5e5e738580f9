"""Finding 9: a worker's `error` and `output_tail` are caller text. Control characters in them
must not forge a node log line, nor reach an operator's terminal through `raftcron runs`."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration

from scheduler.cli import output
from scheduler.core.model import JobSpec, RetryPolicy
from scheduler.local import wait_until
from scheduler.logs import configure_logging
from scheduler.rpc.convert import spec_to_pb
from scheduler.rpc.limits_interceptor import LimitsInterceptor
from scheduler.security.safetext import shown_text, stored_text
from worker.api.v1 import common_pb2 as pb
from worker.api.v1 import worker_pb2 as wpb

pytestmark = pytest.mark.security

HOSTILE = "boom\x1b]0;pwned\x07\r\nFAKE LOG LINE n1 CRITICAL raftcron.node: forged\x9b2J\u202egnp.exe"
RAW = ("\x1b", "\x07", "\r", "\x9b", "\u202e")


def assert_harmless(text: str) -> None:
    assert not any(char in text for char in RAW), repr(text)
    assert not any(line.startswith("FAKE LOG LINE") for line in text.splitlines()), text


def test_stored_text_keeps_lines_and_drops_controls():
    assert stored_text("a\tb\nc\x1b[31md\x00\x85") == "a\tb\nc\ufffd[31md\ufffd\ufffd"
    assert shown_text("a\tb\nc\x1b") == "a\\tb\\nc\\x1b"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_logged_message_is_one_line_without_raw_controls(fmt):
    stream = io.StringIO()
    handler = configure_logging("INFO", fmt, "n1", stream=stream)
    try:
        logging.getLogger("raftcron.alerts").warning("ALERT failed job: %s", HOSTILE, extra={"error": HOSTILE})
    finally:
        logging.getLogger().removeHandler(handler)
    text = stream.getvalue()
    assert text.count("\n") == 1, text
    assert_harmless(text)
    if fmt == "json":  # JSON keeps the value exactly, escaped
        line = json.loads(text)
        assert line["message"] == f"ALERT failed job: {HOSTILE}" and line["error"] == HOSTILE


def test_the_cli_prints_worker_text_escaped(capsys):
    run = pb.Run(job_id="j", run_key="j@1", reason=HOSTILE, error=HOSTILE, status=1)
    output.print_runs_list([run], as_json=False)
    assert_harmless(capsys.readouterr().out)
    output.print_runs_list([run], as_json=True)
    assert json.loads(capsys.readouterr().out)[0]["error"] == HOSTILE  # JSON escapes, and keeps the value


def test_the_rpc_boundary_cleans_a_completion_before_the_servicer():
    seen = []
    handler = LimitsInterceptor().intercept_service(
        lambda details: grpc.unary_unary_rpc_method_handler(lambda request, context: seen.append(request)),
        type("Details", (), {"method": "/raftcron.v1.WorkerService/CompleteMany", "invocation_metadata": ()})(),
    )
    ref = wpb.LeaseRef(job_id="j", fencing_token=1)
    ref.scheduled_at.seconds = 1
    item = wpb.CompleteRequest(
        worker_id="w", lease=ref, kind=wpb.FAILURE, error=HOSTILE, output_tail=HOSTILE + "\nlast"
    )
    handler.unary_unary(wpb.CompleteManyRequest(worker_id="w", completions=[item]), None)
    (stored,) = seen[0].completions
    assert stored.error == stored_text(HOSTILE) and stored.output_tail.endswith("\nlast")
    assert not any(char in stored.error + stored.output_tail for char in ("\x1b", "\x07", "\r", "\x9b"))


@pytest.mark.integration
def test_a_hostile_completion_forges_no_log_line_and_reaches_no_terminal(make_cluster):
    cluster = make_cluster(3, alert_routes={"default": {"log": True}})
    cluster.start()
    cluster.wait_for_leader(60)
    job = JobSpec(
        id="hostile",
        schedule="0 0 1 1 *",
        target_kind="handler",
        target="t",
        jitter="pinned",
        retry=RetryPolicy(max_attempts=1),
    )
    with cluster.client(timeout_s=10) as client:
        client.apply_jobs(jobs=[spec_to_pb(job)])
        run_key = client.trigger_job(job_id="hostile").run.run_key

        def leased():
            return client.lease(worker_id="w", targets=["t"], wait=Duration(seconds=1)).leases

        (grant,) = wait_until(leased, 30, "the run to be leased")
        ref = wpb.LeaseRef(job_id=grant.job_id, scheduled_at=grant.scheduled_at, fencing_token=grant.fencing_token)
        client.complete(worker_id="w", lease=ref, kind=wpb.FAILURE, error=HOSTILE, output_tail=HOSTILE)
        wait_until(lambda: client.list_alerts(pending_only=False).alerts, 30, "the failure alert")

    def logged_alert():
        return any("ALERT" in m.log_path.read_text(errors="replace") for m in cluster.members)

    wait_until(logged_alert, 30, "the alert in a node log")
    for member in cluster.members:
        assert_harmless(member.log_path.read_text(errors="replace"))
    env = {**os.environ, "RAFTCRON_CLUSTER": cluster.cluster_arg}
    shown = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "runs", "hostile"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "hostile" in shown.stdout
    assert_harmless(shown.stdout + shown.stderr)
    listed = subprocess.run(
        [sys.executable, "-m", "scheduler.cli", "runs", "hostile", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    (run,) = [r for r in json.loads(listed.stdout) if r["run_key"] == run_key]
    assert run["error"] == stored_text(HOSTILE)  # stored without the controls, as replicated
    # The hostile text stopped nothing: every node process still runs, none saw its leader's
    # process exit, and the cluster still commits a write. (Not "the leader kept its term": on a
    # loaded 2-core CI machine a stalled Raft tick can cost an election unrelated to this text.)
    assert all(member.alive() for member in cluster.members)
    for member in cluster.members:
        assert "exited (its Raft port refuses connections)" not in member.log_path.read_text(errors="replace")
    with cluster.client(timeout_s=10) as client:
        client.apply_jobs(
            jobs=[spec_to_pb(JobSpec(id="after", schedule="0 0 1 1 *", target_kind="handler", target="t"))]
        )
        assert client.get_job(job_id="after").job.spec.id == "after"
