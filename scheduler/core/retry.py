"""Retry policy: after a failed attempt, queue the next one with backoff, or end the run."""

from __future__ import annotations

import math

from scheduler.core import results as ev
from scheduler.core.alerts import note_failure, raise_alert
from scheduler.core.model import FAILED, QUEUED, TIMED_OUT, Job, RetryPolicy, Run
from scheduler.core.sharing import share_last
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind

_NO_RETRY = RetryPolicy(max_attempts=1)
# Final statuses an owner is alerted to, and the alert each raises.
_END_ALERTS: dict[str, AlertKind] = {FAILED: AlertKind.FAILED, TIMED_OUT: AlertKind.TIMED_OUT}
MAX_MULTIPLIER = 1000.0


def backoff_us(policy: RetryPolicy, attempt: int, jitter_ppm: int) -> int:
    """Exponential with a cap and "equal jitter": half fixed, half scaled by the proposer's draw.

    Multiplication in a loop rather than pow(): IEEE multiply is exactly rounded on every
    platform, libm's pow is not, and replicas must agree to the microsecond.
    """
    multiplier = policy.backoff_multiplier
    if not (math.isfinite(multiplier) and 1.0 <= multiplier <= MAX_MULTIPLIER):
        multiplier = 1.0  # validated at apply time; a hostile log entry must still not raise here
    base_us = min(policy.backoff_max_us, max(0, policy.backoff_initial_us))
    for _ in range(max(0, attempt - 1)):
        if base_us >= policy.backoff_max_us:
            break
        base_us = int(min(float(policy.backoff_max_us), base_us * multiplier))
    jitter_ppm = min(max(jitter_ppm, 0), 999_999)
    return base_us // 2 + (base_us - base_us // 2) * jitter_ppm // 1_000_000


def end_run(state: State, run: Run, status: str, reason: str) -> ev.AnyEvent:
    state.set_status(run, status)
    run.reason = reason
    run.finished_us = state.now_us
    run.lease_expires_us = 0
    job = state.jobs.get(run.job_id)
    if job is not None and job.last.scheduled_us == run.scheduled_us:
        job.last = share_last(status, run.scheduled_us)
    alert = _END_ALERTS.get(status)
    if alert is not None:
        raise_alert(state, alert, run.job_id, run.scheduled_us, reason)
        note_failure(state, run.job_id, run.scheduled_us)
    return ev.RunEnded(run.job_id, run.scheduled_us, status, reason)


def retry_or_end(
    state: State, run: Run, job: Job | None, final_status: str, why: str, min_delay_us: int, jitter_ppm: int
) -> ev.AnyEvent:
    """The attempt in `run` has ended unsuccessfully (`why`); decide the run's next step."""
    policy = job.body.retry if job is not None else _NO_RETRY
    if run.attempt >= policy.max_attempts:
        return end_run(state, run, final_status, f"{why}; {run.attempt} of {policy.max_attempts} attempts used")
    not_before_us = state.now_us + max(min_delay_us, backoff_us(policy, run.attempt, jitter_ppm))
    if policy.within_us and not_before_us > run.scheduled_us + policy.within_us:
        return end_run(state, run, FAILED, f"{why}; retry window of {policy.within_us // 1_000_000}s closed")
    state.set_status(run, QUEUED)
    run.reason = why
    run.not_before_us = not_before_us
    run.lease_expires_us = 0
    run.worker_id = ""
    return ev.RunRetryScheduled(run.job_id, run.scheduled_us, run.attempt + 1, why, not_before_us)
