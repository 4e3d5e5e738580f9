"""What is wrong right now, for the front page: the queries (pure, over a State).

    scan = ProblemScan(state.now_us)
    for chunk in chunks(sorted(state.live_runs)):   # the caller holds the state lock per chunk
        scan.add_queued(state, chunk)
    problems = scan.finish(state, serving)          # serving(target) -> workers polling it, or None

Failing jobs, late slots and missed slots are read from the replicated alerts, which apply
raises for every run that ends failed or timed out, every slot claimed more than a minute late
(core.alerts.LATE_ALERT_US) and every missed slot (consecutive ones are one alert with their
count, a streak, from log format 3 on): counted over the last PROBLEM_WINDOW_US of
replicated time, they cost a walk of the retained alerts (at most core.alerts.ALERTS_RETAINED),
never of the run history. Only the jobs shown get their ended runs counted. Targets whose due
runs no worker takes come from the queued runs (the oldest few of each job), undelivered
alerts and active kill switches as they are now.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.core import model
from scheduler.core.alerts import alert_count, last_slot_us
from scheduler.core.model import SECOND_US
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind
from scheduler.leader.dispatch import target_key
from scheduler.planning import format_us

PROBLEM_WINDOW_US = 24 * 3600 * SECOND_US
RUNS_LOOKED_AT_PER_JOB = 500
# Queued runs of a job looked at for due runs nobody takes: the oldest ones, the most overdue.
LIVE_RUNS_LOOKED_AT_PER_JOB = 50
# A due run normally leaves the queue within a lease poll; one waiting longer is worth showing.
WAITING_AFTER_US = 30 * SECOND_US
ROWS_SHOWN = 20
_FAILURE_ALERTS = (AlertKind.FAILED, AlertKind.TIMED_OUT)
_ENDED = (model.SUCCEEDED, model.FAILED, model.TIMED_OUT, model.CANCELLED)


@dataclass(frozen=True)
class FailingJob:
    job_id: str
    failures: int  # runs that ended failed or timed out in the window
    ended: int  # runs that ended in the window (succeeded, failed, timed out, cancelled), of the newest looked at
    last_failure_us: int  # the slot of the newest failure
    last_error: str


@dataclass(frozen=True)
class BadSlot:
    job_id: str
    scheduled_us: int
    fate: str  # "late" or "missed"
    detail: str  # the alert's message: how late, or why it was missed


@dataclass(frozen=True)
class WaitingTarget:
    target: str
    due_runs: int  # queued runs whose due instant has passed (of those looked at)
    oldest_due_us: int
    workers: int | None  # workers polling it, as the leader heard them; None: not known here


@dataclass(frozen=True)
class Problems:
    now_us: int
    window_us: int
    failing: tuple[FailingJob, ...]  # most failures first, at most ROWS_SHOWN
    failing_jobs: int  # every job with a failure in the window
    bad_slots: tuple[BadSlot, ...]  # newest first, at most ROWS_SHOWN
    late_slots: int
    missed_slots: int
    waiting: tuple[WaitingTarget, ...]  # oldest due run first
    pending_alerts: int
    oldest_pending_alert_us: int
    pending_alert_kinds: tuple[tuple[str, int], ...]
    kills: tuple[model.KillSwitch, ...]

    @property
    def count(self) -> int:
        """How many kinds of problem the page shows (0: all is well)."""
        kinds = (self.failing_jobs, self.late_slots + self.missed_slots, self.waiting, self.pending_alerts, self.kills)
        return sum(bool(n) for n in kinds)


@dataclass
class _Due:
    count: int = 0
    oldest_us: int = 0


@dataclass
class ProblemScan:
    """Due runs nobody takes, accumulated over chunks of jobs read under the state lock; the rest
    is found by `finish`."""

    now_us: int
    window_us: int = PROBLEM_WINDOW_US
    due: dict[str, _Due] = field(default_factory=dict)

    def add_queued(self, state: State, job_ids: list[str]) -> None:
        """Look at the queued runs of `job_ids` (keys of state.live_runs)."""
        for job_id in job_ids:
            instants, job = state.live_runs.get(job_id), state.jobs.get(job_id)
            if not instants or job is None:
                continue
            leased = state.leased_runs.get(job_id, ())
            target = target_key(job.spec)
            for scheduled_us in instants[:LIVE_RUNS_LOOKED_AT_PER_JOB]:
                if scheduled_us in leased:
                    continue
                run = state.get_run(job_id, scheduled_us)
                if run is None or run.status != model.QUEUED:
                    continue
                due_us = max(run.effective_us or run.scheduled_us, run.not_before_us)
                if due_us > self.now_us:
                    continue
                due = self.due.setdefault(target, _Due())
                due.count += 1
                due.oldest_us = min(due.oldest_us or due_us, due_us)

    def finish(self, state: State, serving: Callable[[str], int] | None = None) -> Problems:
        """`serving(target)`: how many workers poll the target (the leader's registry), or None
        where that is not known (a follower): then only runs waiting long count."""
        waiting = []
        for target, due in self.due.items():
            workers = serving(target) if serving is not None else None
            waited_us = self.now_us - due.oldest_us
            if (workers == 0 and waited_us > 0) or waited_us > WAITING_AFTER_US:
                waiting.append(WaitingTarget(target, due.count, due.oldest_us, workers))
        since_us = self.now_us - self.window_us
        failures: dict[str, list[model.Alert]] = {}
        bad: list[BadSlot] = []
        late = missed = 0
        pending: list[model.Alert] = []
        for key in state.alert_order:
            alert = state.alerts[key]
            if not alert.delivered_us:
                pending.append(alert)
            # A streak (consecutive missed slots, one alert) counts while it still grows.
            if max(alert.created_us, last_slot_us(alert)) < since_us:
                continue
            if alert.kind in _FAILURE_ALERTS:
                failures.setdefault(alert.job_id, []).append(alert)
            elif alert.kind in (AlertKind.LATE, AlertKind.MISSED):
                slots = alert_count(alert)
                late += slots if alert.kind == AlertKind.LATE else 0
                missed += slots if alert.kind == AlertKind.MISSED else 0
                detail = alert.message
                if slots > 1:
                    detail = f"{slots:,} slots in a row, the last {format_us(last_slot_us(alert))}: {alert.message}"
                bad.append(BadSlot(alert.job_id, alert.scheduled_us, alert.kind, detail))
        ranked = sorted(failures.items(), key=lambda item: (-len(item[1]), item[0]))[:ROWS_SHOWN]
        failing = tuple(self._failing(state, job_id, alerts, since_us) for job_id, alerts in ranked)
        kinds = Counter(alert.kind for alert in pending)
        return Problems(
            now_us=self.now_us,
            window_us=self.window_us,
            failing=failing,
            failing_jobs=len(failures),
            bad_slots=tuple(sorted(bad, key=_newest)[:ROWS_SHOWN]),
            late_slots=late,
            missed_slots=missed,
            waiting=tuple(sorted(waiting, key=lambda w: (w.oldest_due_us, w.target))),
            pending_alerts=len(pending),
            oldest_pending_alert_us=min((a.created_us for a in pending), default=0),
            pending_alert_kinds=tuple(sorted(kinds.items())),
            kills=tuple(kill for _, kill in sorted(state.kills.items()) if kill.active(state.now_us)),
        )

    @staticmethod
    def _failing(state: State, job_id: str, alerts: list[model.Alert], since_us: int) -> FailingJob:
        newest = max(alerts, key=lambda a: a.scheduled_us)
        job_runs = state.runs.get(job_id, [])
        lo = bisect.bisect_left(job_runs, since_us, key=_scheduled)
        recent = job_runs[max(lo, len(job_runs) - RUNS_LOOKED_AT_PER_JOB) :]
        ended = sum(1 for run in recent if run.status in _ENDED)
        return FailingJob(job_id, len(alerts), max(ended, len(alerts)), newest.scheduled_us, newest.message)


def find_problems(state: State, serving: Callable[[str], int] | None = None) -> Problems:
    """Every job at once (tests, small states); the server scans in chunks instead."""
    scan = ProblemScan(state.now_us)
    scan.add_queued(state, sorted(state.live_runs))
    return scan.finish(state, serving)


def _scheduled(run: model.Run) -> int:
    return run.scheduled_us


def _newest(slot: BadSlot) -> tuple[int, str]:
    return (-slot.scheduled_us, slot.job_id)
