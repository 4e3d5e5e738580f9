"""Runs by status, kept in step with replicated state without scanning it at every scrape.

Replicated state may hold a million runs; counting them all takes about 0.1 s with the
state lock held, which would stall applies. Instead each job has a small tally (runs by
status, its target and resources) that the apply listener moves along with the events
of each entry, on the tick thread, in O(events):

- `RunClaimed` adds a run, `LeaseGranted` moves queued -> leased, `RunSucceeded` leased ->
  succeeded, `RunRetryScheduled` leased -> queued, `RunEnded` live -> its status (when the
  job's tally leaves no doubt whether the run was queued or leased).
- Anything else that names a job (a changed spec, a pruned history, a backfill over a
  skipped slot, an event type this module does not know) marks the job *dirty*.
- After each entry every job it touched is checked against two lengths the state keeps
  anyway (`runs[job]` and `live_runs[job]`); a mismatch marks the job dirty, except runs
  pruned from a history whose final runs all have one status (the common, healthy case).

Dirty jobs are recounted exactly at scrape time, a bounded number of runs per hold of the
state lock (`sync`). A restored snapshot, or a total that disagrees with `state.run_count`,
recounts everything the same way. So the figures are exact at every scrape, and the cost
of a scrape is proportional to what changed in ways the fast path does not follow.

Every method runs with the state lock held: from the apply listener (the tick thread
holds it), or inside `raftlog.read()`.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter

from scheduler.core import results as ev
from scheduler.core.model import LEASED, LIVE_STATUSES, QUEUED, SUCCEEDED
from scheduler.leader.dispatch import target_key

_STATUS = attrgetter("status")

# Events that name a job but change none of its runs, its target, uses or pause flag.
_NO_RUN_CHANGE = frozenset(
    (
        ev.RunAlreadyClaimed,
        ev.SlotAlreadyAccounted,
        ev.ClaimOutOfPlan,
        ev.LeaseNotGranted,
        ev.LeaseExtended,
        ev.LeaseFenced,
        ev.LeaseStillLive,
        ev.CompletionRepeated,
        ev.JobUnchanged,
    )
)
# Status changes an event implies without doubt: the core only makes them from that status.
_MOVES = {
    ev.LeaseGranted: (QUEUED, LEASED),
    ev.RunSucceeded: (LEASED, SUCCEEDED),
    ev.RunRetryScheduled: (LEASED, QUEUED),
}


class _JobTally:
    __slots__ = ("counts", "runs", "target", "uses", "paused")

    def __init__(self, counts: dict[str, int], runs: int, target: str, uses: tuple[str, ...], paused: bool) -> None:
        self.counts = counts
        self.runs = runs
        self.target = target
        self.uses = uses
        self.paused = paused


class RunTally:
    def __init__(self) -> None:
        self._jobs: dict[str, _JobTally] = {}
        self._dirty: set[str] = set()
        self._state: object | None = None
        self._rescan_all = True
        # How far state.run_count stood from the exact count after the last full recount:
        # a core that miscounts costs one full recount, not one per scrape.
        self._run_count_offset = 0
        self._full_pass = False
        self.totals: dict[str, int] = {}
        self.live_by_target: dict[tuple[str, str], int] = {}
        self.live_by_resource: dict[tuple[str, str], int] = {}
        self.paused_jobs = 0
        self.tracked_runs = 0
        self.recounted_runs = 0  # work done by sync(), for the curious (and for tests)
        self.full_recounts = 0

    # -- the apply listener's part (tick thread, state lock held) -------------
    def on_apply(self, state, command, result) -> None:
        if state is not self._state:
            self._reset(state)
        if self._rescan_all or result.rejection is not None or result.index != state.applied_index:
            # Rejected, or a retried request answered with its first result: nothing changed.
            return
        jobs, dirty = self._jobs, self._dirty
        touched: dict[str, _JobTally] = {}
        for event in result.all_events():
            kind = type(event)
            if kind in _NO_RUN_CHANGE:
                continue
            job_id = getattr(event, "job_id", None)
            if job_id is None or job_id in dirty:
                continue
            tally = jobs.get(job_id)
            if tally is None:
                dirty.add(job_id)
                continue
            touched[job_id] = tally
            move = _MOVES.get(kind)
            if move is not None:
                followed = self._move(tally, *move)
            elif kind is ev.RunClaimed:
                tally.runs += 1
                self.tracked_runs += 1
                self._add(tally, event.status, 1)
                followed = True
            elif kind is ev.RunEnded:
                counts = tally.counts
                if not counts.get(QUEUED):
                    followed = self._move(tally, LEASED, event.status)
                elif not counts.get(LEASED):
                    followed = self._move(tally, QUEUED, event.status)
                else:
                    followed = False  # queued and leased runs both live: which one ended is unknown here
            elif kind is ev.JobPaused or kind is ev.JobResumed:
                job = state.jobs.get(job_id)
                paused = job is not None and job.paused
                self.paused_jobs += paused - tally.paused
                tally.paused = paused
                followed = True
            else:
                followed = False  # JobAdded/Changed/Removed (target, uses), or an event type unknown here
            if not followed:
                dirty.add(job_id)
        runs_of, live_of = state.runs, state.live_runs
        for job_id, tally in touched.items():
            if job_id in dirty:
                continue
            counts = tally.counts
            live = len(live_of.get(job_id, ()))
            if counts.get(QUEUED, 0) + counts.get(LEASED, 0) != live:
                dirty.add(job_id)
                continue
            gone = tally.runs - len(runs_of.get(job_id, ()))
            if gone and not self._pruned(tally, gone):
                dirty.add(job_id)

    def _pruned(self, tally: _JobTally, gone: int) -> bool:
        """`gone` final runs were pruned: followed when the job's final runs all share one status
        (a healthy job's history is all `succeeded`), else the job is recounted."""
        finals = [status for status, count in tally.counts.items() if count and status not in LIVE_STATUSES]
        if gone <= 0 or len(finals) != 1 or tally.counts[finals[0]] < gone:
            return False
        self._add(tally, finals[0], -gone)
        tally.runs -= gone
        self.tracked_runs -= gone
        return True

    def _move(self, tally: _JobTally, from_status: str, to_status: str) -> bool:
        if not tally.counts.get(from_status):
            return False
        self._add(tally, from_status, -1)
        self._add(tally, to_status, 1)
        return True

    def _add(self, tally: _JobTally, status: str, delta: int) -> None:
        counts = tally.counts
        counts[status] = counts.get(status, 0) + delta
        self._add_aggregates(tally, status, delta)

    def _add_aggregates(self, tally: _JobTally, status: str, delta: int) -> None:
        totals = self.totals
        totals[status] = totals.get(status, 0) + delta
        if status in LIVE_STATUSES:
            key = (tally.target, status)
            by_target = self.live_by_target
            by_target[key] = by_target.get(key, 0) + delta
            if tally.uses:
                by_resource = self.live_by_resource
                for name in tally.uses:
                    key = (name, status)
                    by_resource[key] = by_resource.get(key, 0) + delta

    # -- exact recounts --------------------------------------------------------
    def _reset(self, state) -> None:
        self._state = state
        self._jobs.clear()
        self._dirty.clear()
        self._rescan_all = True
        self.totals.clear()
        self.live_by_target.clear()
        self.live_by_resource.clear()
        self.paused_jobs = 0
        self.tracked_runs = 0

    def _contribute(self, tally: _JobTally, sign: int) -> None:
        for status, count in tally.counts.items():
            if count:
                self._add_aggregates(tally, status, sign * count)
        self.tracked_runs += sign * tally.runs
        self.paused_jobs += sign * tally.paused

    def _recount(self, job_id: str, state) -> int:
        old = self._jobs.pop(job_id, None)
        if old is not None:
            self._contribute(old, -1)
        runs = state.runs.get(job_id) or ()
        job = state.jobs.get(job_id)
        if not runs and job is None:
            return 0
        tally = _JobTally(
            counts=dict(Counter(map(_STATUS, runs))),
            runs=len(runs),
            target=target_key(job.spec) if job is not None else "",
            uses=tuple(job.spec.uses) if job is not None else (),
            paused=bool(job is not None and job.paused),
        )
        self._jobs[job_id] = tally
        self._contribute(tally, 1)
        return len(runs)

    def sync(self, state, budget_runs: int = 20_000) -> bool:
        """Recount dirty jobs, up to about `budget_runs` runs; True once the tally is exact.

        Call it repeatedly, each time inside a fresh `raftlog.read()`, until it returns True:
        the lock is released between calls so applies are never held up for long.
        """
        if state is not self._state:
            self._reset(state)
        if self._rescan_all:
            self._rescan_all = False
            self._full_pass = True
            self.full_recounts += 1
            self._dirty = set(state.runs) | set(state.jobs) | set(self._jobs)
        spent = 0
        while self._dirty and spent < budget_runs:
            spent += self._recount(self._dirty.pop(), state) + 1
        self.recounted_runs += spent
        if self._dirty:
            return False
        if self._full_pass:
            self._full_pass = False
            self._run_count_offset = state.run_count - self.tracked_runs
            return True
        if state.run_count - self.tracked_runs != self._run_count_offset:
            # Runs appeared or vanished without an event naming their job: count everything.
            self._rescan_all = True
            return False
        return True
