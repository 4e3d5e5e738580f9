"""Operator transitions: kill switches per job class, and alert delivery bookkeeping."""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core import results as ev
from scheduler.core.alerts import mark_delivered, raise_alert
from scheduler.core.commands import KillClass, MarkAlertsDelivered, ReviveClass
from scheduler.core.model import CANCELLED, LEASED, KillRecord, KillSwitch
from scheduler.core.results import Result, rejected
from scheduler.core.retry import end_run
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind, KillAction, RejectionCode

KILL_LOG_RETAINED = 1_000


def _audit(state: State, record: KillRecord) -> None:
    state.kill_log.append(record)
    del state.kill_log[: max(0, len(state.kill_log) - KILL_LOG_RETAINED)]


def kill_class(state: State, cmd: KillClass, index: int) -> Result:
    if not cmd.job_class or not cmd.reason:
        return rejected(index, RejectionCode.INVALID, "a kill needs a class and a reason")
    if cmd.until_us and cmd.until_us <= state.now_us:
        return rejected(index, RejectionCode.INVALID, "the kill would already have ended (until is in the past)")
    state.kills[cmd.job_class] = KillSwitch(
        cmd.job_class, cmd.reason, cmd.author, state.now_us, cmd.until_us, cmd.cancel_running
    )
    _audit(state, KillRecord(KillAction.KILL, cmd.job_class, cmd.author, state.now_us, cmd.reason, cmd.until_us))
    why = f"class {cmd.job_class} killed by {cmd.author}: {cmd.reason}"
    events: list[ev.AnyEvent] = []
    for job_id, job in sorted(state.jobs.items()):
        if job.body.job_class != cmd.job_class:
            continue
        # Queued runs never start; running ones are fenced only when asked to.
        doomed = [r for r in state.live(job_id) if cmd.cancel_running or r.status != LEASED]
        events.extend(end_run(state, run, CANCELLED, why) for run in doomed)
        raise_alert(state, AlertKind.KILLED, job_id, state.now_us, why)
    return Result(index=index, events=tuple(events))


def revive_class(state: State, cmd: ReviveClass, index: int) -> Result:
    if state.kills.pop(cmd.job_class, None) is None:
        return rejected(index, RejectionCode.NOT_FOUND, f"class {cmd.job_class!r} is not killed")
    _audit(state, KillRecord(KillAction.REVIVE, cmd.job_class, cmd.author, state.now_us))
    return Result(index=index)


def mark_alerts_delivered(state: State, cmd: MarkAlertsDelivered, index: int) -> Result:
    mark_delivered(state, cmd.alert_ids, None if cmd.counts is UNSET else cmd.counts)
    return Result(index=index)
