"""`raftcron calendars` and what `next JOB` and `explain` say about a job's calendar, against a
fake cluster client (the answers a node would give)."""

from __future__ import annotations

import contextlib
import json

import pytest

from scheduler import cli
from scheduler.cli import connection
from scheduler.core.model import Calendar, CalendarRule, HolidaySource, Job, JobSpec
from scheduler.planning import parse_iso_to_us
from scheduler.rpc.convert import calendar_to_pb, job_to_pb
from worker.api.v1 import common_pb2, jobs_pb2, runs_pb2

WEEK = Calendar("week", tuple(f"2027-07-{day:02d}" for day in range(1, 8)))
US = Calendar("us", ("2027-07-05", "2027-09-06"), HolidaySource("US", "NY", 2027, 1, "0.109"))
# Mondays at 09:00 in New York; July 5 2027 is a listed Monday.
SPEC = JobSpec(
    id="payroll",
    schedule="0 9 * * 1",
    target_kind="handler",
    target="payroll.run",
    timezone="America/New_York",
    calendar=CalendarRule(skip=("us",), on_skip="previous_business_day"),
)
CURSOR_US = parse_iso_to_us("2027-06-28T13:00:00Z")


class FakeClient:
    def __init__(self, calendars=(WEEK, US)) -> None:
        self.calendars = [calendar_to_pb(c) for c in calendars]

    def list_calendars(self, **fields):
        return jobs_pb2.ListCalendarsResponse(calendars=self.calendars, read=common_pb2.ReadInfo(node_id="n1"))

    def get_job(self, **fields):
        job = Job.of(SPEC, 1, "alice", CURSOR_US, CURSOR_US, parse_iso_to_us("2027-07-05T13:00:00Z"))
        return jobs_pb2.GetJobResponse(job=job_to_pb(job))

    def list_runs(self, request):
        return runs_pb2.ListRunsResponse()


@pytest.fixture
def client(monkeypatch) -> FakeClient:
    fake = FakeClient()
    monkeypatch.setattr(connection, "cluster_client", lambda args: contextlib.nullcontext(fake))
    return fake


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["--cluster", "127.0.0.1:7100", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_calendars_lists_counts_ranges_and_sources(client, capsys) -> None:
    code, out, _ = run(capsys, "calendars")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "DATES", "FIRST", "LAST", "SOURCE"]
    assert lines[1].split()[:4] == ["week", "7", "2027-07-01", "2027-07-07"]
    assert "holidays US-NY 2027-2027 (holidays 0.109)" in lines[2]


def test_calendars_json_and_one_calendar_with_its_dates(client, capsys) -> None:
    code, out, _ = run(capsys, "calendars", "us", "--json")
    assert code == 0
    (entry,) = json.loads(out)
    assert entry["date_list"] == ["2027-07-05", "2027-09-06"]
    assert entry["holidays"]["library_version"] == "0.109" and entry["dates"] == 2


def test_an_unknown_calendar_is_a_one_line_error(client, capsys) -> None:
    code, out, err = run(capsys, "calendars", "nope")
    assert (code, out) == (2, "") and err.strip() == "raftcron calendars: no calendar 'nope'"


def test_next_json_shows_where_the_calendar_moves_a_slot(client, capsys) -> None:
    code, out, _ = run(capsys, "next", "payroll", "-n", "3", "--after", "2027-06-28T14:00:00Z", "--json")
    assert code == 0
    fires = json.loads(out)
    assert [f["at_utc"] for f in fires] == ["2027-07-05T13:00:00Z", "2027-07-12T13:00:00Z", "2027-07-19T13:00:00Z"]
    moved = fires[0]["calendar"]
    assert moved["status"] == "moved" and moved["runs_at"] == "2027-07-02T09:00:00-04:00"
    assert moved["reason"].startswith("calendar us: 2027-07-05 is listed; moved to 2027-07-02")
    assert "calendar" not in fires[1]


def test_next_text_marks_the_moved_slot(client, capsys) -> None:
    _, out, _ = run(capsys, "next", "payroll", "-n", "1", "--after", "2027-06-28T14:00:00Z")
    assert "[moved: runs at 2027-07-02T09:00:00-04:00; calendar us: 2027-07-05 is listed" in out


def test_explain_of_a_future_slot_says_what_its_calendar_will_do(client, capsys) -> None:
    code, out, _ = run(capsys, "explain", "payroll", "--at", "2027-07-05T13:00:00Z", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["calendar"]["status"] == "moved"
    assert "its calendar moves it to 2027-07-02T09:00:00-04:00" in answer["explanation"]
