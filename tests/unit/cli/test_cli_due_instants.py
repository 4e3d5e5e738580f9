"""`raftcron jobs`, `next JOB` and `explain` show when a slot runs (its herd spread) beside the slot."""

from __future__ import annotations

import contextlib
import json

import pytest

from scheduler import cli
from scheduler.cli import connection, runs
from scheduler.cli import output as out
from scheduler.core.model import SECOND_US, Job, JobSpec
from scheduler.planning import format_us, parse_iso_to_us
from scheduler.planning.jobs import schedule_for, spread_offset_us
from scheduler.rpc.reads import scoped_job_pb
from worker.api.v1 import common_pb2, jobs_pb2, runs_pb2

MIDNIGHT_US = parse_iso_to_us("2026-12-03T00:00:00Z")
HOUR_US = 3600 * SECOND_US


def daily(job_id: str, **fields) -> JobSpec:
    return JobSpec(id=job_id, schedule="0 0 * * *", target_kind="handler", target="reports.build", **fields)


def job_pb(spec: JobSpec, herd_window_us: int = HOUR_US) -> common_pb2.Job:
    job = Job.of(spec, 1, "alice", MIDNIGHT_US - HOUR_US, MIDNIGHT_US - HOUR_US, MIDNIGHT_US)
    return scoped_job_pb(job, herd_window_us)


class FakeClient:
    def __init__(self, jobs: list[common_pb2.Job], runs_found: list[common_pb2.Run] = ()) -> None:
        self.jobs = {job.spec.id: job for job in jobs}
        self.runs_found = list(runs_found)

    def list_jobs(self, **fields):
        read = common_pb2.ReadInfo(node_id="n1", applied_index=9)
        return jobs_pb2.ListJobsResponse(jobs=list(self.jobs.values()), read=read)

    def get_job(self, job_id: str):
        return jobs_pb2.GetJobResponse(job=self.jobs[job_id])

    def list_runs(self, request):
        return runs_pb2.ListRunsResponse(runs=self.runs_found)


@pytest.fixture
def use_client(monkeypatch):
    def install(client: FakeClient) -> None:
        monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(client))

    return install


def test_sixty_midnight_jobs_show_sixty_due_instants_the_leader_computes(use_client, capsys):
    specs = [daily(f"report.{n:02d}") for n in range(60)]
    use_client(FakeClient([job_pb(spec) for spec in specs]))
    assert cli.main(["--cluster", "127.0.0.1:7100", "jobs", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {job["next_due"] for job in listed} == {"2026-12-03T00:00:00Z"}
    expected = {spec.id: format_us(MIDNIGHT_US + spread_offset_us(spec, schedule_for(spec), HOUR_US)) for spec in specs}
    assert {job["id"]: job["next_due_at"] for job in listed} == expected
    assert len(set(expected.values())) == 60
    assert all(MIDNIGHT_US <= parse_iso_to_us(due) < MIDNIGHT_US + HOUR_US for due in expected.values())


def test_jobs_table_has_the_slot_and_the_instant_it_runs(use_client, capsys):
    use_client(FakeClient([job_pb(daily("report.a")), job_pb(daily("report.pinned", jitter="pinned"))]))
    assert cli.main(["--cluster", "127.0.0.1:7100", "jobs"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "NEXT SLOT (UTC)" in lines[0] and "RUNS AT (UTC, spread)" in lines[0]
    spread = job_pb(daily("report.a")).spread
    due = format_us(MIDNIGHT_US + spread.seconds * SECOND_US + spread.nanos // 1000)
    row = next(line for line in lines if line.startswith("report.a "))
    assert "2026-12-03T00:00:00Z" in row and due in row and "(+" in row
    pinned = next(line for line in lines if line.startswith("report.pinned"))
    assert "2026-12-03T00:00:00Z (no spread)" in pinned


def test_a_node_without_a_herd_window_reports_no_spread():
    assert not job_pb(daily("report.a"), herd_window_us=0).HasField("spread")


def test_next_job_prints_each_fire_with_its_due_instant(use_client, capsys):
    spec = daily("report.a")
    use_client(FakeClient([job_pb(spec)]))
    argv = ["--cluster", "127.0.0.1:7100", "next", "report.a", "--after", "2026-12-02T12:00:00Z", "-n", "2", "--json"]
    assert cli.main(argv) == 0
    fires = json.loads(capsys.readouterr().out)["fires"]  # next JOB --json: an object
    offset_us = spread_offset_us(spec, schedule_for(spec), HOUR_US)
    assert [f["at_utc"] for f in fires] == ["2026-12-03T00:00:00Z", "2026-12-04T00:00:00Z"]
    assert [f["due_at"] for f in fires] == [
        format_us(MIDNIGHT_US + offset_us),
        format_us(MIDNIGHT_US + 24 * HOUR_US + offset_us),
    ]
    argv.remove("--json")
    assert cli.main(argv) == 0
    text = capsys.readouterr().out
    assert f"runs at {format_us(MIDNIGHT_US + offset_us)} (+" in text


def test_explain_names_the_due_instant_of_a_slot_not_yet_due(use_client, capsys):
    spec = daily("report.a")
    use_client(FakeClient([job_pb(spec)]))
    assert cli.main(["--cluster", "127.0.0.1:7100", "explain", "report.a", "--at", "2026-12-03T00:00:00Z"]) == 0
    text = capsys.readouterr().out
    due = format_us(MIDNIGHT_US + spread_offset_us(spec, schedule_for(spec), HOUR_US))
    assert f"slot 2026-12-03T00:00:00Z of report.a is not due yet, due at {due}" in text


def test_explain_of_a_run_says_when_it_was_due_and_started():
    spec = daily("report.a")
    due_us = MIDNIGHT_US + 754 * SECOND_US
    from scheduler.rpc.convert import timestamp

    run = common_pb2.Run(
        job_id="report.a",
        scheduled_at=timestamp(MIDNIGHT_US),
        effective_at=timestamp(due_us),
        claimed_at=timestamp(MIDNIGHT_US + 20_000),
        started_at=timestamp(due_us + 300_000),
        finished_at=timestamp(due_us + 2 * SECOND_US),
        status=common_pb2.SUCCEEDED,
        attempt=1,
        worker_id="ops/w1",
    )
    text = runs.explain(FakeClient([job_pb(spec)], [run]), "report.a", "2026-12-03T00:00:00Z", as_json=False)
    assert f"due at {format_us(due_us)} (+12m34s herd spread)" in text
    assert "started 0.300s after it was due" in text


def test_spread_text_reads_like_a_duration():
    assert out.spread_text(0.5) == "+0.5s"
    assert out.spread_text(754.0) == "+12m34s"
    assert out.spread_text(3723.25) == "+1h02m03.2s"
    assert out.spread_text(2706.3) == "+45m06.3s"


@pytest.mark.parametrize(
    "ways",
    [
        {"schedule": ""},  # manual-only
        {"schedule": "", "every_us": 90 * SECOND_US},
        {"schedule": "", "schedules": ("0 9 * * 1-5", "0 11 * * 6")},
        {"schedule": "", "at_us": MIDNIGHT_US},
    ],
)
def test_a_job_read_carries_its_spread_whatever_way_it_fires(ways) -> None:
    """A job read (ListJobs, GetJob) once computed the spread from `schedule:` alone, and
    failed for every job without one: `raftcron jobs` answered UNKNOWN for the whole list."""
    spec = JobSpec(id="x", target_kind="handler", target="t", **ways)
    found = scoped_job_pb(Job.of(spec, 1, "alice", MIDNIGHT_US, MIDNIGHT_US, 0), HOUR_US)
    assert found.spec.id == "x"
    assert found.spread.ToMicroseconds() == spread_offset_us(spec, None, HOUR_US)
