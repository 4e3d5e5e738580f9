"""Replicated state: plain records, no behaviour that could differ between replicas.

Nothing here depends on dict insertion order surviving a snapshot: orders that
matter are kept as explicit sorted lists or FIFO lists.
"""

from __future__ import annotations

import bisect
from typing import cast

import msgspec
from msgspec import UNSET, UnsetType

from scheduler.core.commands import Member
from scheduler.core.model import (
    FINAL_STATUSES,
    LEASED,
    LIVE_STATUSES,
    Alert,
    AlertRoute,
    Calendar,
    FailureStreak,
    HistoryPolicy,
    Job,
    KillRecord,
    KillSwitch,
    Resource,
    Run,
)
from scheduler.core.results import Result
from scheduler.core.sharing import share_run

# How many client request ids are remembered for deduplicating retried writes.
REQUEST_MEMORY = 10_000


def _scheduled(run: Run) -> int:
    return run.scheduled_us


def _index(index: dict[str, list[int]], run: Run, add: bool) -> None:
    """Add or remove a run's instant in a job_id -> sorted instants index."""
    if add:
        bisect.insort(index.setdefault(run.job_id, []), run.scheduled_us)
        return
    instants = index[run.job_id]
    instants.remove(run.scheduled_us)
    if not instants:
        del index[run.job_id]


class HistoryMark(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """Retention bookkeeping of one job's history (see retention.py)."""

    # The newest pruned scheduled instant: keys at or before it are accounted for.
    horizon_us: int = 0
    # The next pruning pass runs once the history has this many runs...
    recheck_len: int = 0
    # ...or once replicated time reaches this instant (0: no age limit pending).
    recheck_us: int = 0
    # The policy of a deleted job whose history remains; None while the job exists.
    policy: HistoryPolicy | None = None


# weakref: read-side caches (scheduler/rpc/job_ids.py) tell a restored state from the one they
# were built from without keeping the old one alive.
class State(msgspec.Struct, forbid_unknown_fields=True, weakref=True):
    applied_index: int = 0
    # Replicated time: assigned by the epoch's leader, never backwards (see clock.py).
    now_us: int = 0
    clock_anchor_now_us: int = 0
    clock_anchor_mono_us: int = 0
    # How far the leader's last reading ran ahead of what its monotonic clock allows (0: none).
    clock_ignored_us: int = 0
    epoch: int = 0
    leader_id: str = ""
    leader_term: int = 0
    jobs: dict[str, Job] = msgspec.field(default_factory=dict)
    # job_id -> retained runs sorted by scheduled instant: the claimed run keys still kept.
    runs: dict[str, list[Run]] = msgspec.field(default_factory=dict)
    # job_id -> sorted scheduled instants of its queued or leased runs: overlap decisions,
    # the leader's queue and lease extension on a new epoch never scan all history.
    live_runs: dict[str, list[int]] = msgspec.field(default_factory=dict)
    # job_id -> sorted scheduled instants of its leased runs: what the reaper and a new epoch
    # look at, bounded by worker capacity rather than by the queued backlog.
    leased_runs: dict[str, list[int]] = msgspec.field(default_factory=dict)
    # Dependency budgets: declarations, leases currently counted, recent lease starts.
    resources: dict[str, Resource] = msgspec.field(default_factory=dict)
    resource_leased: dict[str, int] = msgspec.field(default_factory=dict)
    resource_starts: dict[str, list[int]] = msgspec.field(default_factory=dict)
    # Kill switches per job class, their audit trail, and alerts for owners.
    kills: dict[str, KillSwitch] = msgspec.field(default_factory=dict)
    kill_log: list[KillRecord] = msgspec.field(default_factory=list)
    alerts: dict[str, Alert] = msgspec.field(default_factory=dict)
    alert_order: list[str] = msgspec.field(default_factory=list)
    request_results: dict[str, Result] = msgspec.field(default_factory=dict)
    request_fifo: list[str] = msgspec.field(default_factory=list)
    run_count: int = 0
    # node id -> member, once the membership changed at least once (empty: configured peers).
    members: dict[str, Member] = msgspec.field(default_factory=dict)
    # Retention: per job marks, deleted jobs whose history remains, next orphan sweep.
    history: dict[str, HistoryMark] = msgspec.field(default_factory=dict)
    orphaned_histories: dict[str, bool] = msgspec.field(default_factory=dict)
    history_sweep_us: int = 0
    # job_id -> last version of a deleted job: a re-added job's versions continue after it.
    retired_versions: dict[str, int] = msgspec.field(default_factory=dict)
    # The newest log format every voter reads (log_format.py); raised only by SetClusterVersion.
    # Left out of snapshots while it is 1, so those stay format 2 byte for byte.
    cluster_version: int = 1
    # Log format 3 (UNSET before, so older states encode as they did; see alerts.py):
    # job_id -> {alert kind: id} of its open missed/skipped streaks, and its failing streak.
    alert_streaks: dict[str, dict[str, str]] | UnsetType = UNSET
    failure_streaks: dict[str, FailureStreak] | UnsetType = UNSET
    # Named date sets jobs skip or keep to (log format 3); left out of snapshots below format 4.
    calendars: dict[str, Calendar] = msgspec.field(default_factory=dict)
    # Derived, never in a snapshot (codec.py leaves them out; rebuilt from the specs on restore):
    # parent job id -> the sorted ids of the jobs `after:` it, and the runs of parents that
    # reached a final status during the entry being applied (dependencies.py settles them).
    dependents: dict[str, tuple[str, ...]] = msgspec.field(default_factory=dict)
    settling: list[Run] = msgspec.field(default_factory=list)
    # Every alert in alert_order before this position is undelivered (0 assumes nothing): where
    # pruning starts looking for delivered alerts to drop (alerts.py), so a herd of new alerts
    # past the retention limit costs each one a step, not a scan of every alert kept.
    alert_prune_from: int = 0
    # Log format 3: a heap of (slot + deadline, job_id, slot) of queued scheduled runs whose job has
    # a `deadline:`, checked whenever replicated time moves (deadlines.py); UNSET until the first.
    deadline_checks: list[tuple[int, str, int]] | UnsetType = UNSET
    # Log format 3: alert routes by name (routes.py); UNSET or empty: nodes route by their config.
    routes: dict[str, AlertRoute] | UnsetType = UNSET

    def get_run(self, job_id: str, scheduled_us: int) -> Run | None:
        job_runs = self.runs.get(job_id)
        if not job_runs:
            return None
        position = bisect.bisect_left(job_runs, scheduled_us, key=_scheduled)
        if position < len(job_runs) and job_runs[position].scheduled_us == scheduled_us:
            return job_runs[position]
        return None

    def add_run(self, run: Run, job: Job | None = None) -> None:
        """Keep a new run; `job` is its job's record when the caller holds it (None: looked up)."""
        if job is None:
            job = self.jobs.get(run.job_id)
        share_run(run, job.id if job is not None else run.job_id)
        if run.status in LIVE_STATUSES:
            _index(self.live_runs, run, add=True)
        if run.status == LEASED:
            _index(self.leased_runs, run, add=True)
        if self.dependents and run.status in FINAL_STATUSES and run.job_id in self.dependents:
            self.settling.append(run)
        job_runs = self.runs.setdefault(run.job_id, [])
        if not job_runs or job_runs[-1].scheduled_us < run.scheduled_us:
            job_runs.append(run)
        else:
            bisect.insort(job_runs, run, key=_scheduled)
        self.run_count += 1

    def set_status(self, run: Run, status: str) -> None:
        """Change a run's status, keeping the live index in step."""
        was_live, is_live = run.status in LIVE_STATUSES, status in LIVE_STATUSES
        if (run.status == LEASED) != (status == LEASED):
            step = 1 if status == LEASED else -1
            for name in run.resources:
                self.resource_leased[name] = self.resource_leased.get(name, 0) + step
            _index(self.leased_runs, run, add=status == LEASED)
        run.status = status
        if was_live != is_live:
            _index(self.live_runs, run, add=is_live)
        if self.dependents and not is_live and run.job_id in self.dependents:
            self.settling.append(run)

    def rebuild_live_index(self) -> None:
        """Derive the live and leased indexes from the runs (snapshots written before they existed)."""
        self.live_runs, self.leased_runs = {}, {}
        for job_id in sorted(self.runs):
            live = [run.scheduled_us for run in self.runs[job_id] if run.status in LIVE_STATUSES]
            leased = [run.scheduled_us for run in self.runs[job_id] if run.status == LEASED]
            if live:
                self.live_runs[job_id] = live
            if leased:
                self.leased_runs[job_id] = leased

    def rebuild_dependents(self) -> None:
        """Derive the parent -> children index from the specs' `after:` (a restored snapshot)."""
        children: dict[str, list[str]] = {}
        for job_id in sorted(self.jobs):
            after = self.jobs[job_id].body.after
            if after is not UNSET:
                for parent in after:
                    children.setdefault(parent, []).append(job_id)
        self.dependents = {parent: tuple(ids) for parent, ids in children.items()}

    # Every instant in the live and leased indexes is a retained run's: add_run and set_status keep
    # them in step, and retention prunes only runs in a final status.
    def leased(self) -> list[Run]:
        runs = [self.get_run(job_id, s) for job_id, instants in self.leased_runs.items() for s in instants]
        return cast("list[Run]", runs)

    def live(self, job_id: str) -> list[Run]:
        runs = [self.get_run(job_id, scheduled_us) for scheduled_us in self.live_runs.get(job_id, ())]
        return cast("list[Run]", runs)

    def kill_of(self, job_class: str) -> KillSwitch | None:
        kill = self.kills.get(job_class)
        return kill if kill is not None and kill.active(self.now_us) else None

    def remember_request(self, request_id: str, result: Result) -> None:
        if not request_id:
            return
        self.request_results[request_id] = result
        self.request_fifo.append(request_id)
        if len(self.request_fifo) > REQUEST_MEMORY:
            oldest = self.request_fifo.pop(0)
            self.request_results.pop(oldest, None)
