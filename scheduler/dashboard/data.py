"""What each dashboard page shows, copied out of replicated state while its lock is held.

Readers take the State (the caller holds the lock, briefly) and return frozen records that the
views render after the lock is released; the mutable records of the state (jobs, runs, alerts)
are never handed out. No reader walks all jobs or all runs: job lists page through a JobIndex
kept beside the state, a job's runs are found by bisecting its sorted list, and alerts and the
kill log are bounded by their retention.
"""

from __future__ import annotations

import bisect
import dataclasses
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass

import msgspec

from scheduler.core import model
from scheduler.core import results as ev
from scheduler.core.commands import ApplyJobs
from scheduler.core.state import State
from scheduler.dashboard.fates import MAX_TIMELINE_SLOTS
from scheduler.leader.dispatch import target_key
from scheduler.planning.calendars import plan_calendar_slot
from scheduler.planning.jobs import schedule_for, spread_offset_us
from scheduler.planning.slot_text import counted_runs_of, owing_state
from scheduler.planning.slots import NO_SOURCE, upcoming_fires

NEXT_FIRES_SHOWN = 10
JOBS_PAGE_SIZE = 50
ALERTS_PAGE_SIZE = 50
KILL_AUDIT_SHOWN = 100
LEADERSHIP_HISTORY = 20


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
            self._keys = sorted((spec.id, f"{spec.id}\n{spec.owner}\n{spec.job_class}".lower()) for spec in specs)

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

    def __call__(self, command, result, state) -> None:
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
    return spread_offset_us(spec, None, herd_window_us)


def job_rows(state: State, job_ids: list[str], herd_window_us: int) -> list[JobRow]:
    rows = []
    for job_id in job_ids:
        job = state.jobs.get(job_id)
        if job is None:
            continue
        next_us = job.next_due_us + _spread_us(job.spec, herd_window_us) if job.next_due_us else 0
        rows.append(
            JobRow(job.spec, next_us, job.last_status, job.last_scheduled_us, job.paused, _killed(state, job.spec))
        )
    return rows


@dataclass(frozen=True)
class NextFire:
    scheduled_us: int  # the nominal slot (the run key)
    due_us: int  # with the job's spread offset (and where its calendar moved it)
    nominal_local: str
    adjustment: str  # a DST adjustment, "" for none
    utc_offset_s: int
    source: int = NO_SOURCE  # the index into the spec's `schedules:` that produces it
    calendar: str = ""  # "skipped" or "moved" by the job's calendar, "" when owed as scheduled
    calendar_reason: str = ""


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
    counted_runs: int = 0  # scheduled runs counted toward the spec's max_runs
    owing: str = ""  # why nothing is owed, the active window, the run count (planning/slot_text.py)
    children: tuple[str, ...] = ()  # the jobs `after:` this one (State.dependents)


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
        counted_runs=counted_runs_of(job.counted_runs),
        owing=owing_state(
            job.spec, job.next_due_us, counted_runs_of(job.counted_runs), job.last_scheduled_us, state.now_us
        ),
        children=state.dependents.get(job_id, ()),
    )


def _scheduled(run: model.Run) -> int:
    return run.scheduled_us


def next_fires(
    spec: model.JobSpec,
    after_us: int,
    spread_us: int,
    count: int = NEXT_FIRES_SHOWN,
    counted_runs: int = 0,
    calendars: Mapping[str, model.Calendar] | None = None,
) -> list[NextFire]:
    """The job's next owed slots after `after_us` (its cursor), with DST adjustments, the schedule
    each comes from, its spread and what its calendar does to each (pure); the active window and
    `max_runs` cut the list."""
    if not spec.calendar:
        return [
            NextFire(fire.at_us, fire.at_us + spread_us, fire.nominal_local, fire.adjustment, fire.utc_offset_s, source)
            for fire, source in upcoming_fires(spec, after_us, count, counted_runs)
        ]
    # A job with a calendar has one plain `schedule:` (specs/rules.py).
    schedule = schedule_for(spec)
    fires = schedule.next_fires(after_us, count + 1)
    shown = [
        NextFire(fire.at_us, fire.at_us + spread_us, fire.nominal_local, fire.adjustment, fire.utc_offset_s)
        for fire in fires[:count]
    ]
    previous_us, annotated = after_us, []
    for position, fire in enumerate(shown):
        next_us = fires[position + 1].at_us if position + 1 < len(fires) else 0
        plan = plan_calendar_slot(
            spec.calendar, calendars or {}, schedule.zone, fire.scheduled_us, previous_us, next_us
        )
        if plan.status == model.SKIPPED:
            fire = dataclasses.replace(fire, calendar="skipped", calendar_reason=plan.reason)
        elif plan.moved:
            fire = dataclasses.replace(
                fire, due_us=plan.due_us + spread_us, calendar="moved", calendar_reason=plan.reason
            )
        annotated.append(fire)
        previous_us = fire.scheduled_us
    return annotated


@dataclass(frozen=True)
class RunDetail:
    run: model.Run
    spec: model.JobSpec | None  # None when the job was deleted (its history stays)
    now_us: int
    previous_us: int  # the job's neighbouring retained runs, 0 when none
    next_us: int
    spec_version: int = 0  # the job's current version (a run names the one it was claimed under)


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
        spec_version=job.version if job else 0,
    )


@dataclass(frozen=True)
class AlertRow:
    alert: model.Alert  # a copy taken under the state lock
    has_run: bool  # a retained run at (job, instant); a kill's alert names the moment of the kill instead


@dataclass(frozen=True)
class AlertsPage:
    alerts: list[AlertRow]
    total: int  # alerts retained
    pending: int  # not yet delivered
    matching: int  # retained alerts passing the filter
    page: int
    now_us: int


def alerts_page(
    state: State, pending_only: bool, kind: str, page: int, page_size: int = ALERTS_PAGE_SIZE
) -> AlertsPage:
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
        AlertRow(msgspec.structs.replace(a), state.get_run(a.job_id, a.scheduled_us) is not None)
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
    tick_stalls: int = 0  # Raft ticks that started 0.25 s or more late, since the process started
    longest_tick_gap_s: float = 0.0


@dataclass(frozen=True)
class ClusterPage:
    raft: RaftFacts
    facts: ClusterFacts
    leaderships: tuple[tuple[int, str, int, int], ...]  # (epoch, node, term, at_us), newest first


@dataclass(frozen=True)
class HeldLeases:
    """The leases one holder (PRINCIPAL/WORKER_ID) has now, from replicated state."""

    holder: str
    leases: int
    targets: tuple[str, ...]  # the targets of the runs it holds
    oldest_started_us: int
    latest_expiry_us: int


def leases_by_holder(state: State) -> dict[str, HeldLeases]:
    """Every leased run grouped by holder: bounded by worker capacity, not by the backlog."""
    found: dict[str, list[model.Run]] = {}
    for job_id, instants in state.leased_runs.items():
        for scheduled_us in instants:
            run = state.get_run(job_id, scheduled_us)
            if run is not None:
                found.setdefault(run.worker_id, []).append(run)
    held = {}
    for holder, runs in found.items():
        targets = sorted({target_key(state.jobs[r.job_id].spec) for r in runs if r.job_id in state.jobs})
        held[holder] = HeldLeases(
            holder,
            len(runs),
            tuple(targets),
            min((r.started_us for r in runs if r.started_us), default=0),
            max(r.lease_expires_us for r in runs),
        )
    return held
