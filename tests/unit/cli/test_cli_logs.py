"""`raftcron logs`: which run it shows, each attempt with its streams, and one-line refusals."""

from __future__ import annotations

import contextlib
import json

import grpc

from scheduler import cli
from scheduler.cli import connection
from scheduler.planning import format_us, parse_iso_to_us
from scheduler.rpc.convert import timestamp, timestamp_us
from worker.api.v1 import common_pb2 as pb
from worker.api.v1 import jobs_pb2, runs_pb2

SLOT = "2026-03-01T06:00:00Z"


def _attempt(number: int, start_s: int, took_s: float, outcome: str, **fields) -> pb.Attempt:
    start_us = parse_iso_to_us(SLOT) + start_s * 1_000_000
    return pb.Attempt(
        number=number,
        worker_id="w1",
        started_at=timestamp(start_us),
        finished_at=timestamp(start_us + int(took_s * 1e6)),
        outcome=outcome,
        **fields,
    )


def _run(slot: str = SLOT, attempts=(), status=pb.SUCCEEDED) -> pb.Run:
    return pb.Run(
        job_id="backup",
        scheduled_at=timestamp(parse_iso_to_us(slot)),
        run_key=f"backup@{slot}",
        status=status,
        attempt=len(attempts),
        attempts=list(attempts),
    )


TWO_ATTEMPTS = _run(
    attempts=(
        _attempt(
            1, 1, 1.5, "failure", exit_code=3, error="exit code 3", stdout_tail="copying\n", stderr_tail="disk full\n"
        ),
        _attempt(2, 10, 2.0, "success", stdout_tail="copying\ndone\n"),
    )
)


class FakeRuns:
    def __init__(self, runs, job=True, target="shell") -> None:
        self.runs, self.job, self.target, self.requests = list(runs), job, target, []

    def list_runs(self, request):
        self.requests.append(request)
        until = timestamp_us(request.until) if request.HasField("until") else 2**62
        found = sorted(
            (r for r in self.runs if timestamp_us(r.scheduled_at) < until),
            key=lambda r: -timestamp_us(r.scheduled_at),
        )
        return runs_pb2.ListRunsResponse(runs=found[: request.page_size])

    def get_run(self, job_id, scheduled_at, linearizable=False):
        for run in self.runs:
            if run.job_id == job_id and timestamp_us(run.scheduled_at) == timestamp_us(scheduled_at):
                return runs_pb2.GetRunResponse(run=run)
        raise _NotFound()

    def get_job(self, job_id):
        if not self.job:
            raise _NotFound()
        spec = pb.JobSpec(id=job_id)
        setattr(spec.target, self.target, "x")
        return jobs_pb2.GetJobResponse(job=pb.Job(spec=spec))


class _NotFound(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.NOT_FOUND

    def details(self):
        return "not found"


def logs(monkeypatch, capsys, client, *args) -> tuple[int, str, str]:
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(client))
    status = cli.main(["--cluster", "127.0.0.1:7100", "logs", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_every_attempt_is_shown_with_its_streams_labelled(monkeypatch, capsys) -> None:
    status, out, _ = logs(monkeypatch, capsys, FakeRuns([TWO_ATTEMPTS]), "backup")
    assert status == 0
    assert f"run backup@{SLOT}: succeeded, 2 attempt(s)" in out
    first, second = out.split("\nattempt ")[1:]
    assert first.startswith("1: failure, exit code 3 (worker w1, started 2026-03-01T06:00:01Z")
    assert "took 1.5s" in first and "error: exit code 3" in first
    assert "took 2.0s" in second
    assert "--- stdout ---\n  copying\n" in first and "--- stderr ---\n  disk full" in first
    assert second.startswith("2: success, exit code 0") and "  done" in second and "stderr" not in second


def test_one_attempt_and_a_missing_one(monkeypatch, capsys) -> None:
    status, out, _ = logs(monkeypatch, capsys, FakeRuns([TWO_ATTEMPTS]), "backup", "--attempt", "2")
    assert status == 0 and "attempt 2:" in out and "attempt 1:" not in out
    status, out, err = logs(monkeypatch, capsys, FakeRuns([TWO_ATTEMPTS]), "backup", "--attempt", "3")
    assert status == 2 and out == ""
    assert err.strip() == f"raftcron logs: run backup@{SLOT} has attempts 1-2; there is no attempt 3"


def test_a_python_failure_shows_its_exception_not_exit_code_0(monkeypatch, capsys) -> None:
    run = _run(attempts=(_attempt(1, 1, 0.2, "failure", exception_type="KeyError", error="KeyError: 'x'"),))
    _, out, _ = logs(monkeypatch, capsys, FakeRuns([run], target="handler"), "backup")
    assert "attempt 1: failure, exception KeyError" in out and "exit code" not in out
    assert "(no output recorded)" in out


def test_at_picks_the_run_at_that_slot_or_the_newest_before_it(monkeypatch, capsys) -> None:
    later = _run("2026-03-01T07:00:00Z", attempts=(_attempt(1, 3601, 1, "success", stdout_tail="later\n"),))
    client = FakeRuns([TWO_ATTEMPTS, later])
    _, out, _ = logs(monkeypatch, capsys, client, "backup")
    assert "later" in out  # the newest run by default
    _, out, _ = logs(monkeypatch, capsys, client, "backup", "--at", SLOT)
    assert f"run backup@{SLOT}" in out
    _, out, _ = logs(monkeypatch, capsys, client, "backup", "--at", "2026-03-01T06:59:59Z")
    assert f"run backup@{SLOT}" in out
    status, _, err = logs(monkeypatch, capsys, client, "backup", "--at", "2026-03-01T05:00:00Z")
    assert status == 2 and "no retained run of backup scheduled at or before 2026-03-01T05:00:00Z" in err


def test_the_default_skips_a_run_that_has_not_started(monkeypatch, capsys) -> None:
    queued = _run("2026-03-01T07:00:00Z", status=pb.QUEUED)
    _, out, _ = logs(monkeypatch, capsys, FakeRuns([TWO_ATTEMPTS, queued]), "backup")
    assert f"run backup@{SLOT}" in out
    _, out, _ = logs(monkeypatch, capsys, FakeRuns([queued]), "backup")
    assert "0 attempt(s)" in out and "no attempt started" in out


def test_a_run_key_an_unknown_job_and_bad_arguments_are_one_line_and_exit_2(monkeypatch, capsys) -> None:
    status, out, _ = logs(monkeypatch, capsys, FakeRuns([TWO_ATTEMPTS]), f"backup@{SLOT}")
    assert status == 0 and "attempt 2:" in out
    cases = [
        ((FakeRuns([]), "backup@2026-01-01T00:00:00Z"), "no retained run backup@2026-01-01T00:00:00Z"),
        ((FakeRuns([], job=False), "nosuch"), "no retained run of nosuch: there is no job nosuch"),
        ((FakeRuns([]), "backup"), "no retained run of backup (it has not run yet, or retention pruned it)"),
        ((FakeRuns([TWO_ATTEMPTS]), "backup", "--attempt", "0"), "--attempt must be 1 or more, got 0"),
        ((FakeRuns([TWO_ATTEMPTS]), "backup", "--at", "someday"), "'someday' is not a time"),
        ((FakeRuns([TWO_ATTEMPTS]), f"backup@{SLOT}", "--at", "now"), "give a run key or --at, not both"),
    ]
    for (client, *args), message in cases:
        status, out, err = logs(monkeypatch, capsys, client, *args)
        assert (status, out) == (2, ""), args
        assert err.startswith("raftcron logs: ") and message in err and len(err.strip().splitlines()) == 1, err


def test_json_has_every_attempt_field(monkeypatch, capsys) -> None:
    status, out, _ = logs(monkeypatch, capsys, FakeRuns([TWO_ATTEMPTS]), "backup", "--json")
    answer = json.loads(out)
    assert status == 0 and answer["run"]["run_key"] == f"backup@{SLOT}"
    first = answer["attempts"][0]
    assert (first["stdout_tail"], first["stderr_tail"], first["exit_code"]) == ("copying\n", "disk full\n", 3)
    assert first["duration_s"] == 1.5 and first["started_at"] == format_us(parse_iso_to_us(SLOT) + 1_000_000)


def test_control_characters_in_output_cannot_drive_the_terminal(monkeypatch, capsys) -> None:
    run = _run(attempts=(_attempt(1, 1, 1, "success", stdout_tail="ok \x1b[2J\x07 gone\n"),))
    _, out, _ = logs(monkeypatch, capsys, FakeRuns([run]), "backup")
    assert "\x1b" not in out and "\x07" not in out and "ok " in out


def test_an_attempt_shorter_than_the_clock_tick_reads_as_under_a_second(monkeypatch, capsys) -> None:
    run = _run(attempts=(_attempt(1, 1, 0, "success", stdout_tail="quick\n"),))
    _, out, _ = logs(monkeypatch, capsys, FakeRuns([run]), "backup")
    assert "took <1s)" in out and "0ms" not in out
    status, _, err = logs(monkeypatch, capsys, FakeRuns([run]), "backup", "--attempt", "2")
    assert status == 2 and f"run backup@{SLOT} has 1 attempt; there is no attempt 2" in err
