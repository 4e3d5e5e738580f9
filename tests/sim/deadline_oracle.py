"""The oracle's reading of `deadline:` (docs/design/deadline-alerts.md), from its own bookkeeping,
not from scheduler/core/deadlines.py.

The rule as read here: from cluster version 3 on, a scheduled slot claimed `queued` of a job with
a deadline is owed by its release instant (the run's effective instant: the slot plus its spread)
plus the deadline in force at the claim. Replicated time moves only in accepted epoch entries;
the first one that brings it to that instant or past it decides, from the run as that entry left
it: one `deadline_missed` alert iff the run is still there, its job too, and it is neither
`succeeded` nor `cancelled`. No other entry raises one, and no slot gets two.
"""

from __future__ import annotations

from collections import Counter

from msgspec import UNSET

from scheduler.core.alerts import ALERTS_RETAINED
from scheduler.core.log_format import DEADLINE_ALERTS_FORMAT
from scheduler.core.state import State
from scheduler.planning.durations import parse_duration_us

DEADLINE_MISSED = "deadline_missed"
EXEMPT = ("succeeded", "cancelled")


class DeadlineViolation(AssertionError):
    """A deadline rule broke; the oracle reports it as its own Violation."""


class DeadlineWatch:
    def __init__(self, seen: Counter) -> None:
        self.owed_us: dict[tuple[str, int], int] = {}  # watched slot -> its deadline instant
        self.alerted: set[tuple[str, int]] = set()
        self.alerts_read = 0  # how far into state.alert_order the oracle has looked
        self.seen = seen

    def claimed(self, where: str, state: State, job_id: str, scheduled_us: int, status: str) -> None:
        """A slot claimed by ClaimRuns: watch it if it is queued, its job has a deadline and the
        cluster reads format 3."""
        job = state.jobs[job_id]
        deadline_us = job.body.deadline_us
        if status != "queued" or deadline_us is UNSET or state.cluster_version < DEADLINE_ALERTS_FORMAT:
            return
        run = state.get_run(job_id, scheduled_us)
        spread_us = run.effective_us - scheduled_us
        window_us = 0 if job.body.jitter == "pinned" else parse_duration_us(job.body.jitter, "jitter")
        if not (spread_us == 0 if window_us == 0 else 0 <= spread_us < window_us):
            raise DeadlineViolation(
                f"{where}: {job_id}@{scheduled_us} released {spread_us}us after its slot, jitter {job.body.jitter!r}"
            )
        self.owed_us[(job_id, scheduled_us)] = run.effective_us + deadline_us

    def check(self, where: str, state: State, time_moved: bool) -> None:
        """After every entry: the deadline alerts it raised are exactly the ones the rule owes."""
        order = state.alert_order
        if len(order) > ALERTS_RETAINED:
            raise DeadlineViolation(f"{where}: more alerts than are retained; the oracle reads new ones by position")
        raised: dict[tuple[str, int], str] = {}
        for alert_id in order[self.alerts_read :]:
            alert = state.alerts[alert_id]
            if alert.kind != DEADLINE_MISSED:
                continue
            key = (alert.job_id, alert.scheduled_us)
            if key in self.alerted or key in raised:
                raise DeadlineViolation(f"{where}: a second deadline_missed alert for {key}")
            raised[key] = alert.message
        self.alerts_read = len(order)
        owed: dict[tuple[str, int], str] = {}
        decided: dict[tuple[str, int], int] = {}
        if time_moved:
            for key, owed_us in list(self.owed_us.items()):
                if owed_us > state.now_us:
                    continue
                decided[key] = self.owed_us.pop(key)
                run = state.get_run(*key)
                if run is not None and key[0] in state.jobs and run.status not in EXEMPT:
                    owed[key] = run.status
                else:
                    self.seen[f"deadline:{'gone' if run is None else run.status}"] += 1
        if set(raised) != set(owed):
            extra = {k: self._why(state, k, decided) for k in raised if k not in owed}
            missing = {k: self._why(state, k, decided) for k in owed if k not in raised}
            raise DeadlineViolation(
                f"{where} (now {state.now_us}): deadline alerts raised for {extra} not owed, "
                f"owed for {missing} not raised"
            )
        for key, status in owed.items():
            if f"status {status}" not in raised[key]:
                raise DeadlineViolation(f"{where}: the alert for {key} says {raised[key]!r}, the run is {status}")
        self.alerted |= set(raised)
        if raised:
            self.seen["deadline:missed"] += len(raised)

    def _why(self, state: State, key: tuple[str, int], decided: dict[tuple[str, int], int]) -> str:
        run = state.get_run(*key)
        status = "no run" if run is None else f"{run.kind} {run.status}"
        if key in decided:
            return f"{status}, owed at {decided[key]}"
        watched = self.owed_us.get(key)
        return f"{status}, {'not watched' if watched is None else f'owed at {watched}, later'}"
