"""Shared test helpers: a fake clock and builders for core commands.

Time inside commands is integer microseconds; the fake clock only hands out
`issued_at_us` values (increasing by default, backwards on request).
"""

from __future__ import annotations

from scheduler.core import Result, State, apply
from scheduler.core.commands import (
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
from scheduler.core.model import SECOND_US, JobSpec

# 2023-11-14T22:13:20Z: a round, recent instant.
T0_US = 1_700_000_000 * SECOND_US


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
    return JobSpec(id=job_id, schedule=schedule, target_kind="handler", target=f"jobs.{job_id}", **fields)


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


class Core:
    """A State plus a log index counter and a fake clock: apply commands as a replica would."""

    def __init__(self, clock: FakeClock | None = None, state: State | None = None) -> None:
        self.clock = clock or FakeClock()
        self.state = state or State()
        self.index = self.state.applied_index

    def apply(self, command: Command, index: int | None = None) -> Result:
        self.index = self.index + 1 if index is None else index
        return apply(self.state, command, self.index)

    def advance(self, to_us: int) -> None:
        """The leader's clock tick: replicated time moves only through epoch-stamped commands.

        The fake leader's monotonic clock equals its wall clock, so a tick is never clamped;
        tests of clock jumps pass `monotonic_us` explicitly instead.
        """
        if self.state.epoch >= 1 and to_us > self.state.now_us:
            self.apply(AdvanceTime(issued_at_us=to_us, epoch=self.state.epoch, monotonic_us=to_us))

    def _at(self, issued_at_us: int | None) -> int:
        """A non-leader command's time: the leader's clock has ticked to it first."""
        issued = self.clock.tick() if issued_at_us is None else issued_at_us
        self.advance(issued)
        return issued

    # -- builders that take their time from the clock -----------------------
    def lead(self, node_id: str = "n1", term: int = 1) -> Result:
        issued = self.clock.tick()
        return self.apply(ClaimLeadership(issued_at_us=issued, node_id=node_id, term=term, monotonic_us=issued))

    def apply_jobs(
        self,
        upserts: tuple[JobUpsert, ...] = (),
        removals: tuple[str, ...] = (),
        request_id: str = "",
        author: str = "alice",
        issued_at_us: int | None = None,
    ) -> Result:
        issued = self.clock.tick() if issued_at_us is None else issued_at_us
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

    def claim_runs(self, *claims: SlotClaim, epoch: int | None = None, issued_at_us: int | None = None) -> Result:
        issued = self.clock.tick() if issued_at_us is None else issued_at_us
        epoch = self.state.epoch if epoch is None else epoch
        return self.apply(ClaimRuns(issued_at_us=issued, epoch=epoch, claims=claims, monotonic_us=issued))

    # -- execution: leases, heartbeats, completions, expiries --------------
    def grant(
        self,
        *refs: RunRef,
        worker_id: str = "w1",
        lease_ttl_us: int = 30 * SECOND_US,
        epoch: int | None = None,
        issued_at_us: int | None = None,
        index: int | None = None,
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
                monotonic_us=issued,
            ),
            index,
        )

    def extend(self, *leases: LeaseRef, issued_at_us: int | None = None) -> Result:
        return self.apply(ExtendLeases(issued_at_us=self._at(issued_at_us), leases=leases))

    def complete(self, *completions: Completion, issued_at_us: int | None = None) -> Result:
        return self.apply(CompleteRuns(issued_at_us=self._at(issued_at_us), completions=completions))

    def expire(self, *expiries: Expiry, epoch: int | None = None, issued_at_us: int | None = None) -> Result:
        issued = self.clock.tick() if issued_at_us is None else issued_at_us
        return self.apply(
            ExpireLeases(
                issued_at_us=issued,
                epoch=self.state.epoch if epoch is None else epoch,
                expiries=expiries,
                monotonic_us=issued,
            )
        )

    def barrier(self, issued_at_us: int | None = None) -> Result:
        return self.apply(ReadBarrier(issued_at_us=self._at(issued_at_us)))
