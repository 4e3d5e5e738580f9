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
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

import msgspec

from scheduler.core import results as ev
from scheduler.core.commands import (
    ApplyJobs,
    BackfillRuns,
    ClaimRuns,
    CompleteRuns,
    ExpireLeases,
    GrantLeases,
    KillClass,
    RunRef,
    TriggerRun,
)
from scheduler.core.model import QUEUED, SECOND_US, JobSpec, Run
from scheduler.core.state import State
from scheduler.core.vocabulary import LeaseRefusal, RejectionCode, TargetKind
from scheduler.leader.budget import admit, room
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.replication import RaftLog, ReplicationError

SHELL_TARGET = TargetKind.SHELL
HTTP_TARGET = TargetKind.HTTP
PRIORITY_STEP_US = 60 * SECOND_US
OVERLAP_RECHECK_US = SECOND_US // 2
# Refusals that only delay a run (`resource_busy:NAME` by its part before the colon).
_WAITING = frozenset(
    {
        LeaseRefusal.BACKING_OFF,
        LeaseRefusal.OVERLAP_QUEUE,
        LeaseRefusal.OVERLAP_FORBID,
        LeaseRefusal.RESOURCE_BUSY,
        LeaseRefusal.RESOURCE_RATE,
    }
)
# Commands whose events can make a run leasable.
_QUEUEING_COMMANDS = (ClaimRuns, CompleteRuns, ExpireLeases, TriggerRun, BackfillRuns)
# Commands that can end a lease or change a budget: runs held for room are looked at again.
_RELEASING_COMMANDS = (CompleteRuns, ExpireLeases, ApplyJobs, ClaimRuns, TriggerRun, KillClass)


def target_key(spec: JobSpec) -> str:
    """Workers name what they run: a handler name, or "shell:OWNER" / "http:OWNER" for the shell
    commands or HTTP requests of one owner, so a worker token can be scoped to those owners."""
    if spec.target_kind in (SHELL_TARGET, HTTP_TARGET):
        return f"{spec.target_kind}:{spec.owner}"
    return spec.target


def leased_queues(targets: list[str], queued: list[str]) -> list[str]:
    """The queues a Lease for `targets` draws from (`queued`: the targets with runs); no targets
    means every queue but the HTTP ones (a client written before HTTP targets existed could not
    run them: a worker asks for "http"), "shell" every owner's shell commands, "http" every
    owner's HTTP requests."""
    if not targets:
        return [q for q in queued if not q.startswith(HTTP_TARGET + ":")]
    names = [t for t in targets if t not in (SHELL_TARGET, HTTP_TARGET)]
    for kind in (SHELL_TARGET, HTTP_TARGET):
        if kind in targets:
            names += [q for q in queued if q.startswith(kind + ":")]
    return list(dict.fromkeys(names))


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
    uses: tuple[str, ...] = ()  # the job's resources when queued: whether to plan its budget

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
# Due runs moved to the ready queues per hold of the queue lock (~4 ms). Moving a whole rebuilt
# queue of a million runs at once held that lock for 2 s (more on a loaded machine), and the
# tick thread, waiting for it to hand over a claim, stalled Raft: elections every 3 s.
PROMOTE_CHUNK_RUNS = 2_000
# The epoch's loop looks at its stop signal at least this often (a deposed term also wakes it).
WAKER_POLL_S = 1.0


class Dispatcher:
    def __init__(self, term: LeaderTerm, raftlog: RaftLog, lease_ttl_us: int, timeout_s: float):
        self._term = term
        self._raftlog = raftlog
        self._clock = term.clock
        self._lease_ttl_us = lease_ttl_us
        self._timeout_s = timeout_s
        # Runs the tick thread queued, taken into the heaps by the next pick: the tick thread
        # never waits for the queue lock to hand a run over.
        self._inbox: deque[_Entry] = deque()
        # Runs not yet due (spread herds, retry backoff), by the instant they become due.
        self._pending: list[tuple[int, int, _Entry]] = []
        self._pending_per_target: Counter[str] = Counter()
        # Due runs per target, by rank: readiness minus a head start for priority.
        self._ready: dict[str, list[tuple[int, int, _Entry]]] = {}
        # Due runs held back for a full budget, per resource, by rank; released as room appears.
        self._held: dict[str, list[tuple[int, int, _Entry]]] = {}
        self._held_per_target: Counter[str] = Counter()
        self._held_until_us = 0  # when a rate window next frees room for a held run (0: no such wait)
        # Runs admitted per resource whose grants are not applied yet: concurrent Lease calls
        # plan against the same state, so each counts the others' admissions as started.
        self._budget_lock = threading.Lock()
        self._starting: Counter[str] = Counter()
        self._arrivals = itertools.count()
        self._changed = threading.Condition()
        # Set by the tick thread when waiting Lease calls should look again; the epoch's loop
        # takes the queue lock to wake them, so the tick thread never waits for it.
        self._wake = threading.Event()
        self.ready = threading.Event()

    # -- the epoch's loop: build, then keep the queue fed until deposed ------
    def __call__(self) -> None:
        self._raftlog.add_apply_listener(self._on_apply)
        try:
            self._queue_live_runs()
            self.ready.set()
            self._wake_lease_calls()
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
        spec = job.body  # the id is not needed: no full spec rebuilt per queued run
        ready_us = max(run.not_before_us, run.effective_us or run.scheduled_us, not_before_us)
        return _Entry(
            ready_us, spec.priority, next(self._arrivals), target_key(spec), run.job_id, run.scheduled_us, spec.uses
        )

    def _push(self, entries: list[_Entry | None]) -> None:
        """Queue entries (skipping Nones) with one lock hold and one wake-up (a backfill queues
        10,000 at once). Not on the tick thread: it hands runs over through the inbox."""
        entries = [entry for entry in entries if entry is not None]
        if not entries:
            return
        with self._changed:
            self._to_pending(entries)
            self._changed.notify_all()

    def _to_pending(self, entries) -> None:
        """With `_changed` held."""
        for entry in entries:
            heapq.heappush(self._pending, (entry.ready_us, entry.arrival, entry))
            self._pending_per_target[entry.target] += 1

    def _take_inbox(self) -> None:
        """With `_changed` held: queue what the tick thread handed over."""
        inbox = self._inbox
        self._to_pending(inbox.popleft() for _ in range(len(inbox)))

    def _promote_ready(self, now_us: int) -> None:
        """Move runs whose time has come from the pending heap to their target's ready queue,
        at most PROMOTE_CHUNK_RUNS per call (earliest first); a pick that finds nothing ready
        for its targets comes back at once for the next chunk. So priority ranks the runs that
        are ready: behind a backlog of more due runs than a chunk, a high-priority run waits for
        the chunks in front of it to move (a few milliseconds each), not for them to run."""
        pending, counts = self._pending, self._pending_per_target
        for _ in range(PROMOTE_CHUNK_RUNS):
            if not pending or pending[0][0] > now_us:
                return
            _, _, entry = heapq.heappop(pending)
            counts[entry.target] -= 1
            heapq.heappush(self._ready.setdefault(entry.target, []), (entry.rank_us, entry.arrival, entry))

    def queue_depths(self) -> dict[tuple[str, str], int]:
        """(target, "ready" | "pending" | "held") -> queued entries; an upper bound (stale entries
        are dropped only when picked). Call without the state lock held."""
        with self._changed:
            self._take_inbox()
            depths = {(target, "ready"): len(queue) for target, queue in self._ready.items()}
            for stage, counts in (("pending", self._pending_per_target), ("held", self._held_per_target)):
                depths.update(((target, stage), count) for target, count in counts.items() if count)
        return depths

    def _on_apply(self, command, result, state: State) -> None:
        """Tick thread, state lock held (re-entrant): hand over what became leasable. Raft waits
        for this, so it takes no lock: it appends to the inbox and asks for a wake-up."""
        if not result.accepted:
            return
        # A waiting Lease call releases what has room now.
        wake = bool(self._held) and isinstance(command, _RELEASING_COMMANDS)
        if isinstance(command, _QUEUEING_COMMANDS):
            queued = [
                self._queued_entry(state, event.job_id, event.scheduled_us)
                for event in result.all_events()
                if (isinstance(event, ev.RunClaimed) and event.status == QUEUED)
                or isinstance(event, ev.RunRetryScheduled)
            ]
            queued = [entry for entry in queued if entry is not None]
            self._inbox.extend(queued)
            wake = wake or bool(queued)
        if wake:
            self._wake.set()

    def _wake_lease_calls(self) -> None:
        """The epoch's loop once the queue is built: wake waiting Lease calls whenever the tick
        thread asks (_wake), until the epoch ends."""
        stopping = self._term.stopping
        self._term.wakes_on_depose.append(self._wake)
        while not stopping.is_set():
            if self._wake.wait(timeout=WAKER_POLL_S):
                self._wake.clear()
                with self._changed:
                    self._changed.notify_all()

    # -- leasing -----------------------------------------------------------------
    def _pick(self, targets: list[str], max_runs: int, now_us: int) -> tuple[list[_Entry], int]:
        """Up to max_runs ready runs for these targets, best rank first; and the next ready instant."""
        picked: list[_Entry] = []
        with self._changed:
            self._take_inbox()
            self._promote_ready(now_us)
            queues = [self._ready[t] for t in leased_queues(targets, list(self._ready)) if self._ready.get(t)]
            if len(queues) == 1:  # one target (the usual worker): its own order, without comparing queues
                queue = queues[0]
                while len(picked) < max_runs and queue:
                    picked.append(heapq.heappop(queue)[2])
            while len(picked) < max_runs:
                best = min((q for q in queues if q), key=lambda q: q[0], default=None)
                if best is None:
                    break
                picked.append(heapq.heappop(best)[2])
            next_ready_us = self._pending[0][0] if self._pending else now_us + SECOND_US
        return picked, min(next_ready_us, now_us + SECOND_US)

    def lease(self, worker_id: str, targets: list[str], max_runs: int, wait_s: float) -> list[Granted]:
        if not self.ready.wait(timeout=self._timeout_s) or self._term.stopping.is_set():
            raise NotLeading("this node is not leading (or its queue is not ready yet)")
        deadline_us = self._clock.now_us() + int(wait_s * SECOND_US)
        while not self._term.stopping.is_set():
            now_us, mono_us = self._clock.read()
            if self._held:
                self._release_held(now_us)
            picked, next_ready_us = self._pick(targets, max_runs, now_us)
            picked = self._without_retargeted(picked)
            if picked:
                admitted, starting = self._hold_without_room(picked, now_us)
                if not admitted:
                    continue  # every pick waits for a budget: the rest of the queue may not
                try:
                    granted = self._grant(
                        worker_id, [RunRef(e.job_id, e.scheduled_us) for e in admitted], now_us, mono_us
                    )
                finally:
                    if starting:
                        with self._budget_lock:
                            self._starting -= starting  # applied (or not): state counts them now
                if granted or now_us >= deadline_us:
                    # A queue of runs that cannot start (backing off, a budget the core saw full)
                    # is not worked through one grant entry at a time past the caller's wait.
                    return granted
                continue
            if now_us >= deadline_us:
                return []
            wake_us = min(deadline_us, next_ready_us, self._held_until_us or deadline_us)
            with self._changed:
                self._changed.wait(max(0, wake_us - now_us) / SECOND_US)
        raise NotLeading("leadership ended while waiting")

    def watch_depose(self, event: threading.Event) -> Callable[[], None]:
        """Set `event` when this epoch ends (at once if it has ended): a worker session waiting
        for credits, outside any `lease` call, ends with the epoch. Returns the unwatch."""
        wakes = self._term.wakes_on_depose
        wakes.append(event)
        if self._term.stopping.is_set():
            event.set()

        def unwatch() -> None:
            try:
                wakes.remove(event)
            except ValueError:
                pass

        return unwatch

    def _without_retargeted(self, picked: list[_Entry]) -> list[_Entry]:
        """The picked runs whose job still runs the target they were queued under; the others go
        back to the queue under their job's target now. A run queued as one owner's shell command
        (or a handler) whose job has since moved is never handed to a worker that asked for the old one."""
        if not picked:
            return picked
        with self._raftlog.read() as state:
            moved = [
                e for e in picked if (job := state.jobs.get(e.job_id)) is not None and target_key(job.body) != e.target
            ]
        if not moved:
            return picked
        self._requeue([RunRef(e.job_id, e.scheduled_us) for e in moved])
        gone = {id(e) for e in moved}
        return [e for e in picked if id(e) not in gone]

    # -- budgets -------------------------------------------------------------------
    def _hold_without_room(self, picked: list[_Entry], now_us: int) -> tuple[list[_Entry], Counter[str]]:
        """The picked runs whose budgets have room, in order, and the starts they reserve per
        resource (released by the caller once the grant is applied); the others are held."""
        if not any(entry.uses for entry in picked):
            return picked, Counter()
        with self._budget_lock, self._raftlog.read() as state:
            uses = [_uses_now(state, entry) for entry in picked]
            verdicts = admit(state, uses, now_us, self._starting)
            starting = Counter(name for names, full in zip(uses, verdicts) if not full for name in names)
            self._starting += starting
            frees_at = [room(state, name, now_us, self._starting[name])[1] for name in set(verdicts) if name]
        with self._changed:
            for entry, full in zip(picked, verdicts):
                if full:
                    heapq.heappush(self._held.setdefault(full, []), (entry.rank_us, entry.arrival, entry))
                    self._held_per_target[entry.target] += 1
            self._note_rate_wait(frees_at)
        return [entry for entry, full in zip(picked, verdicts) if not full], starting

    def _release_held(self, now_us: int) -> None:
        """Move as many held runs as each budget has room for, best rank first, back to ready."""
        with self._changed:
            names = list(self._held)
        with self._budget_lock, self._raftlog.read() as state:
            rooms = {name: room(state, name, now_us, self._starting[name]) for name in names}
        with self._changed:
            self._held_until_us = 0
            for name, (starts_left, frees_at_us) in rooms.items():
                held = self._held.get(name, [])
                while held and starts_left > 0:
                    entry = heapq.heappop(held)[2]
                    self._held_per_target[entry.target] -= 1
                    heapq.heappush(self._ready.setdefault(entry.target, []), (entry.rank_us, entry.arrival, entry))
                    starts_left -= 1
                if not held:
                    self._held.pop(name, None)
                elif frees_at_us:
                    self._note_rate_wait([frees_at_us])

    def _note_rate_wait(self, frees_at: list[int]) -> None:
        """With `_changed` held: wake waiting Lease calls when a rate window frees room."""
        for at_us in frees_at:
            if at_us and (not self._held_until_us or at_us < self._held_until_us):
                self._held_until_us = at_us

    def _grant(self, worker_id: str, picked: list[RunRef], now_us: int, mono_us: int) -> list[Granted]:
        command = GrantLeases(now_us, self._term.epoch, worker_id, self._lease_ttl_us, tuple(picked), mono_us)
        try:
            result = self._raftlog.submit(command, self._timeout_s)
        except ReplicationError:
            self._requeue(picked)  # outcome unknown: the core rejects a grant of a run already leased
            raise
        if not result.accepted:
            if result.rejection.code == RejectionCode.STALE_EPOCH:
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
                elif event.reason.partition(":")[0] in _WAITING:
                    waiting.append(ref)  # backpressure: delayed, never dropped
        # A run waiting for its job's previous run is looked at again a little later, not in a spin.
        self._requeue(waiting, now_us + OVERLAP_RECHECK_US)
        return granted

    def _requeue(self, refs: list[RunRef], not_before_us: int = 0) -> None:
        with self._raftlog.read() as state:
            entries = [self._queued_entry(state, ref.job_id, ref.scheduled_us, not_before_us) for ref in refs]
        self._push(entries)


def _uses_now(state: State, entry: _Entry) -> tuple[str, ...]:
    job = state.jobs.get(entry.job_id)
    return job.body.uses if job is not None else ()


def _copy(run: Run) -> Run:
    return msgspec.structs.replace(run)
