"""The leader's run queue: hands queued runs to workers as fenced leases.

The queue lives only in the leader's memory for one epoch; it is rebuilt from the
replicated live-run index when the epoch starts and fed by apply notifications.
Its order is a policy (priority, then readiness, then arrival); the core decides
whether each grant is still valid.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from dataclasses import dataclass

import msgspec

from scheduler.core import results as ev
from scheduler.core.commands import (
    BackfillRuns,
    ClaimRuns,
    CompleteRuns,
    ExpireLeases,
    GrantLeases,
    RunRef,
    TriggerRun,
)
from scheduler.core.model import QUEUED, SECOND_US, JobSpec, Run
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.replication import RaftLog, ReplicationError

SHELL_TARGET = "shell"
# Not-ready heads looked past per pick, so a backing-off run cannot block the queue.
_LOOK_PAST = 256
OVERLAP_RECHECK_US = SECOND_US // 2
# Commands whose events can make a run leasable.
_QUEUEING_COMMANDS = (ClaimRuns, CompleteRuns, ExpireLeases, TriggerRun, BackfillRuns)


def target_key(spec: JobSpec) -> str:
    """Workers name what they run: a handler name, or "shell" for shell commands."""
    return SHELL_TARGET if spec.target_kind == SHELL_TARGET else spec.target


@dataclass(frozen=True)
class Granted:
    run: Run
    spec: JobSpec
    event: ev.LeaseGranted


class NotLeading(Exception):
    pass


class Dispatcher:
    def __init__(self, term: LeaderTerm, raftlog: RaftLog, lease_ttl_us: int, timeout_s: float):
        self._term = term
        self._raftlog = raftlog
        self._clock = term.clock
        self._lease_ttl_us = lease_ttl_us
        self._timeout_s = timeout_s
        self._heaps: dict[str, list[tuple[int, int, int, str, int]]] = {}
        self._arrivals = itertools.count()
        self._changed = threading.Condition()
        self.ready = threading.Event()

    # -- the epoch's loop: build, then keep the queue fed until deposed ------
    def __call__(self) -> None:
        self._raftlog.add_apply_listener(self._on_apply)
        try:
            with self._raftlog.read() as state:
                for job_id, instants in state.live_runs.items():
                    job = state.jobs.get(job_id)
                    for scheduled_us in instants:
                        run = state.get_run(job_id, scheduled_us)
                        if job is not None and run.status == QUEUED:
                            self._push(run, job.spec)
            self.ready.set()
            self._term.stopping.wait()
        finally:
            self._raftlog.remove_apply_listener(self._on_apply)
            with self._changed:
                self._changed.notify_all()

    def _push(self, run: Run, spec: JobSpec, not_before_us: int = 0) -> None:
        ready_us = max(run.not_before_us, run.effective_us or run.scheduled_us, not_before_us)
        entry = (-spec.priority, ready_us, next(self._arrivals), run.job_id, run.scheduled_us)
        with self._changed:
            heapq.heappush(self._heaps.setdefault(target_key(spec), []), entry)
            self._changed.notify_all()

    def _on_apply(self, command, result) -> None:
        """Tick thread, state lock held (re-entrant): enqueue what became leasable."""
        if not isinstance(command, _QUEUEING_COMMANDS) or not result.accepted:
            return
        state = self._raftlog._state  # we are inside the apply, under its lock
        for event in result.events:
            newly_queued = (isinstance(event, ev.RunClaimed) and event.status == QUEUED) or isinstance(
                event, ev.RunRetryScheduled
            )
            if newly_queued:
                run, job = state.get_run(event.job_id, event.scheduled_us), state.jobs.get(event.job_id)
                if run is not None and job is not None and run.status == QUEUED:
                    self._push(run, job.spec)

    # -- leasing -----------------------------------------------------------------
    def _pick(self, targets: list[str], max_runs: int, now_us: int) -> tuple[list[RunRef], int]:
        """Up to max_runs ready runs for these targets, best first; and the next ready instant."""
        picked: list[RunRef] = []
        next_ready_us = now_us + SECOND_US
        with self._changed:
            heaps = [self._heaps[t] for t in (targets or list(self._heaps)) if self._heaps.get(t)]
            deferred: list[tuple[list, tuple]] = []
            while len(picked) < max_runs and len(deferred) < _LOOK_PAST:
                best = min((h for h in heaps if h), key=lambda h: h[0], default=None)
                if best is None:
                    break
                entry = heapq.heappop(best)
                if entry[1] > now_us:
                    next_ready_us = min(next_ready_us, entry[1])
                    deferred.append((best, entry))
                    continue
                picked.append(RunRef(entry[3], entry[4]))
            for heap, entry in deferred:
                heapq.heappush(heap, entry)
        return picked, next_ready_us

    def lease(self, worker_id: str, targets: list[str], max_runs: int, wait_s: float) -> list[Granted]:
        if not self.ready.wait(timeout=self._timeout_s) or self._term.stopping.is_set():
            raise NotLeading("this node is not leading (or its queue is not ready yet)")
        deadline_us = self._clock.now_us() + int(wait_s * SECOND_US)
        while not self._term.stopping.is_set():
            now_us, mono_us = self._clock.read()
            picked, next_ready_us = self._pick(targets, max_runs, now_us)
            if picked:
                granted = self._grant(worker_id, picked, now_us, mono_us)
                if granted:
                    return granted
                continue
            if now_us >= deadline_us:
                return []
            with self._changed:
                self._changed.wait(min(deadline_us, next_ready_us) / SECOND_US - now_us / SECOND_US)
        raise NotLeading("leadership ended while waiting")

    def _grant(self, worker_id: str, picked: list[RunRef], now_us: int, mono_us: int) -> list[Granted]:
        command = GrantLeases(now_us, self._term.epoch, worker_id, self._lease_ttl_us, tuple(picked), mono_us)
        try:
            result = self._raftlog.submit(command, self._timeout_s)
        except ReplicationError:
            self._requeue(picked)  # outcome unknown: the core rejects a grant of a run already leased
            raise
        if not result.accepted:
            if result.rejection.code == "stale_epoch":
                self._term.depose(result.rejection.message)
                raise NotLeading(result.rejection.message)
            raise RuntimeError(f"grant rejected: {result.rejection.message}")
        granted: list[Granted] = []
        waiting: list[RunRef] = []
        with self._raftlog.read() as state:
            for ref, event in zip(picked, result.events):
                if isinstance(event, ev.LeaseGranted):
                    run = state.get_run(ref.job_id, ref.scheduled_us)
                    granted.append(Granted(run=_copy(run), spec=state.jobs[ref.job_id].spec, event=event))
                elif event.reason in ("backing_off", "overlap_queue"):
                    waiting.append(ref)
        # A run waiting for its job's previous run is looked at again a little later, not in a spin.
        self._requeue(waiting, now_us + OVERLAP_RECHECK_US)
        return granted

    def _requeue(self, refs: list[RunRef], not_before_us: int = 0) -> None:
        with self._raftlog.read() as state:
            for ref in refs:
                run, job = state.get_run(ref.job_id, ref.scheduled_us), state.jobs.get(ref.job_id)
                if run is not None and job is not None and run.status == QUEUED:
                    self._push(_copy(run), job.spec, not_before_us)


def _copy(run: Run) -> Run:
    return msgspec.structs.replace(run)
