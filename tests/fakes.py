"""Shared test helpers: a fake clock and builders for core commands.

Time inside commands is integer microseconds; the fake clock only hands out
`issued_at_us` values (increasing by default, backwards on request).

Replicated time moves only through the leader's epoch-stamped commands. The fake
leader's monotonic clock reads the same as its wall clock unless a test passes
`monotonic_us` (a wall-clock jump); builders of commands that do not move time
(heartbeats, completions, read barriers) first tick the leader's clock to their
instant with an AdvanceTime entry, which takes a log index of its own.

Job changes are the exception: nothing is appended before them. The proposer of
ApplyJobs (the API servicer) stamps its view of replicated time, so the builder
stamps the current `now_us`. A test that needs a job's slots to start at a given
instant moves replicated time there first (`advance`, or any command of the leader).
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import Future

import msgspec

from scheduler.core import Result, State, apply
from scheduler.core.clock import MAX_TIME_US, bounded_now_us
from scheduler.core.codec import encode_snapshot
from scheduler.core.commands import (
    EPOCH_COMMANDS,
    AdvanceTime,
    ApplyJobs,
    ClaimLeadership,
    ClaimRuns,
    Command,
    CompleteRuns,
    Completion,
    ExpireLeases,
    Expiry,
    ExtendLeases,
    GrantLeases,
    JobUpsert,
    LeaseRef,
    ReadBarrier,
    RunRef,
    SetJobPaused,
    SlotClaim,
)
from scheduler.core.jobs import MAX_PLAN_SKEW_US
from scheduler.core.model import SECOND_US, JobSpec

# 2023-11-14T22:13:20Z: a round, recent instant.
T0_US = 1_700_000_000 * SECOND_US
# Spec fields whose change makes a job's slots start afresh.
SCHEDULE_FIELDS = ("schedule", "timezone", "dst_gap", "dst_repeat")


class FakeClock:
    """Produces `issued_at_us` values: each `tick()` moves forward by `step_us`."""

    def __init__(self, start_us: int = T0_US, step_us: int = SECOND_US) -> None:
        self.now_us = start_us
        self.step_us = step_us

    def tick(self, step_us: int | None = None) -> int:
        self.now_us += self.step_us if step_us is None else step_us
        return self.now_us

    def back(self, by_us: int) -> int:
        """Move backwards, as a proposer with a slower clock would."""
        self.now_us -= by_us
        return self.now_us

    def set(self, now_us: int) -> int:
        self.now_us = now_us
        return now_us


def spec(job_id: str, schedule: str = "*/10 * * * * *", **fields) -> JobSpec:
    return JobSpec(id=job_id, schedule=schedule, **{"target_kind": "handler", "target": f"jobs.{job_id}", **fields})


def upsert(job_spec: JobSpec, expected_version: int = 0, next_due_us: int = 0) -> JobUpsert:
    return JobUpsert(spec=job_spec, expected_version=expected_version, next_due_us=next_due_us)


def claim(
    job_id: str,
    scheduled_us: int,
    next_due_us: int,
    spec_version: int = 1,
    status: str = "queued",
    reason: str = "",
    effective_us: int = 0,
) -> SlotClaim:
    return SlotClaim(job_id, scheduled_us, next_due_us, spec_version, status, reason, effective_us)


def run_ref(job_id: str, scheduled_us: int) -> RunRef:
    return RunRef(job_id, scheduled_us)


def lease_ref(job_id: str, scheduled_us: int, fencing_token: int) -> LeaseRef:
    return LeaseRef(job_id, scheduled_us, fencing_token)


def completion(lease: LeaseRef, outcome: str = "success", worker_id: str = "w1", **fields) -> Completion:
    return Completion(lease=lease, worker_id=worker_id, outcome=outcome, **fields)


def expiry(lease: LeaseRef, reason: str = "lease_expired", jitter_ppm: int = 0) -> Expiry:
    return Expiry(lease, reason, jitter_ppm)


def clock_of(state: State) -> tuple[int, int, int, int]:
    """Everything replicated time is made of: (now, anchor now, anchor monotonic, ignored jump)."""
    return state.now_us, state.clock_anchor_now_us, state.clock_anchor_mono_us, state.clock_ignored_us


def _all_but_position(state: State) -> bytes:
    return encode_snapshot(msgspec.structs.replace(state, applied_index=0))


def _restarted(state: State, command: Command) -> dict[str, int]:
    """Jobs whose slots an ApplyJobs would start afresh, each with the floor of its new cursor:
    its cursor if it has a new schedule, else the last run key retained under its id."""
    if not isinstance(command, ApplyJobs) or (command.request_id and command.request_id in state.request_results):
        return {}
    floors = {}
    for item in command.upserts:
        current = state.jobs.get(item.spec.id)
        if current is None:
            retained = state.runs.get(item.spec.id)
            floors[item.spec.id] = retained[-1].scheduled_us if retained else 0
        elif any(getattr(current.spec, name) != getattr(item.spec, name) for name in SCHEDULE_FIELDS):
            floors[item.spec.id] = current.cursor_us
    return floors


def apply_checking_time(state: State, command: Command, index: int) -> Result:
    """apply(), asserting the rules of replicated time on the way.

    Time never decreases and never passes MAX_TIME_US. Only an accepted ClaimLeadership
    (max(now, issued_at); the epoch clock anchored there, nothing ignored) and an accepted
    command of the current epoch (issued_at, clamped to the bound of the leader's monotonic
    clock) move it; every other
    command leaves the clock alone. A rejected command changes nothing but its log position
    (and the request memory, when a final rejection is remembered under its request id):
    not time, not the clock's anchor, not what was ignored, nothing else.

    An accepted ApplyJobs that starts a job's slots afresh was planned within
    MAX_PLAN_SKEW_US of replicated time, and the job's cursor is max(floor, min(issued_at,
    now)): the proposer's view of replicated time, never ahead of it.
    """
    before = clock_of(state)
    restarted = _restarted(state, command)
    before_us, anchor_now_us, anchor_mono_us, _ = before
    before_bytes = _all_but_position(state)
    requests = (dict(state.request_results), list(state.request_fifo))
    bound_us = (
        min(bounded_now_us(state, command.monotonic_us), MAX_TIME_US) if isinstance(command, EPOCH_COMMANDS) else 0
    )
    result = apply(state, command, index)
    name = type(command).__name__
    assert state.now_us >= before_us, f"{name} moved replicated time backwards"
    assert state.now_us <= max(before_us, MAX_TIME_US), f"{name} moved replicated time past year 9999"
    if not result.accepted:
        assert clock_of(state) == before, f"{name} rejected ({result.rejection.code}) but changed the clock"
        remembered = msgspec.structs.replace(state, request_results=requests[0], request_fifo=requests[1])
        assert before_bytes in (_all_but_position(state), _all_but_position(remembered)), (
            f"{name} rejected ({result.rejection.code}) but changed more than its log position"
        )
    elif isinstance(command, ClaimLeadership):
        now_us = max(before_us, min(command.issued_at_us, MAX_TIME_US))
        assert clock_of(state) == (now_us, now_us, command.monotonic_us, 0), f"{name}: clock {clock_of(state)}"
    elif isinstance(command, EPOCH_COMMANDS):
        moved_us = max(before_us, min(command.issued_at_us, bound_us))
        assert state.now_us == moved_us, f"{name}: time {state.now_us}, expected {moved_us}"
        if command.issued_at_us > bound_us:
            # A clamped reading is recorded and does not re-anchor the epoch clock.
            expected = (moved_us, anchor_now_us, anchor_mono_us, command.issued_at_us - bound_us)
        else:
            expected = (moved_us, moved_us, max(anchor_mono_us, command.monotonic_us), 0)
        assert clock_of(state) == expected, f"{name}: clock {clock_of(state)}, expected {expected}"
    else:
        assert clock_of(state) == before, f"{name} moved replicated time"
    if restarted and result.accepted:
        assert abs(command.issued_at_us - before_us) <= MAX_PLAN_SKEW_US, f"{name}: a far-off plan was accepted"
        start_us = min(command.issued_at_us, before_us)
        for job_id, floor_us in restarted.items():
            assert state.jobs[job_id].cursor_us == max(floor_us, start_us), f"{name}: cursor of {job_id!r}"
    return result


class Core:
    """A State plus a log index counter and a fake clock: apply commands as a replica would."""

    def __init__(self, clock: FakeClock | None = None, state: State | None = None) -> None:
        self.clock = clock or FakeClock()
        self.state = state or State()
        self.index = self.state.applied_index

    def apply(self, command: Command, index: int | None = None) -> Result:
        self.index = self.index + 1 if index is None else index
        return apply_checking_time(self.state, command, self.index)

    def advance(self, to_us: int) -> None:
        """The leader's clock tick: replicated time moves only through epoch-stamped commands.

        The fake leader's monotonic clock equals its wall clock, so a tick is never clamped;
        tests of clock jumps pass `monotonic_us` explicitly instead. No entry is appended
        when there is no leader or when replicated time is already there.
        """
        if self.state.epoch >= 1 and to_us > self.state.now_us:
            self.advance_time(issued_at_us=to_us)

    def advance_time(
        self, issued_at_us: int | None = None, monotonic_us: int | None = None, epoch: int | None = None
    ) -> Result:
        """One AdvanceTime entry, always appended (whatever its effect)."""
        issued = self.clock.tick() if issued_at_us is None else issued_at_us
        return self.apply(
            AdvanceTime(
                issued_at_us=issued,
                epoch=self.state.epoch if epoch is None else epoch,
                monotonic_us=issued if monotonic_us is None else monotonic_us,
            )
        )

    def _at(self, issued_at_us: int | None) -> int:
        """A non-leader command's time: the leader's clock has ticked to it first."""
        issued = self.clock.tick() if issued_at_us is None else issued_at_us
        self.advance(issued)
        return issued

    # -- builders that take their time from the clock -----------------------
    def lead(
        self, node_id: str = "n1", term: int = 1, issued_at_us: int | None = None, monotonic_us: int | None = None
    ) -> Result:
        issued = self.clock.tick() if issued_at_us is None else issued_at_us
        mono = issued if monotonic_us is None else monotonic_us
        return self.apply(ClaimLeadership(issued_at_us=issued, node_id=node_id, term=term, monotonic_us=mono))

    def apply_jobs(
        self,
        upserts: tuple[JobUpsert, ...] = (),
        removals: tuple[str, ...] = (),
        request_id: str = "",
        author: str = "alice",
        issued_at_us: int | None = None,
    ) -> Result:
        """ApplyJobs stamped, by default, as the API servicer stamps it: with replicated time.

        The proposer's wall clock moves on (the fake clock ticks) but is not what is stamped,
        and no AdvanceTime entry is appended. Before any epoch there is no replicated time
        to go by and the servicer refuses to plan; the fake then stamps its wall clock, so a
        job added before a leader is refused as a plan far from replicated time (stale_plan)
        instead of silently owing slots from the epoch of 1970.
        """
        wall_us = self.clock.tick()
        if issued_at_us is not None:
            issued = issued_at_us
        else:
            issued = self.state.now_us if self.state.epoch >= 1 else wall_us
        return self.apply(
            ApplyJobs(issued_at_us=issued, author=author, request_id=request_id, upserts=upserts, removals=removals)
        )

    def pause(self, job_id: str, paused: bool = True, request_id: str = "", reason: str = "maintenance") -> Result:
        return self.apply(
            SetJobPaused(
                issued_at_us=self.clock.tick(),
                job_id=job_id,
                paused=paused,
                author="bob",
                reason=reason,
                request_id=request_id,
            )
        )

    def claim_runs(
        self,
        *claims: SlotClaim,
        epoch: int | None = None,
        issued_at_us: int | None = None,
        monotonic_us: int | None = None,
    ) -> Result:
        """ClaimRuns; by default the fake leader claims once the batch's latest slot is due.

        The core only claims slots at or before replicated time, so without an explicit
        `issued_at_us` the leader's clock moves on to the latest scheduled instant first.
        """
        if issued_at_us is None:
            issued = self.clock.tick()
            latest_us = max((c.scheduled_us for c in claims), default=issued)
            if latest_us > issued:
                issued = self.clock.set(latest_us)
        else:
            issued = issued_at_us
        epoch = self.state.epoch if epoch is None else epoch
        mono = issued if monotonic_us is None else monotonic_us
        return self.apply(ClaimRuns(issued_at_us=issued, epoch=epoch, claims=claims, monotonic_us=mono))

    # -- execution: leases, heartbeats, completions, expiries --------------
    def grant(
        self,
        *refs: RunRef,
        worker_id: str = "w1",
        lease_ttl_us: int = 30 * SECOND_US,
        epoch: int | None = None,
        issued_at_us: int | None = None,
        index: int | None = None,
        monotonic_us: int | None = None,
    ) -> Result:
        """GrantLeases; `index` places the entry at a chosen log index (the fencing token)."""
        issued = self.clock.tick() if issued_at_us is None else issued_at_us
        return self.apply(
            GrantLeases(
                issued_at_us=issued,
                epoch=self.state.epoch if epoch is None else epoch,
                worker_id=worker_id,
                lease_ttl_us=lease_ttl_us,
                grants=refs,
                monotonic_us=issued if monotonic_us is None else monotonic_us,
            ),
            index,
        )

    def extend(self, *leases: LeaseRef, issued_at_us: int | None = None) -> Result:
        return self.apply(ExtendLeases(issued_at_us=self._at(issued_at_us), leases=leases))

    def complete(self, *completions: Completion, issued_at_us: int | None = None) -> Result:
        return self.apply(CompleteRuns(issued_at_us=self._at(issued_at_us), completions=completions))

    def expire(
        self,
        *expiries: Expiry,
        epoch: int | None = None,
        issued_at_us: int | None = None,
        monotonic_us: int | None = None,
    ) -> Result:
        issued = self.clock.tick() if issued_at_us is None else issued_at_us
        return self.apply(
            ExpireLeases(
                issued_at_us=issued,
                epoch=self.state.epoch if epoch is None else epoch,
                expiries=expiries,
                monotonic_us=issued if monotonic_us is None else monotonic_us,
            )
        )

    def barrier(self, issued_at_us: int | None = None) -> Result:
        return self.apply(ReadBarrier(issued_at_us=self._at(issued_at_us)))


class ImmediateRaftLog:
    """Just enough of RaftLog for the leader loops and the observers: a state under a lock, apply
    listeners, and entries that apply at once, in order."""

    # Why the node stopped applying ("" while it applies), as RaftLog.halted.
    halted = ""

    def __init__(self, state: State | None = None, index: int = 0) -> None:
        self._state = state if state is not None else State()
        self.index = index
        self._lock = threading.RLock()
        self._listeners = []
        self.claim_entries = 0

    def apply(self, command) -> Result:
        with self._lock:
            self.index += 1
            self.claim_entries += isinstance(command, ClaimRuns)
            result = apply(self._state, command, self.index)
            for listener in list(self._listeners):
                listener(command, result, self._state)
            return result

    def propose(self, command) -> Future:
        future = Future()
        future.set_result(self.apply(command))
        return future

    @contextlib.contextmanager
    def read(self):
        with self._lock:
            yield self._state

    def add_apply_listener(self, listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def remove_apply_listener(self, listener) -> None:
        with self._lock:
            self._listeners.remove(listener)
