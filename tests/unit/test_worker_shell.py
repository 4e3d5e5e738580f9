"""The shell executor: environment, stdin, output tail, exit codes, and process-group cleanup."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from datetime import datetime, timezone
from pathlib import Path

from tests.unit.test_worker_fakes import fake_cluster, make_grant, wait_until
from worker import CancelReason, ShellCommand, Worker
from worker.api.v1 import worker_pb2
from worker.testing import make_context, run_handler


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (dead, waiting to be reaped) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def pids_in(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def spawner(pid_file: Path, *, ignore_term: bool = False) -> str:
    """A command that starts two `sleep 30` children and waits, writing every pid to `pid_file`."""
    trap = "trap '' TERM; " if ignore_term else ""
    return (
        f"{trap}echo $$ > {pid_file}.tmp; sleep 30 & echo $! >> {pid_file}.tmp; "
        f"sleep 30 & echo $! >> {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; wait"
    )


def test_environment_and_stdin_carry_the_run() -> None:
    scheduled = datetime(2026, 3, 1, 6, 15, tzinfo=timezone.utc)
    command = ShellCommand('env | grep ^RAFTCRON_ | sort; printf "STDIN=%s\\n" "$(cat)"')
    outcome = run_handler(
        command, payload={"report": "sales", "ü": 1}, job_id="reports.nightly", scheduled_at=scheduled,
        attempt=2, fencing_token=42,
    )
    assert outcome.kind == "SUCCESS" and outcome.exit_code == 0
    lines = dict(line.split("=", 1) for line in outcome.output_tail.splitlines())
    ctx = outcome.context
    assert lines["RAFTCRON_JOB_ID"] == "reports.nightly"
    assert lines["RAFTCRON_RUN_KEY"] == "reports.nightly@2026-03-01T06:15:00Z"
    assert lines["RAFTCRON_SCHEDULED_AT"] == "2026-03-01T06:15:00.000000Z"
    assert lines["RAFTCRON_FENCING_TOKEN"] == "42"
    assert lines["RAFTCRON_ATTEMPT"] == "2"
    assert lines["RAFTCRON_IDEMPOTENCY_KEY"] == ctx.idempotency_key
    assert datetime.fromisoformat(lines["RAFTCRON_DEADLINE"]) == ctx.deadline
    assert json.loads(lines["RAFTCRON_PAYLOAD"]) == {"report": "sales", "ü": 1}
    assert json.loads(lines["STDIN"]) == {"report": "sales", "ü": 1}


def test_non_zero_exit_is_a_failure_with_its_exit_code() -> None:
    outcome = run_handler(ShellCommand("echo oops >&2; exit 7"))
    assert outcome.kind == "FAILURE"
    assert outcome.exit_code == 7 and outcome.error == "exit code 7"
    assert outcome.output_tail == "oops\n"  # stderr is captured with stdout


def test_output_tail_keeps_the_last_4_kib() -> None:
    command = ShellCommand("head -c 100000 /dev/zero | tr '\\0' x; echo; printf 'é%.0s' $(seq 3000); echo END!")
    outcome = run_handler(command)
    assert outcome.kind == "SUCCESS"
    tail = outcome.output_tail
    assert len(tail.encode("utf-8")) <= 4096
    assert tail.endswith("éEND!\n")
    # 4 KiB minus "END!\n" is an odd number of bytes: the cut falls inside an "é", whose
    # stray second byte is dropped instead of becoming a replacement character.
    assert tail.startswith("é") and "\ufffd" not in tail


def cancel_once_spawned(ctx, pid_file: Path, reason: CancelReason) -> None:
    """Cancel `ctx` as soon as the command has written its pids (so the test never races it)."""

    def watch() -> None:
        if wait_until(lambda: len(pids_in(pid_file)) == 3):
            ctx.cancel(reason)

    threading.Thread(target=watch, daemon=True).start()


def test_cancelling_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    ctx = make_context()
    cancel_once_spawned(ctx, pid_file, CancelReason.FENCED)
    outcome = run_handler(ShellCommand(spawner(pid_file), grace_s=5.0), context=ctx)
    pids = pids_in(pid_file)
    assert len(pids) == 3
    assert not any(alive(pid) for pid in pids)
    assert outcome.cancel_reason == "fenced" and not outcome.reported
    assert outcome.exit_code == 128 + 15  # sh died of SIGTERM
    assert outcome.duration_s < 4.0  # SIGTERM was enough: no wait for the 5s grace


def test_processes_ignoring_sigterm_get_sigkill_after_the_grace(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    ctx = make_context()
    cancel_once_spawned(ctx, pid_file, CancelReason.RUN_CANCELLED)
    outcome = run_handler(ShellCommand(spawner(pid_file, ignore_term=True), grace_s=0.3), context=ctx)
    pids = pids_in(pid_file)
    assert len(pids) == 3 and not any(alive(pid) for pid in pids)
    assert outcome.exit_code == 128 + 9
    assert outcome.kind == "FAILURE" and outcome.error == "cancelled: run_cancelled"


def test_leftover_background_processes_are_stopped_when_the_command_exits(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    outcome = run_handler(ShellCommand(f"sleep 30 & echo $! > {pid_file}; echo done"))
    assert outcome.kind == "SUCCESS" and outcome.output_tail == "done\n"
    assert not alive(int(pid_file.read_text()))


def test_deadline_stops_a_shell_run_of_the_worker(tmp_path: Path) -> None:
    pid_file = tmp_path / "pids"
    with fake_cluster() as (service, address):
        service.add(make_grant("cleanup", 5, shell=spawner(pid_file), deadline_s=1.0, ttl_s=3.0))
        worker = Worker([address], shell=True, lease_wait_s=0.5, shell_grace_s=2.0, drain_timeout_s=1.0)
        worker.start()
        try:
            assert wait_until(lambda: len(pids_in(pid_file)) == 3)
            assert service.wait_for(lambda: service.completions)
        finally:
            worker.stop()
    pids = pids_in(pid_file)
    assert not any(alive(pid) for pid in pids)
    completion = service.completion(5)
    assert completion.kind == worker_pb2.FAILURE
    assert completion.error == "deadline exceeded"
    assert completion.exit_code == 128 + 15
    assert list(service.lease_requests[0].targets) == ["shell"]


def test_shell_runs_through_the_worker_report_exit_code_and_output() -> None:
    with fake_cluster() as (service, address):
        service.add(make_grant("ok", 1, shell="echo cleaning up"), make_grant("bad", 2, shell="echo no >&2; exit 3"))
        worker = Worker([address], shell=True, lease_wait_s=0.5, concurrency=2)
        worker.start()
        try:
            assert service.wait_for(lambda: len(service.completions) == 2)
        finally:
            worker.stop()
    ok, bad = service.completion(1), service.completion(2)
    assert ok.kind == worker_pb2.SUCCESS and ok.output_tail == "cleaning up\n"
    assert bad.kind == worker_pb2.FAILURE and bad.exit_code == 3 and bad.output_tail == "no\n"


def test_alive_helper_tells_running_from_gone() -> None:
    process = subprocess.Popen(["sleep", "30"])
    assert alive(process.pid) and alive(os.getpid())
    process.kill()
    process.wait()
    assert not alive(process.pid)
