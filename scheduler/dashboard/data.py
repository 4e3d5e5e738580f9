"""What each dashboard page shows, copied out of replicated state while its lock is held.

Readers take the State (the caller holds the lock, briefly) and return frozen records that the
views render after the lock is released; the mutable records of the state (jobs, runs, alerts)
are never handed out. No reader walks all jobs or all runs: job lists page through a JobIndex
kept beside the state, a job's runs are found by bisecting its sorted list, and alerts and the
kill log are bounded by their retention.
"""

from __future__ import annotations

import bisect
import threading
from collections import deque
from dataclasses import dataclass

import msgspec

from scheduler.core import model
from scheduler.core import results as ev
from scheduler.core.commands import ApplyJobs
from scheduler.core.model import SECOND_US
from scheduler.core.state import State
from scheduler.leader.planner import schedule_for, spread_offset_us
from scheduler.planning import format_us

# A timeline shows at most this many slots: the most recent ones of the chosen window.
MAX_TIMELINE_SLOTS = 600
NEXT_FIRES_SHOWN = 10
# A timeline draws at most this many slots after the job's cursor.
UPCOMING_SHOWN = 5
# Pages of fires walked to find a long window's newest slots (see latest_fires).
TAIL_WALK_PAGES = 16
# A slot whose first attempt started later than this after it was due is drawn as late.
LATE_AFTER_US = 5 * SECOND_US
JOBS_PAGE_SIZE = 50
ALERTS_PAGE_SIZE = 50
KILL_AUDIT_SHOWN = 100
LEADERSHIP_HISTORY = 20

# Slot fates, in legend order.
ON_TIME, LATE, RETRIED, FAILED, TIMED_OUT = "on_time", "late", "retried", "failed", "timed_out"
SKIPPED, MISSED, CANCELLED, RUNNING, QUEUED = "skipped", "missed", "cancelled", "running", "queued"
UPCOMING, UNRECORDED = "upcoming", "unrecorded"
FATE_NAMES = {
    ON_TIME: "fired on time",
    LATE: "late",
    RETRIED: "retried",
    FAILED: "failed",
    TIMED_OUT: "timed out",
    SKIPPED: "skipped",
    MISSED: "missed",
    CANCELLED: "cancelled",
    RUNNING: "running",
    QUEUED: "queued",
    UPCOMING: "upcoming",
    UNRECORDED: "no record",
}


def human_duration_us(us: int) -> str:
    """A duration rounded for reading: 850ms, 12.3s, 4m05s, 2h03m, 3d04h."""
    sign, us = ("-", -us) if us < 0 else ("", us)
    if us < SECOND_US:
        return f"{sign}{us // 1000}ms"
    seconds = us / SECOND_US
    if seconds < 60:
        return f"{sign}{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{sign}{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{sign}{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{sign}{days}d{hours:02d}h"


# -- slots and their fates -------------------------------------------------------------------


@dataclass(frozen=True)
class Slot:
    """One slot of a job's timeline: its fate at a glance, and a sentence saying why."""

    scheduled_us: int
    fate: str
    label: str
    detail: str
    kind: str = "scheduled"  # scheduled | manual | backfill | "" (a schedule fire with no run)
    has_run: bool = True


def _lateness_us(run: model.Run) -> int:
    """How long after it was due the run's first attempt started (its claim, if none started)."""
    due_us = run.effective_us or run.scheduled_us
    started_us = run.attempts[0].started_us if run.attempts else run.claimed_us
    return max(0, started_us - due_us)


def fate_of(run: model.Run) -> Slot:
    """The fate of a run, as the timeline draws it."""
    tries = len(run.attempts)
    late = f"; started {human_duration_us(_lateness_us(run))} after it was due" if tries else ""
    exit_note = f" (exit code {run.exit_code})" if run.exit_code else ""
    status, reason = run.status, run.reason or run.error
    if status == model.SUCCEEDED:
        if tries > 1:
            fate, label = RETRIED, f"succeeded on attempt {tries}"
        elif _lateness_us(run) > LATE_AFTER_US:
            fate, label = LATE, f"late by {human_duration_us(_lateness_us(run))}"
        else:
            fate, label = ON_TIME, "fired on time"
        detail = f"{label}{late}"
    elif status == model.FAILED:
        fate, label = FAILED, f"failed{exit_note}"
        detail = f"failed after {tries} attempt(s): {reason}{late}"
    elif status == model.TIMED_OUT:
        fate, label = TIMED_OUT, "timed out"
        detail = f"timed out after {tries} attempt(s): {reason}{late}"
    elif status == model.SKIPPED:
        fate, label = SKIPPED, f"skipped: {reason or 'misfire policy'}"
        detail = label
    elif status == model.MISSED:
        fate, label = MISSED, "missed"
        detail = f"missed: {reason}"
    elif status == model.CANCELLED:
        fate, label = CANCELLED, "cancelled"
        detail = f"cancelled: {reason}"
    elif status == model.LEASED:
        fate, label = RUNNING, f"running (attempt {run.attempt})"
        detail = f"running attempt {run.attempt} on {run.worker_id or 'a worker'}{late}"
    else:
        fate, label = QUEUED, "waiting to retry" if tries else "queued"
        detail = f"{label}{': ' + reason if reason else ''}"
    return Slot(run.scheduled_us, fate, label, detail, run.kind)


def _deep_copy(run: model.Run) -> model.Run:
    """A detached copy: the original keeps changing under later applies."""
    return msgspec.msgpack.decode(msgspec.msgpack.encode(run), type=model.Run)


# -- the job index ---------------------------------------------------------------------------


class JobIndex:
    """Sorted job ids with what a search looks at, rebuilt only when the set of jobs changed.

    An apply listener marks it stale on every accepted ApplyJobs; a restored snapshot (a new
    State object) or a different job count also triggers a rebuild. The state lock is held only
    to copy the job records (a few ms for 100,000); sorting and searching use the copy.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # (job id, its id, owner and class in lower case for searching), sorted by id.
        self._keys: list[tuple[str, str]] = []
        self._built_for: object = None
        self._count = -1
        self._stale = True

    def mark_stale(self) -> None:
        self._stale = True

    def refresh(self, read_state) -> None:
        """`read_state()` is the replica's read context (RaftLog.read)."""
        with self._lock:
            with read_state() as state:
                if not self._stale and self._built_for is state and self._count == len(state.jobs):
                    return
                # Cleared under the state lock: an apply after the copy marks it stale again.
                self._stale = False
                self._built_for, self._count = state, len(state.jobs)
                jobs = list(state.jobs.values())
            # Specs are frozen: reading them after the lock is released is safe.
            specs = [job.spec for job in jobs]
            self._keys = sorted(
                (spec.id, f"{spec.id}\n{spec.owner}\n{spec.job_class}".lower()) for spec in specs
            )

    def page(self, query: str, page: int, page_size: int) -> tuple[list[str], int]:
        """The ids on page `page` (from 0) of the jobs matching `query`, and how many match.

        A query matches a substring of the id, the owner or the class, case-insensitively.
        """
        with self._lock:
            keys = self._keys
        start = page * page_size
        query = query.strip().lower()
        if not query:
            return [job_id for job_id, _ in keys[start : start + page_size]], len(keys)
        matching = [job_id for job_id, text in keys if query in text]
        return matching[start : start + page_size], len(matching)


class NodeWatcher:
    """An apply listener (tick thread, state lock held): it only flips a flag and appends to a deque."""

    def __init__(self, index: JobIndex) -> None:
        self.index = index
        # (epoch, node_id, term, at_us) of the leadership changes this process applied, newest last.
        self.leaderships: deque[tuple[int, str, int, int]] = deque(maxlen=LEADERSHIP_HISTORY)

    def __call__(self, command, result) -> None:
        if result.rejection is not None:
            return
        if isinstance(command, ApplyJobs):
            self.index.mark_stale()
        for event in result.events:
            if type(event) is ev.LeadershipClaimed:
                self.leaderships.append((event.epoch, event.node_id, event.term, command.issued_at_us))


# -- page records ----------------------------------------------------------------------------


@dataclass(frozen=True)
class JobRow:
    spec: model.JobSpec
    next_fire_us: int  # when the next slot becomes due (with its spread); 0: never
    last_status: str
    last_scheduled_us: int
    paused: bool
    killed: str  # the kill's reason when the job's class is killed, else ""


def _killed(state: State, spec: model.JobSpec) -> str:
    kill = state.kill_of(spec.job_class)
    return f"{kill.reason} (by {kill.author})" if kill is not None else ""


def _spread_us(spec: model.JobSpec, herd_window_us: int) -> int:
    return spread_offset_us(spec, schedule_for(spec), herd_window_us)


def job_rows(state: State, job_ids: list[str], herd_window_us: int) -> list[JobRow]:
    rows = []
    for job_id in job_ids:
        job = state.jobs.get(job_id)
        if job is None:
            continue
        next_us = job.next_due_us + _spread_us(job.spec, herd_window_us) if job.next_due_us else 0
        rows.append(JobRow(job.spec, next_us, job.last_status, job.last_scheduled_us, job.paused, _killed(state, job.spec)))
    return rows


@dataclass(frozen=True)
class NextFire:
    scheduled_us: int  # the nominal slot (the run key)
    due_us: int  # with the job's spread offset
    nominal_local: str
    adjustment: str  # a DST adjustment, "" for none
    utc_offset_s: int


@dataclass(frozen=True)
class JobDetail:
    row: JobRow
    version: int
    author: str
    updated_us: int
    cursor_us: int
    paused_by: str
    paused_reason: str
    spread_us: int
    now_us: int
    live_runs: int
    retained_runs: int
    oldest_run_us: int  # the oldest retained run's slot, 0 when none is retained
    runs: tuple[model.Run, ...]  # detached copies of the window's runs, oldest first, at most MAX_TIMELINE_SLOTS
    runs_cut: bool  # the window held more runs than are shown


def job_detail(state: State, job_id: str, from_us: int, to_us: int, herd_window_us: int) -> JobDetail | None:
    job = state.jobs.get(job_id)
    if job is None:
        return None
    job_runs = state.runs.get(job_id, [])
    lo = bisect.bisect_left(job_runs, from_us, key=_scheduled)
    hi = bisect.bisect_left(job_runs, to_us, key=_scheduled)
    shown = job_runs[max(lo, hi - MAX_TIMELINE_SLOTS) : hi]
    (row,) = job_rows(state, [job_id], herd_window_us)
    return JobDetail(
        row=row,
        version=job.version,
        author=job.author,
        updated_us=job.updated_us,
        cursor_us=job.cursor_us,
        paused_by=job.paused_by,
        paused_reason=job.paused_reason,
        spread_us=_spread_us(job.spec, herd_window_us),
        now_us=state.now_us,
        live_runs=len(state.live_runs.get(job_id, ())),
        retained_runs=len(job_runs),
        oldest_run_us=job_runs[0].scheduled_us if job_runs else 0,
        runs=tuple(_deep_copy(run) for run in shown),
        runs_cut=hi - lo > len(shown),
    )


def _scheduled(run: model.Run) -> int:
    return run.scheduled_us


def next_fires(spec: model.JobSpec, after_us: int, spread_us: int, count: int = NEXT_FIRES_SHOWN) -> list[NextFire]:
    """The job's next slots after `after_us` (its cursor), with DST adjustments and its spread (pure)."""
    return [
        NextFire(fire.at_us, fire.at_us + spread_us, fire.nominal_local, fire.adjustment, fire.utc_offset_s)
        for fire in schedule_for(spec).next_fires(after_us, count)
    ]


def latest_fires(
    spec: model.JobSpec, from_us: int, to_us: int, limit: int = MAX_TIMELINE_SLOTS
) -> tuple[list[int], bool]:
    """Up to `limit` of the schedule's slots in [from_us, to_us), the most recent ones (pure),
    and whether older slots of the window were left out.

    Never computes the whole of a long window: it narrows the window from its start by quarters
    until at most `limit` slots remain, then walks forward from the last window that held too
    many (a few pages of limit + 1 fires) to keep exactly the newest `limit`.
    """
    schedule = schedule_for(spec)
    start_us, too_many_from_us = from_us, None
    while True:
        fires = schedule.fires_between(start_us - 1, to_us - 1, limit + 1)
        if len(fires) <= limit or to_us - start_us <= 1:
            break
        too_many_from_us = start_us
        start_us = to_us - max(1, (to_us - start_us) // 4)
    if too_many_from_us is None:
        return [fire.at_us for fire in fires], False
    tail: deque[int] = deque(maxlen=limit)
    after_us = too_many_from_us - 1
    for _ in range(TAIL_WALK_PAGES):
        page = schedule.fires_between(after_us, to_us - 1, limit + 1)
        tail.extend(fire.at_us for fire in page)
        if len(page) <= limit:
            return list(tail), True
        after_us = page[-1].at_us
    return [fire.at_us for fire in fires[:limit]], True


def timeline(detail: JobDetail, from_us: int, to_us: int) -> tuple[list[Slot], bool]:
    """The window's slots: the runs recorded, gaps among them, and the next few slots (pure).

    A schedule slot between the job's oldest retained run and its cursor that has no run is
    drawn as "no record" (it should not happen: every accounted slot keeps a record until
    retention prunes it). Slots before the oldest retained run are left out (the job did not
    exist yet, or retention pruned them); after the cursor, at most UPCOMING_SHOWN are drawn.
    Returns the most recent MAX_TIMELINE_SLOTS slots and whether older ones were left out.
    """
    slots = {run.scheduled_us: fate_of(run) for run in detail.runs}
    cut = detail.runs_cut
    if detail.oldest_run_us:
        gap_from_us = max(from_us, detail.oldest_run_us, detail.runs[0].scheduled_us if detail.runs_cut else 0)
        gap_to_us = min(to_us, detail.cursor_us + 1)
        if gap_from_us < gap_to_us:
            fires, fires_cut = latest_fires(detail.row.spec, gap_from_us, gap_to_us)
            cut = cut or fires_cut
            for at_us in fires:
                slots.setdefault(
                    at_us, Slot(at_us, UNRECORDED, "no record", "accounted, but no run is retained", "", False)
                )
    for fire in schedule_for(detail.row.spec).next_fires(max(detail.cursor_us, from_us - 1), UPCOMING_SHOWN):
        if fire.at_us >= to_us:
            break
        due = format_us(fire.at_us + detail.spread_us)
        slots.setdefault(fire.at_us, Slot(fire.at_us, UPCOMING, "upcoming", f"due at {due}", "", False))
    ordered = [slots[at_us] for at_us in sorted(slots)]
    return ordered[-MAX_TIMELINE_SLOTS:], cut or len(ordered) > MAX_TIMELINE_SLOTS


@dataclass(frozen=True)
class RunDetail:
    run: model.Run
    spec: model.JobSpec | None  # None when the job was deleted (its history stays)
    now_us: int
    previous_us: int  # the job's neighbouring retained runs, 0 when none
    next_us: int


def run_detail(state: State, job_id: str, scheduled_us: int) -> RunDetail | None:
    job_runs = state.runs.get(job_id, [])
    position = bisect.bisect_left(job_runs, scheduled_us, key=_scheduled)
    if position >= len(job_runs) or job_runs[position].scheduled_us != scheduled_us:
        return None
    job = state.jobs.get(job_id)
    return RunDetail(
        run=_deep_copy(job_runs[position]),
        spec=job.spec if job else None,
        now_us=state.now_us,
        previous_us=job_runs[position - 1].scheduled_us if position > 0 else 0,
        next_us=job_runs[position + 1].scheduled_us if position + 1 < len(job_runs) else 0,
    )


@dataclass(frozen=True)
class AlertRow:
    id: str
    kind: str
    job_id: str
    owner: str
    job_class: str
    scheduled_us: int
    message: str
    created_us: int
    delivered_us: int


@dataclass(frozen=True)
class AlertsPage:
    alerts: list[AlertRow]
    total: int  # alerts retained
    pending: int  # not yet delivered
    matching: int  # retained alerts passing the filter
    page: int
    now_us: int


def alerts_page(state: State, pending_only: bool, kind: str, page: int, page_size: int = ALERTS_PAGE_SIZE) -> AlertsPage:
    """Newest first; retention bounds the scan (core.alerts.ALERTS_RETAINED)."""
    pending = 0
    matching: list[str] = []
    for key in reversed(state.alert_order):
        alert = state.alerts[key]
        pending += not alert.delivered_us
        if (pending_only and alert.delivered_us) or (kind and alert.kind != kind):
            continue
        matching.append(key)
    rows = [
        AlertRow(a.id, a.kind, a.job_id, a.owner, a.job_class, a.scheduled_us, a.message, a.created_us, a.delivered_us)
        for a in (state.alerts[key] for key in matching[page * page_size : (page + 1) * page_size])
    ]
    return AlertsPage(rows, len(state.alert_order), pending, len(matching), page, state.now_us)


@dataclass(frozen=True)
class KillsPage:
    active: list[model.KillSwitch]  # frozen records, safe to share
    audit: list[model.KillRecord]  # newest first
    now_us: int


def kills_page(state: State) -> KillsPage:
    active = [kill for _, kill in sorted(state.kills.items()) if kill.active(state.now_us)]
    return KillsPage(active, list(reversed(state.kill_log[-KILL_AUDIT_SHOWN:])), state.now_us)


@dataclass(frozen=True)
class ClusterFacts:
    """Replicated facts for the cluster page (the Raft facts are read from pysyncobj, not the state)."""

    epoch: int
    leader_id: str
    leader_term: int
    now_us: int
    clock_ignored_us: int
    jobs: int
    runs: int
    leased_runs: int  # bounded by worker capacity, unlike the queued backlog
    active_kills: int
    alerts: int
    resources: tuple[model.Resource, ...]
    resource_leased: dict[str, int]


def cluster_facts(state: State) -> ClusterFacts:
    return ClusterFacts(
        epoch=state.epoch,
        leader_id=state.leader_id,
        leader_term=state.leader_term,
        now_us=state.now_us,
        clock_ignored_us=state.clock_ignored_us,
        jobs=len(state.jobs),
        runs=state.run_count,
        leased_runs=sum(len(v) for v in state.leased_runs.values()),
        active_kills=sum(1 for kill in state.kills.values() if kill.active(state.now_us)),
        alerts=len(state.alert_order),
        resources=tuple(state.resources[name] for name in sorted(state.resources)),
        resource_leased=dict(state.resource_leased),
    )


@dataclass(frozen=True)
class PeerRow:
    node_id: str
    raft_address: str
    grpc_address: str
    connected: bool
    match_index: int  # as the leader knows it; 0 on a follower


@dataclass(frozen=True)
class RaftFacts:
    """This node's Raft view, read from pysyncobj (not replicated state)."""

    node_id: str
    role: str
    leader: str
    term: int
    commit_index: int
    applied_index: int
    peers: tuple[PeerRow, ...]


@dataclass(frozen=True)
class ClusterPage:
    raft: RaftFacts
    facts: ClusterFacts
    leaderships: tuple[tuple[int, str, int, int], ...]  # (epoch, node, term, at_us), newest first
