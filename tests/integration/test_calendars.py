"""Calendars on a real cluster: a holiday calendar arrives as explicit dates in every replica, a
listed date's slots are recorded skipped with the calendar named, and a slot moved to an earlier
business day is claimed there, before its nominal instant, under its nominal run key.

Node processes run on the wall clock (the suite has no fake clock for them), so slots are chosen
a few seconds ahead of now and waited for with deadlines."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta

import grpc
import pytest

from scheduler.core.model import Calendar, CalendarRule, HolidaySource, JobSpec
from scheduler.local import wait_until
from scheduler.planning import format_us
from scheduler.rpc.convert import STATUS_FROM_PB, calendar_to_pb, spec_to_pb, timestamp_us
from tests.integration.conftest import assert_clean_logs
from worker.api.v1 import jobs_pb2, ops_pb2, runs_pb2

pytestmark = pytest.mark.integration


def apply(cluster, jobs: list[JobSpec], calendars: list[Calendar]):
    """Apply once the cluster runs log format 3 (raised by the leader within seconds of starting)."""
    request = jobs_pb2.ApplyJobsRequest(
        jobs=[spec_to_pb(j) for j in jobs], calendars=[calendar_to_pb(c) for c in calendars]
    )

    def attempt():
        with cluster.client() as client:
            try:
                return client.apply_jobs(request)
            except grpc.RpcError as error:
                if error.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.UNAVAILABLE):
                    return None  # the cluster version is not 3 yet, or no epoch yet
                raise

    return wait_until(attempt, 30, "an apply with calendars to be accepted")


def runs(cluster, job_id: str):
    with cluster.client() as client:
        request = runs_pb2.ListRunsRequest(job_id=job_id, page_size=1000, newest_first=False, linearizable=True)
        return list(client.list_runs(request).runs)


def test_holidays_are_replicated_as_dates_and_listed_dates_are_skipped(make_cluster):
    cluster = make_cluster()
    cluster.start()
    cluster.wait_for_leader()
    today = datetime.now(UTC).date()
    # Today and tomorrow, so a run near midnight still lands on a listed date.
    closures = Calendar("closures", (today.isoformat(), (today + timedelta(days=1)).isoformat()))
    holidays = Calendar("us", (), HolidaySource("US", "", years=2))
    job = JobSpec(
        id="ticker",
        schedule="* * * * * *",
        target_kind="handler",
        target="h",
        jitter="pinned",
        calendar=CalendarRule(skip=("closures", "us")),
    )
    apply(cluster, [job], [closures, holidays])
    with cluster.client() as client:
        listed = {c.name: c for c in client.list_calendars(jobs_pb2.ListCalendarsRequest(linearizable=True)).calendars}
    us = listed["us"]
    assert us.holidays.first_year == today.year and us.holidays.years == 2 and us.holidays.library_version
    assert f"{today.year}-12-25" in us.dates and f"{today.year + 1}-01-01" in us.dates
    if today.year <= 2027 < today.year + 2:
        assert "2027-07-05" in us.dates  # Independence Day observed: July 4 2027 is a Sunday

    skipped = wait_until(lambda: [r for r in runs(cluster, "ticker") if r.reason][:2], 20, "two recorded slots")
    for run in skipped:
        assert STATUS_FROM_PB[run.status] == "skipped"
        assert run.reason.startswith("calendar closures: ") and run.reason.endswith(" is listed")
    with cluster.client() as client:
        alerts = client.list_alerts(ops_pb2.ListAlertsRequest()).alerts
    assert not [a for a in alerts if a.job_id == "ticker"], "a calendar's skip raises no alert"
    cluster.wait_converged()
    assert_clean_logs(cluster)


def test_a_slot_moved_to_the_previous_business_day_runs_before_its_nominal_instant(make_cluster):
    now = datetime.now(UTC)
    today = now.date()
    if today.weekday() >= 5:
        pytest.skip("a move lands on a business day, and today (UTC) is a weekend")
    cluster = make_cluster()
    cluster.start()
    cluster.wait_for_leader()
    # The slot is a week from today at a wall time 20 s from now; every day in between is listed,
    # so its previous business day is today: it runs today, 20 s from now.
    wall = (now + timedelta(seconds=20)).replace(microsecond=0)
    nominal_day = wall.date() + timedelta(days=7)
    listed = tuple((wall.date() + timedelta(days=d)).isoformat() for d in range(1, 8))
    job = JobSpec(
        id="payroll",
        schedule=f"{wall.second} {wall.minute} {wall.hour} {nominal_day.day} {nominal_day.month} *",
        target_kind="handler",
        target="h",
        jitter="pinned",
        calendar=CalendarRule(skip=("week",), on_skip="previous_business_day"),
    )
    apply(cluster, [job], [Calendar("week", listed)])
    nominal_us = int(datetime.combine(nominal_day, wall.time(), UTC).timestamp()) * 1_000_000
    moved_us = int(wall.timestamp()) * 1_000_000
    with cluster.client() as client:
        # Linearizable: the apply committed, but the replica that answers may not have applied it yet.
        assert timestamp_us(client.get_job(job_id="payroll", linearizable=True).job.next_due) == nominal_us
    run = wait_until(lambda: next(iter(runs(cluster, "payroll")), None), 45, "the moved slot to be claimed")
    assert timestamp_us(run.scheduled_at) == nominal_us, "the run key keeps the nominal instant"
    assert timestamp_us(run.effective_at) == moved_us
    assert STATUS_FROM_PB[run.status] in ("queued", "leased")
    assert f"moved to {today.isoformat()} (previous_business_day)" in run.reason
    assert f"runs at {format_us(moved_us)}" in run.reason
    assert time.time() * 1_000_000 < nominal_us  # claimed days before its nominal instant
    with cluster.client() as client:
        job_pb = client.get_job(job_id="payroll", linearizable=True).job
    assert timestamp_us(job_pb.cursor) == nominal_us
    assert date.fromtimestamp(timestamp_us(job_pb.next_due) / 1e6) > nominal_day
    cluster.wait_converged()
    assert_clean_logs(cluster)
