"""Per-job series on /metrics: when each job last succeeded (and how long that took) and last
failed, for alerts such as "payroll has not succeeded for 26 hours".

Kept cheap at 100,000 jobs (docs/design/per-job-metrics.md):

- The apply listener records each job's last success and failure as their events are applied
  (O(1) per event, tick thread, state lock held). A job it has not seen end a run since this
  state was loaded (a node start from a snapshot, a restored snapshot) is looked up once, at a
  scrape, from its newest runs, within a budget of runs per scrape.
- Only `metrics_max_jobs` jobs get series: the first ones by job id. Which ones is recomputed
  only after jobs were added or removed, so a scrape costs O(metrics_max_jobs), not O(jobs).
  `raftcron_job_metrics_dropped_jobs` counts the jobs left out.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from scheduler.config import DEFAULT_METRICS_MAX_JOBS
from scheduler.core import results as ev
from scheduler.core.commands import ApplyJobs
from scheduler.core.model import FAILED, SECOND_US, SUCCEEDED, TIMED_OUT

# Runs looked at per scrape to find the last success and failure of jobs not seen yet.
LOOKUP_BUDGET_RUNS = 50_000
_FAILURES = frozenset({FAILED, TIMED_OUT})


class JobOutcomes:
    """Each job's last success (finished, duration of its last attempt) and last failure, in
    replicated time. Every method runs with the state lock held."""

    def __init__(self, max_jobs: int = DEFAULT_METRICS_MAX_JOBS) -> None:
        self.max_jobs = max_jobs
        self._state: object | None = None
        self.last_success: dict[str, tuple[int, int]] = {}
        self.last_failure: dict[str, int] = {}
        self._looked_up: set[str] = set()
        self._selected: list[str] | None = None
        self.looked_up_runs = 0  # work done by lookups, for tests

    def _reset(self, state) -> None:
        self._state = state
        self.last_success.clear()
        self.last_failure.clear()
        self._looked_up.clear()
        self._selected = None

    # -- the apply listener's part -------------------------------------------------------------
    def on_apply(self, state, command, result) -> None:
        if state is not self._state:
            self._reset(state)
        if result.rejection is not None:
            return
        if isinstance(command, ApplyJobs):
            self._selected = None
        for event in result.events:
            kind = type(event)
            if kind is ev.RunSucceeded or (kind is ev.RunEnded and event.status in _FAILURES):
                run = state.get_run(event.job_id, event.scheduled_us)
                if run is not None:
                    self._note(run)

    def _note(self, run) -> None:
        if run.status == SUCCEEDED:
            last = self.last_success.get(run.job_id)
            if last is None or run.finished_us >= last[0]:
                attempt = run.attempts[-1] if run.attempts else None
                took_us = run.finished_us - attempt.started_us if attempt and attempt.started_us else 0
                self.last_success[run.job_id] = (run.finished_us, max(0, took_us))
        elif run.status in _FAILURES and run.finished_us >= self.last_failure.get(run.job_id, 0):
            self.last_failure[run.job_id] = run.finished_us

    # -- the scrape's part -----------------------------------------------------------------------
    def selected(self, state) -> list[str]:
        """The jobs with series: the first `max_jobs` by id."""
        if state is not self._state:
            self._reset(state)
        if self._selected is None:
            jobs = state.jobs
            self._selected = sorted(jobs) if len(jobs) <= self.max_jobs else heapq.nsmallest(self.max_jobs, jobs)
        return self._selected

    def gather(self, state) -> dict:
        """What the families need, read inside one hold of the state lock."""
        selected = self.selected(state)
        budget = LOOKUP_BUDGET_RUNS
        rows = []
        for job_id in selected:
            job = state.jobs.get(job_id)
            if job is None:
                continue
            if job_id not in self._looked_up and budget > 0:
                budget -= self._look_up(state, job_id)
            rows.append((job_id, job.body.owner, self.last_success.get(job_id), self.last_failure.get(job_id)))
        return {"rows": rows, "dropped": max(0, len(state.jobs) - self.max_jobs), "max_jobs": self.max_jobs}

    def _look_up(self, state, job_id: str) -> int:
        """The newest retained success and failure of a job not seen since the state was loaded."""
        self._looked_up.add(job_id)
        looked = 0
        for run in reversed(state.runs.get(job_id, ())):
            looked += 1
            if run.status == SUCCEEDED and job_id not in self.last_success:
                self._note(run)
            elif run.status in _FAILURES and job_id not in self.last_failure:
                self._note(run)
            if job_id in self.last_success and job_id in self.last_failure:
                break
        self.looked_up_runs += looked
        return looked + 1


def job_families(gathered: dict) -> Iterator[GaugeMetricFamily]:
    cap = gathered["max_jobs"]
    rule = f"Only the first {cap} jobs by id have series (node config metrics_max_jobs)."
    success = GaugeMetricFamily(
        "raftcron_job_last_success_timestamp_seconds",
        f"When the job's newest success finished (replicated time), Unix seconds. {rule}",
        labels=["job", "owner"],
    )
    took = GaugeMetricFamily(
        "raftcron_job_last_success_duration_seconds",
        f"How long the attempt of the job's newest success took, seconds. {rule}",
        labels=["job", "owner"],
    )
    failure = GaugeMetricFamily(
        "raftcron_job_last_failure_timestamp_seconds",
        f"When the job's newest failed or timed-out run ended (replicated time), Unix seconds. {rule}",
        labels=["job", "owner"],
    )
    for job_id, owner, last_success, last_failure in gathered["rows"]:
        if last_success is not None:
            success.add_metric([job_id, owner], last_success[0] / SECOND_US)
            took.add_metric([job_id, owner], last_success[1] / SECOND_US)
        if last_failure is not None:
            failure.add_metric([job_id, owner], last_failure / SECOND_US)
    yield success
    yield took
    yield failure
    yield GaugeMetricFamily(
        "raftcron_job_metrics_dropped_jobs",
        f"Jobs without per-job series: those past the first {cap} by id (node config metrics_max_jobs).",
        value=gathered["dropped"],
    )
