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
from scheduler.core.state import State
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.replication import RaftLog, ReplicationError

SHELL_TARGET = "shell"
PRIORITY_STEP_US = 60 * SECOND_US
OVERLAP_RECHECK_US = SECOND_US // 2
# Commands whose events can make a run leasable.
_QUEUEING_COMMANDS = (ClaimRuns, CompleteRuns, ExpireLeases, TriggerRun, BackfillRuns)


def target_key(spec: JobSpec) -> str:
    """Workers name what they run: a handler name, or "shell" for shell commands."""
    return SHELL_TARGET if spec.target_kind == SHELL_TARGET else spec.target


class _Entry(msgspec.Struct, frozen=True, gc=False):
    """A queued run. A Struct without GC tracking: a leader can queue a million of them, and a
    dataclass (with its __dict__) cost 3x the memory and two tracked objects each, all walked
    by every full collection with the GIL held."""

    ready_us: int
    priority: int
    arrival: int
    target: str
    job_id: str
    scheduled_us: int

    @property
    def rank_us(self) -> int:
        """Each priority point is a head start of PRIORITY_STEP_US: critical jobs jump the mass,
        and a low-priority run that has waited long enough outranks newer high-priority ones
        (aging), so nothing starves. Equal priorities are first come, first served."""
        return self.ready_us - self.priority * PRIORITY_STEP_US


@dataclass(frozen=True)
class Granted:
    run: Run
    spec: JobSpec
    event: ev.LeaseGranted


class NotLeading(Exception):
    pass


# Queued runs looked at per hold of the state lock while a new epoch builds its queue (~5 ms).
REBUILD_CHUNK_RUNS = 2_000


class Dispatcher:
    def __init__(self, term: LeaderTerm, raftlog: RaftLog, lease_ttl_us: int, timeout_s: float):
        self._term = term
        self._raftlog = raftlog
        self._clock = term.clock
        self._lease_ttl_us = lease_ttl_us
        self._timeout_s = timeout_s
        # Runs not yet due (spread herds, retry backoff), by the instant they become due.
        self._pending: list[tuple[int, int, _Entry]] = []
        # Due runs per target, by rank: readiness minus a head start for priority.
        self._ready: dict[str, list[tuple[int, int, _Entry]]] = {}
        self._arrivals = itertools.count()
        self._changed = threading.Condition()
        self.ready = threading.Event()

    # -- the epoch's loop: build, then keep the queue fed until deposed ------
    def __call__(self) -> None:
        self._raftlog.add_apply_listener(self._on_apply)
        try:
            self._queue_live_runs()
            self.ready.set()
            self._term.stopping.wait()
        finally:
            self._raftlog.remove_apply_listener(self._on_apply)
            with self._changed:
                self._changed.notify_all()

    def _queue_live_runs(self) -> None:
        """Queue every queued run, REBUILD_CHUNK_RUNS per hold of the state lock.

        The tick thread applies entries under that lock: a new leader that held it while it
        walked a million queued runs stalled its own Raft for seconds, lost its majority, and
        the next leader did the same (measured: 22 elections in a minute in `bench scale`).
        A run that changes between chunks is read as it is now; one queued meanwhile is also
        pushed by _on_apply, and a duplicate is refused by the core at grant time."""
        with self._raftlog.read() as state:
            live = [(job_id, list(instants)) for job_id, instants in state.live_runs.items()]
        keys = ((job_id, scheduled_us) for job_id, instants in live for scheduled_us in instants)
        while chunk := list(itertools.islice(keys, REBUILD_CHUNK_RUNS)):
            if self._term.stopping.is_set():
                return
            with self._raftlog.read() as state:
                entries = [self._queued_entry(state, job_id, scheduled_us) for job_id, scheduled_us in chunk]
            self._push(entries)

    def _queued_entry(self, state: State, job_id: str, scheduled_us: int, not_before_us: int = 0) -> _Entry | None:
        """The queue entry of a run that is still QUEUED (its job still there); None otherwise."""
        run, job = state.get_run(job_id, scheduled_us), state.jobs.get(job_id)
        if run is None or job is None or run.status != QUEUED:
            return None
        spec = job.spec
        ready_us = max(run.not_before_us, run.effective_us or run.scheduled_us, not_before_us)
        return _Entry(ready_us, spec.priority, next(self._arrivals), target_key(spec), run.job_id, run.scheduled_us)

    def _push(self, entries: list[_Entry | None]) -> None:
        """Queue entries (skipping Nones) with one lock hold and one wake-up (a backfill queues
        10,000 at once)."""
        entries = [entry for entry in entries if entry is not None]
        if not entries:
            return
        with self._changed:
            for entry in entries:
                heapq.heappush(self._pending, (entry.ready_us, entry.arrival, entry))
            self._changed.notify_all()

    def _promote_ready(self, now_us: int) -> None:
        """Move runs whose time has come from the pending heap to their target's ready queue."""
        while self._pending and self._pending[0][0] <= now_us:
            _, _, entry = heapq.heappop(self._pending)
            heapq.heappush(self._ready.setdefault(entry.target, []), (entry.rank_us, entry.arrival, entry))

    def queue_depths(self) -> dict[tuple[str, str], int]:
        """(target, "ready" | "pending") -> queued entries; an upper bound (stale entries are
        dropped only when picked). Call without the state lock held."""
        with self._changed:
            depths = {(target, "ready"): len(queue) for target, queue in self._ready.items()}
            for _, _, entry in self._pending:
                depths[(entry.target, "pending")] = depths.get((entry.target, "pending"), 0) + 1
        return depths

    def _on_apply(self, command, result) -> None:
        """Tick thread, state lock held (re-entrant): enqueue what became leasable."""
        if not isinstance(command, _QUEUEING_COMMANDS) or not result.accepted:
            return
        state = self._raftlog._state  # we are inside the apply, under its lock
        self._push([
            self._queued_entry(state, event.job_id, event.scheduled_us)
            for event in result.events
            if (isinstance(event, ev.RunClaimed) and event.status == QUEUED) or isinstance(event, ev.RunRetryScheduled)
        ])

    # -- leasing -----------------------------------------------------------------
    def _pick(self, targets: list[str], max_runs: int, now_us: int) -> tuple[list[RunRef], int]:
        """Up to max_runs ready runs for these targets, best rank first; and the next ready instant."""
        picked: list[RunRef] = []
        with self._changed:
            self._promote_ready(now_us)
            queues = [self._ready[t] for t in (targets or list(self._ready)) if self._ready.get(t)]
            while len(picked) < max_runs:
                best = min((q for q in queues if q), key=lambda q: q[0], default=None)
                if best is None:
                    break
                entry = heapq.heappop(best)[2]
                picked.append(RunRef(entry.job_id, entry.scheduled_us))
            next_ready_us = self._pending[0][0] if self._pending else now_us + SECOND_US
        return picked, min(next_ready_us, now_us + SECOND_US)

    def lease(self, worker_id: str, targets: list[str], max_runs: int, wait_s: float) -> list[Granted]:
        if not self.ready.wait(timeout=self._timeout_s) or self._term.stopping.is_set():
            raise NotLeading("this node is not leading (or its queue is not ready yet)")
        deadline_us = self._clock.now_us() + int(wait_s * SECOND_US)
        while not self._term.stopping.is_set():
            now_us, mono_us = self._clock.read()
            picked, next_ready_us = self._pick(targets, max_runs, now_us)
            if picked:
                granted = self._grant(worker_id, picked, now_us, mono_us)
                if granted or now_us >= deadline_us:
                    # A queue of runs that cannot start (budget full, backing off) is not worked
                    # through one grant entry at a time past the caller's wait.
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
                elif event.reason in ("backing_off", "overlap_queue") or event.reason.startswith("resource_"):
                    waiting.append(ref)  # backpressure: delayed, never dropped
        # A run waiting for its job's previous run is looked at again a little later, not in a spin.
        self._requeue(waiting, now_us + OVERLAP_RECHECK_US)
        return granted

    def _requeue(self, refs: list[RunRef], not_before_us: int = 0) -> None:
        with self._raftlog.read() as state:
            entries = [self._queued_entry(state, ref.job_id, ref.scheduled_us, not_before_us) for ref in refs]
        self._push(entries)


def _copy(run: Run) -> Run:
    return msgspec.structs.replace(run)
