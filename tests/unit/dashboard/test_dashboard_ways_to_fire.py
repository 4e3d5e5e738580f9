"""The dashboard's job and run pages for jobs that fire other than by one plain schedule: how the
job fires, what it owes, the schedule of each next fire and of each run."""

from __future__ import annotations

from scheduler.core.commands import ClaimRuns
from scheduler.core.model import ActiveWindow
from scheduler.dashboard import data, fates, views
from scheduler.leader.planner import plan_job_slots
from scheduler.planning.jobs import first_due_after
from tests.fakes import T0_US, Core, spec, upsert

DAY_US = 86_400_000_000


def _core(*specs) -> Core:
    core = Core()
    core.lead()
    core.advance(T0_US)
    assert core.apply_jobs(tuple(upsert(s, next_due_us=first_due_after(s, T0_US)) for s in specs)).accepted
    return core


def _job_page(core: Core, job_id: str) -> str:
    from_us, to_us = T0_US - DAY_US, T0_US + DAY_US
    detail = data.job_detail(core.state, job_id, from_us, to_us, 0)
    slots, cut = fates.timeline(detail, from_us, to_us)
    after_us = max(detail.cursor_us, core.state.now_us - 1)
    fires = data.next_fires(detail.row.spec, after_us, detail.spread_us, counted_runs=detail.counted_runs)
    return views.job_page(detail, slots, cut, fires, from_us, to_us)


def test_a_multi_schedule_job_shows_each_fires_schedule_and_each_runs() -> None:
    core = _core(spec("multi", "", schedules=("0 * * * *", "30 * * * *")))
    job = core.state.jobs["multi"]
    core.advance(job.next_due_us + 1)
    claims, sources = plan_job_slots(job, core.state.now_us, 10)
    assert core.apply(ClaimRuns(core.state.now_us, core.state.epoch, tuple(claims), schedule_indexes=tuple(sources)))
    page = _job_page(core, "multi")
    assert (
        "0 * * * * | 30 * * * *" in page and "schedules[0] (0 * * * *)" in page and "schedules[1] (30 * * * *)" in page
    )
    run = core.state.runs["multi"][0]
    run_page = views.run_page(data.run_detail(core.state, "multi", run.scheduled_us))
    assert f"schedules[{run.schedule_index}]" in run_page


def test_the_job_page_says_why_nothing_or_not_yet_anything_is_owed() -> None:
    window = ActiveWindow(T0_US + 10 * DAY_US, 0)
    core = _core(spec("rebuild", ""), spec("later", "0 * * * *", active=window), spec("poll", "", every_us=60_000_000))
    assert "manual-only: runs only when triggered" in _job_page(core, "rebuild")
    assert "before its active window: slots are owed from" in _job_page(core, "later")
    assert "every 1m from 1970-01-01T00:00:00Z" in _job_page(core, "poll")
