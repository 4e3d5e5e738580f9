"""Alert records in replicated state: what went wrong, for whom, delivered or not.

Alerts are raised inside apply, so every replica has the same set; the leader's
dispatcher delivers them (at least once, keyed by the alert id) and marks them
delivered through the log.
"""

from __future__ import annotations

from scheduler.core.model import Alert
from scheduler.core.state import State
from scheduler.core.vocabulary import AlertKind

# How many alerts are kept; the oldest delivered ones go first.
ALERTS_RETAINED = 10_000
# A slot fired later than this after its instant raises a `late` alert.
LATE_ALERT_US = 60_000_000

KINDS = tuple(AlertKind)


def alert_id(kind: AlertKind, job_id: str, instant_us: int) -> str:
    return f"{kind}:{job_id}@{instant_us}"


def raise_alert(state: State, kind: AlertKind, job_id: str, instant_us: int, message: str) -> None:
    """Record an alert once: the same kind for the same run is one alert (its dedup key)."""
    key = alert_id(kind, job_id, instant_us)
    if key in state.alerts:
        return
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


def _prune(state: State) -> None:
    excess = len(state.alert_order) - ALERTS_RETAINED
    if excess <= 0:
        return
    doomed = [key for key in state.alert_order if state.alerts[key].delivered_us][:excess]
    for key in doomed:
        del state.alerts[key]
    if doomed:
        gone = set(doomed)
        state.alert_order = [key for key in state.alert_order if key not in gone]


def mark_delivered(state: State, keys: tuple[str, ...]) -> int:
    marked = 0
    for key in keys:
        alert = state.alerts.get(key)
        if alert is not None and not alert.delivered_us:
            alert.delivered_us = state.now_us
            marked += 1
    _prune(state)
    return marked
