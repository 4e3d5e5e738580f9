"""Deadline alerts: a scheduled slot whose run has not succeeded `deadline:` after it was due.

When a job with a `deadline:` has a slot claimed queued, the core pushes (due + deadline, job,
slot) onto a replicated heap (`State.deadline_checks`); due is when the slot is released (the
slot plus its herd spread, or where a calendar moved it). Whenever replicated time moves (every
epoch command; the leader proposes one at least every 0.5 s), apply pops what has fallen due and
looks at each run: one that has not succeeded by then raises one `deadline_missed` alert, and is
left to go on. Each check costs a heap push when the slot is claimed and a pop when it falls due;
a command with nothing due costs one comparison, whatever the number of jobs. The leader
computes nothing, so every replica and every next leader raises the same alerts at the same
replicated instant (docs/design/deadline-alerts.md).

A slot recorded missed or skipped has its own alert and is not checked; a run cancelled by a
person raises none; a failed or timed-out run (final) still does: its output is not there.
Manual and backfilled runs have no slot to measure from and are not checked.
"""

from __future__ import annotations

import heapq

from msgspec import UNSET

from scheduler.core.alerts import record_alert
from scheduler.core.log_format import DEADLINE_ALERTS_FORMAT
from scheduler.core.model import CANCELLED, SECOND_US, SUCCEEDED, Job, format_run_key
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind, RunKind


def watch_deadline(state: State, job: Job, scheduled_us: int, owed_us: int) -> None:
    """A slot of `job` was queued: check it at `owed_us` + the job's deadline, if it has one."""
    deadline_us = job.body.deadline_us
    if deadline_us is UNSET or state.cluster_version < DEADLINE_ALERTS_FORMAT:
        return
    if state.deadline_checks is UNSET:
        state.deadline_checks = []
    heapq.heappush(state.deadline_checks, (owed_us + deadline_us, job.id, scheduled_us))


def check_deadlines(state: State) -> None:
    """Replicated time moved: raise `deadline_missed` for every watched run now past its deadline."""
    checks = state.deadline_checks
    if checks is UNSET or not checks or checks[0][0] > state.now_us:
        return
    while checks and checks[0][0] <= state.now_us:
        due_us, job_id, scheduled_us = heapq.heappop(checks)
        run = state.get_run(job_id, scheduled_us)
        job = state.jobs.get(job_id)
        if run is None or job is None or run.kind != RunKind.SCHEDULED or run.status in (SUCCEEDED, CANCELLED):
            continue  # pruned, deleted, succeeded in time, or ended on purpose
        late_s = (due_us - (run.effective_us or scheduled_us)) // SECOND_US
        attempt = f", attempt {run.attempt}" if run.attempt else ""
        message = (
            f"run {format_run_key(job_id, scheduled_us)} had not succeeded {_duration_text(late_s)} after it was "
            f"due (status {run.status}{attempt}); it goes on"
        )
        record_alert(state, AlertKind.DEADLINE_MISSED, job_id, scheduled_us, message)


def _duration_text(seconds: int) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
