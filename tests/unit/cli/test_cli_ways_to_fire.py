"""`raftcron next JOB` and `jobs` for jobs that fire other than by one plain schedule: the source
of each upcoming slot, and why a job owes nothing (manual-only, done, window, limit)."""

from __future__ import annotations

import json

from scheduler.cli.output import job_dict, run_dict
from scheduler.cli.runs import explain, next_of_job
from scheduler.core.model import ActiveWindow, Job, Run
from scheduler.planning import parse_iso_to_us
from scheduler.rpc.convert import job_to_pb, run_to_pb
from tests.fakes import spec

AFTER = "2026-03-02T00:00:00Z"
AFTER_US = parse_iso_to_us(AFTER)


def pb_job(job_spec, next_due_us: int = 0, counted_runs=None, last_us: int = 0, cursor_us: int = AFTER_US - 1):
    job = Job.of(job_spec, 1, "t", AFTER_US, cursor_us=cursor_us, next_due_us=next_due_us, last_scheduled_us=last_us)
    if counted_runs is not None:
        job.counted_runs = counted_runs
    return job_to_pb(job)


def test_next_names_the_schedule_of_each_slot() -> None:
    job = pb_job(spec("standup", "", schedules=("0 9 * * *", "0 9,17 * * *")), next_due_us=AFTER_US + 1)
    answer = json.loads(next_of_job(job, AFTER, 3, as_json=True))
    assert [(f["at_utc"], f["schedule"]) for f in answer["fires"]] == [
        ("2026-03-02T09:00:00Z", "schedules[0] (0 9 * * *)"),
        ("2026-03-02T17:00:00Z", "schedules[1] (0 9,17 * * *)"),
        ("2026-03-03T09:00:00Z", "schedules[0] (0 9 * * *)"),
    ]
    assert answer["fires_by"] == "0 9 * * * | 0 9,17 * * *" and answer["state"] == ""
    text = next_of_job(job, AFTER, 1, as_json=False)
    assert text == "2026-03-02T09:00:00+00:00  = 2026-03-02T09:00:00Z  (from schedules[0] (0 9 * * *))"


def test_next_of_a_manual_only_job_says_so_instead_of_failing() -> None:
    text = next_of_job(pb_job(spec("rebuild", "")), AFTER, 5, as_json=False)
    assert text == "rebuild: manual-only: it has no schedule and runs only when triggered"
    answer = json.loads(next_of_job(pb_job(spec("rebuild", "")), AFTER, 5, as_json=True))
    assert answer["fires"] == [] and answer["fires_by"] == "manual-only"


def test_next_shows_the_window_and_the_limit() -> None:
    window = ActiveWindow(parse_iso_to_us("2026-04-01T00:00:00Z"), parse_iso_to_us("2026-04-03T00:00:00Z"))
    before = pb_job(
        spec("campaign", "0 8 * * *", active=window, max_runs=5), next_due_us=window.from_us + 1, counted_runs=0
    )
    answer = json.loads(next_of_job(before, AFTER, 5, as_json=True))
    assert [f["at_utc"] for f in answer["fires"]] == ["2026-04-01T08:00:00Z", "2026-04-02T08:00:00Z"]
    assert answer["state"] == (
        "before its active window: slots are owed from 2026-04-01T00:00:00Z; 0 of max_runs 5 scheduled runs done"
    )
    assert answer["window"] == {"from": "2026-04-01T00:00:00Z", "until": "2026-04-03T00:00:00Z"}
    assert answer["max_runs"] == 5 and answer["counted_runs"] == 0
    reached = pb_job(spec("tick", "", every_us=60_000_000, max_runs=2), counted_runs=2)
    assert next_of_job(reached, AFTER, 5, as_json=False) == ("tick: limit reached: 2 of max_runs 2 scheduled runs done")
    assert job_dict(reached)["state"] == "limit reached: 2 of max_runs 2 scheduled runs done"


def test_a_one_shot_says_done_once_its_slot_is_claimed() -> None:
    at_us = parse_iso_to_us("2026-03-01T09:00:00Z")
    job = pb_job(spec("migrate", "", at_us=at_us), last_us=at_us, cursor_us=at_us)
    assert next_of_job(job, AFTER, 5, as_json=False) == "migrate: done: its one-shot slot has been claimed"


def test_a_run_shows_the_schedule_that_produced_it() -> None:
    run = Run(job_id="standup", scheduled_us=AFTER_US, status="queued")
    assert run_dict(run_to_pb(run))["schedule_index"] is None
    run.schedule_index = 1
    assert run_dict(run_to_pb(run))["schedule_index"] == 1


def test_explain_says_a_slot_past_the_limit_is_not_owed() -> None:
    class Client:
        def __init__(self, job) -> None:
            self.job = job

        def get_job(self, job_id):
            return type("R", (), {"job": self.job})()

        def list_runs(self, request):
            return type("R", (), {"runs": []})()

    job = pb_job(spec("tick", "", every_us=60_000_000, max_runs=1), counted_runs=1, cursor_us=AFTER_US)
    answer = json.loads(explain(Client(job), "tick", "2026-03-02T00:05:00Z", as_json=True))
    assert "is not owed" in answer["explanation"]
    assert answer["job_state"] == "limit reached: 1 of max_runs 1 scheduled runs done"
