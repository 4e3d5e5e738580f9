"""Alert records in replicated state: what went wrong, for whom, delivered or not.

Alerts are raised inside apply, so every replica has the same set; the leader's
dispatcher delivers them (at least once, keyed by the alert id) and marks them
delivered through the log.

From log format 3 on (STREAK_ALERTS_FORMAT), consecutive missed or skipped slots of one job are
one alert, a streak: the first slot's alert counts the later ones and stays open until the job
fires again. A day-long outage of an every-second job is one alert with a count of 86,400, not
86,400 alerts. A success after failed runs raises `recovered`. Before that version the core
raises one alert per slot, as older nodes do, so a mixed cluster keeps one state.
"""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core.log_format import STREAK_ALERTS_FORMAT
from scheduler.core.model import Alert, FailureStreak, Pause
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind

# How many alerts are kept; the oldest delivered ones go first.
ALERTS_RETAINED = 10_000
# A slot fired later than this after its instant raises a `late` alert.
LATE_ALERT_US = 60_000_000

KINDS = tuple(AlertKind)
STREAK_KINDS = (AlertKind.MISSED, AlertKind.SKIPPED)
# Who a job's own pause_after_failures pause is by.
AUTO_PAUSER = "raftcron"


def alert_id(kind: AlertKind, job_id: str, instant_us: int) -> str:
    return f"{kind}:{job_id}@{instant_us}"


def alert_count(alert: Alert) -> int:
    return 1 if alert.count is UNSET else alert.count


def last_slot_us(alert: Alert) -> int:
    return alert.scheduled_us if alert.last_scheduled_us is UNSET else alert.last_scheduled_us


def is_open_streak(alert: Alert) -> bool:
    return alert.kind in STREAK_KINDS and alert.count is not UNSET and alert.closed_us is UNSET


def undelivered_count(alert: Alert) -> int:
    """Slots (or runs) of this alert no delivery has told about yet: all of them before the first
    delivery, the growth of a streak since its last one after."""
    if not alert.delivered_us:
        return alert_count(alert)
    delivered = alert_count(alert) if alert.delivered_count is UNSET else alert.delivered_count
    return alert_count(alert) - delivered


def raise_alert(state: State, kind: AlertKind, job_id: str, instant_us: int, message: str) -> None:
    """Record an alert once: the same kind for the same run is one alert (its dedup key); a
    missed or skipped slot extends its job's open streak of that kind instead, when there is one."""
    streaks = _streaks(state) if kind in STREAK_KINDS else None
    if streaks is not None:
        current = state.alerts.get(streaks.get(job_id, {}).get(kind, ""))
        if current is not None and is_open_streak(current) and instant_us > last_slot_us(current):
            current.count = alert_count(current) + 1
            current.last_scheduled_us = instant_us
            current.message = message[:2000]
            return
    key = record_alert(state, kind, job_id, instant_us, message)
    if streaks is not None and key:
        state.alerts[key].count = 1
        streaks.setdefault(job_id, {})[kind] = key


def close_streaks(state: State, job_id: str) -> None:
    """The job fired a slot: its missed and skipped streaks end (a later one opens a new alert)."""
    if state.alert_streaks is UNSET or not state.alert_streaks:
        return
    for key in state.alert_streaks.pop(job_id, {}).values():
        alert = state.alerts.get(key)
        if alert is not None and alert.closed_us is UNSET:
            alert.closed_us = state.now_us


def note_failure(state: State, job_id: str, scheduled_us: int) -> None:
    """A run of the job ended failed or timed out: its failing streak grows (format 3 on), and a
    job with `pause_after_failures: N` pauses itself at the Nth in a row, with an alert."""
    if state.cluster_version < STREAK_ALERTS_FORMAT:
        return
    if state.failure_streaks is UNSET:
        state.failure_streaks = {}
    streak = state.failure_streaks.get(job_id)
    streak = FailureStreak(scheduled_us, 1) if streak is None else FailureStreak(streak.since_us, streak.failures + 1)
    state.failure_streaks[job_id] = streak
    job = state.jobs.get(job_id)
    limit = job.body.pause_after_failures if job is not None else UNSET
    if job is None or limit is UNSET or streak.failures < limit or job.pause is not None:
        return
    why = f"paused after {streak.failures} failed runs in a row (pause_after_failures: {limit}); resume it to go on"
    job.pause = Pause(AUTO_PAUSER, why)
    key = record_alert(state, AlertKind.PAUSED, job_id, scheduled_us, why)
    if key:
        state.alerts[key].count = streak.failures
        state.alerts[key].since_us = streak.since_us


def forget_failures(state: State, job_id: str) -> None:
    """An operator resumed the job: its failing streak starts again from zero."""
    if state.failure_streaks is not UNSET:
        state.failure_streaks.pop(job_id, None)


def note_success(state: State, job_id: str, scheduled_us: int) -> None:
    """A run of the job succeeded: a failing streak ends with one `recovered` alert."""
    if state.failure_streaks is UNSET or not state.failure_streaks:
        return
    streak = state.failure_streaks.pop(job_id, None)
    if streak is None:
        return
    runs = "run" if streak.failures == 1 else "runs"
    key = record_alert(
        state, AlertKind.RECOVERED, job_id, scheduled_us, f"succeeded after {streak.failures} failed {runs}"
    )
    if key:
        state.alerts[key].count = streak.failures
        state.alerts[key].since_us = streak.since_us


def _streaks(state: State) -> dict[str, dict[str, str]] | None:
    if state.cluster_version < STREAK_ALERTS_FORMAT:
        return None
    if state.alert_streaks is UNSET:
        state.alert_streaks = {}
    return state.alert_streaks


def record_alert(state: State, kind: AlertKind, job_id: str, instant_us: int, message: str) -> str:
    """A new alert's id, or "" when that alert exists already."""
    key = alert_id(kind, job_id, instant_us)
    if key in state.alerts:
        return ""
    job = state.jobs.get(job_id)
    state.alerts[key] = Alert(
        id=key,
        kind=kind,
        job_id=job_id,
        owner=job.body.owner if job else "",
        job_class=job.body.job_class if job else "",
        scheduled_us=instant_us,
        message=message[:2000],
        created_us=state.now_us,
    )
    state.alert_order.append(key)
    _prune(state)
    return key


def _prune(state: State) -> None:
    """Drop the oldest delivered alerts beyond ALERTS_RETAINED (undelivered ones are never dropped).

    Called after every new alert: past the limit with nothing delivered, a scan of the whole
    order per alert made a herd of N alerts cost N x ALERTS_RETAINED steps (100,000 deadline
    misses in one entry took minutes). `alert_prune_from` skips the prefix known undelivered."""
    order = state.alert_order
    excess = len(order) - ALERTS_RETAINED
    if excess <= 0:
        return
    alerts = state.alerts
    start = min(state.alert_prune_from, len(order))
    doomed_at: list[int] = []
    position = start
    while position < len(order) and len(doomed_at) < excess:
        if alerts[order[position]].delivered_us:
            doomed_at.append(position)
        elif not doomed_at:
            start = position + 1  # still inside the undelivered prefix
        position += 1
    state.alert_prune_from = start
    if not doomed_at:
        return
    doomed = [order[at] for at in doomed_at]
    for key in doomed:
        alert = alerts.pop(key)
        if is_open_streak(alert) and state.alert_streaks is not UNSET:
            open_kinds = state.alert_streaks.get(alert.job_id, {})
            if open_kinds.get(alert.kind) == key:
                del open_kinds[alert.kind]
                if not open_kinds:
                    del state.alert_streaks[alert.job_id]
    if len(doomed_at) == 1:
        del order[doomed_at[0]]  # the herd's case: one per new alert, a memmove not a rebuild
    else:
        gone = set(doomed)
        state.alert_order = [key for key in order if key not in gone]


def mark_delivered(state: State, keys: tuple[str, ...], counts: tuple[int, ...] | None = None) -> int:
    """Record deliveries; `counts[i]` is how many slots the delivery of `keys[i]` told about (a
    streak that grew meanwhile stays due for one more delivery)."""
    marked = 0
    state.alert_prune_from = 0  # delivered alerts may now sit anywhere in the order
    for position, key in enumerate(keys):
        alert = state.alerts.get(key)
        if alert is None:
            continue
        if counts is None:
            if not alert.delivered_us:
                alert.delivered_us = state.now_us
                marked += 1
            continue
        if position < len(counts) and (not alert.delivered_us or undelivered_count(alert) > 0):
            alert.delivered_us = state.now_us
            alert.delivered_count = min(counts[position], alert_count(alert))
            marked += 1
    _prune(state)
    return marked
