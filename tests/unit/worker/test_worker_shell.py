"""The shell executor: environment, stdin, output tail, exit codes, and process-group cleanup."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.unit.worker.test_worker_fakes import fake_cluster, make_grant, wait_until
from worker import CancelReason, ShellCommand, Worker
from worker._shell import shell_user
from worker.api.v1 import worker_pb2
from worker.testing import make_context, run_handler


def alive(pid: int) -> bool:
    """True while `pid` runs; a zombie (dead, waiting to be reaped) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between open and read
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
        command,
        payload={"report": "sales", "ü": 1},
        job_id="reports.nightly",
        scheduled_at=scheduled,
        attempt=2,
        fencing_token=42,
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


# -- a command is the submitter's: no worker credentials, its own directory, its own user ----------

WORKER_SECRETS = {
    "RAFTCRON_TOKEN": "worker-token-value",
    "RAFTCRON_TOKEN_FILE": "/secret/worker.token",
    "RAFTCRON_CA": "/secret/ca.pem",
    "RAFTCRON_CLIENT_CERT": "/secret/client.pem",
    "RAFTCRON_CLIENT_KEY": "/secret/client.key",
    "AWS_SECRET_ACCESS_KEY": "aws-secret-value",
}


def env_of(outcome) -> dict[str, str]:
    return dict(line.split("=", 1) for line in outcome.output_tail.splitlines() if "=" in line)


def test_a_command_gets_an_allow_listed_environment_without_the_workers_credentials(monkeypatch) -> None:
    for name, value in {**WORKER_SECRETS, "LC_ALL": "C.UTF-8", "TZ": "Europe/Paris", "PGHOST": "db"}.items():
        monkeypatch.setenv(name, value)
    outcome = run_handler(ShellCommand("env"), job_id="cleanup", payload={"a": 1})
    env = env_of(outcome)
    run_names = {
        "RAFTCRON_JOB_ID",
        "RAFTCRON_RUN_KEY",
        "RAFTCRON_SCHEDULED_AT",
        "RAFTCRON_FENCING_TOKEN",
        "RAFTCRON_ATTEMPT",
        "RAFTCRON_DEADLINE",
        "RAFTCRON_IDEMPOTENCY_KEY",
        "RAFTCRON_PAYLOAD",
    }
    assert set(env) - {"PWD", "SHLVL", "_", "OLDPWD"} <= {"PATH", "HOME", "LANG", "TZ", "LC_ALL"} | run_names
    assert env["TZ"] == "Europe/Paris" and env["LC_ALL"] == "C.UTF-8" and env["RAFTCRON_JOB_ID"] == "cleanup"
    for value in WORKER_SECRETS.values():
        assert value not in outcome.output_tail
    # An operator passes a name on; never one of the worker's own.
    assert env_of(run_handler(ShellCommand("env", env_names=["PGHOST"])))["PGHOST"] == "db"
    with pytest.raises(ValueError, match="RAFTCRON_"):
        ShellCommand("env", env_names=["RAFTCRON_TOKEN"])


def test_a_command_runs_in_a_fresh_directory_removed_after(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the worker's directory (where `raftcron dev` keeps credentials)
    (tmp_path / "admin.token").write_text("admin-token-value")
    outcome = run_handler(ShellCommand("pwd; cat admin.token; touch left-behind"))
    workdir = outcome.output_tail.splitlines()[0]
    assert workdir != str(tmp_path) and "admin-token-value" not in outcome.output_tail
    assert not Path(workdir).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_a_command_runs_as_the_shell_user_without_supplementary_groups(tmp_path: Path) -> None:
    secret = tmp_path / "root-only"
    secret.write_text("root-secret-value")
    secret.chmod(0o600)
    user = shell_user("nobody")
    outcome = run_handler(ShellCommand(f"id -u; id -g; id -G; echo HOME=$HOME; cat {secret}", user=user))
    lines = outcome.output_tail.splitlines()
    assert lines[:3] == [str(user.uid), str(user.gid), str(user.gid)]
    assert f"HOME={user.home}" in lines and "root-secret-value" not in outcome.output_tail


def test_another_shell_user_needs_root() -> None:
    with pytest.raises(ValueError, match="must run as root"):
        shell_user("nobody", euid=12345)
    with pytest.raises(ValueError, match="no such user"):
        shell_user("no-such-user-here")


def test_a_worker_restricted_to_owners_leases_only_their_shell_targets() -> None:
    assert Worker(["127.0.0.1:1"], shell=True, shell_owners=["ops", "ops", "finance"]).targets == [
        "shell:ops",
        "shell:finance",
    ]
    assert Worker(["127.0.0.1:1"], shell=True).targets == ["shell"]
    with pytest.raises(ValueError, match="at least one owner"):
        Worker(["127.0.0.1:1"], shell=True, shell_owners=[])
    with pytest.raises(ValueError, match="need shell=True"):
        Worker(["127.0.0.1:1"], handlers={"h": lambda ctx: None}, shell_owners=["ops"])
