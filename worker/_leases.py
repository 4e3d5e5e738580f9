"""The leases a worker holds (built from the grants of Lease calls), shared by its lease loop,
heartbeater, runs and drain."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from datetime import timezone

from worker._capture import Capture
from worker._context import CancelReason, RunContext
from worker.api.v1 import worker_pb2

__all__ = ["SHELL_TARGET", "HeldLease", "LeaseTable", "lease_from_grant"]

log = logging.getLogger("raftcron.worker")

# The target name under which a worker leases `{shell: ...}` jobs.
SHELL_TARGET = "shell"
# Used when a grant carries no lease TTL (the cluster should always send one).
DEFAULT_LEASE_TTL_S = 30.0


def lease_from_grant(grant: worker_pb2.LeaseGrant, worker_id: str) -> tuple[HeldLease, str]:
    """The lease of `grant`, and an error if its payload is not JSON (empty if it is)."""
    ctx, error = _context_for(grant, worker_id)
    return HeldLease(grant, ctx, grant_lease_ttl_s(grant)), error


class HeldLease:
    """One leased attempt, from its grant until its outcome is reported (or given up)."""

    def __init__(self, grant: worker_pb2.LeaseGrant, ctx: RunContext, lease_ttl_s: float) -> None:
        self.ref = worker_pb2.LeaseRef(
            job_id=grant.job_id, scheduled_at=grant.scheduled_at, fencing_token=grant.fencing_token
        )
        # The table's key, read three times a run: kept rather than read from the message again.
        self.key: tuple[str, int, int, int] = (
            grant.job_id,
            grant.scheduled_at.seconds,
            grant.scheduled_at.nanos,
            grant.fencing_token,
        )
        self.run_key = grant.run_key
        self.ctx = ctx
        self.lease_ttl_s = lease_ttl_s
        # Local estimate of the lease's expiry, on the monotonic clock: when the grant arrived
        # plus one TTL, pushed forward by each heartbeat the cluster accepted.
        self.valid_until = time.monotonic() + lease_ttl_s
        # Set once the lease is no longer ours (fenced, not found, cancelled, expired).
        self.lost: CancelReason | None = None
        # True from the grant until the handler returns (or never starts); then the outcome is
        # being reported and the lease no longer takes a handler slot (see LeaseTable).
        self.running = True
        # What the handler wrote so far: reported if it is abandoned before it returns.
        self.capture = Capture()
        self._reported = False
        self._lock = threading.Lock()

    def claim_report(self, even_if_lost: bool = False) -> bool:
        """True for the one caller that may report this attempt's outcome (a lost lease's only
        with `even_if_lost`: its report is fenced, and sent for the output it carries)."""
        with self._lock:
            if self._reported or (self.lost is not None and not even_if_lost):
                return False
            self._reported = True
            return True

    def __repr__(self) -> str:
        return f"HeldLease({self.run_key!r}, token={self.ref.fencing_token}, lost={self.lost!r})"


class LeaseTable:
    """The leases a worker holds: at most `capacity` whose handler runs, and at most `capacity`
    more whose handler has returned and whose outcome is being reported.

    A finished handler frees its slot at once: the next run starts while the cluster commits the
    last one's outcome, instead of after it (a commit and a call's round trip per run). The lease
    stays held (and heartbeated) until its outcome is answered; the second bound keeps a worker
    that cannot get its outcomes through from leasing on. Every change wakes the waiters of
    `wait`. The heartbeater is woken only by a lease that needs a beat before the one it planned
    (see `heartbeat_view`), not by every change: that woke it three times per run.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity!r}")
        self.capacity = capacity
        self._leases: dict[tuple, HeldLease] = {}
        self._running = 0
        self._changed = threading.Condition()
        self._beat_planned_s = math.inf  # when the heartbeater looks at the table next (monotonic)
        self._beat_needed_s = math.inf  # the earliest beat a lease added since its last look needs
        self._beat_wake = threading.Event()

    def __len__(self) -> int:
        with self._changed:
            return len(self._leases)

    def add(self, lease: HeldLease) -> bool:
        """Hold `lease` (its handler about to run); False (and nothing held) if no slot is free."""
        with self._changed:
            if self.free_slots_locked() < 1:
                return False
            self._leases[lease.key] = lease
            self._running += 1
            needed_s = time.monotonic() + lease.lease_ttl_s / 3
            self._beat_needed_s = min(self._beat_needed_s, needed_s)
            if needed_s < self._beat_planned_s:
                self._beat_wake.set()
            self._changed_locked()
            return True

    def handler_ended(self, lease: HeldLease) -> None:
        """`lease`'s handler returned: its slot is free; the lease is held until `remove`."""
        with self._changed:
            if lease.key in self._leases:
                self._handler_ended_locked(lease)
                self._changed_locked()

    def remove(self, lease: HeldLease) -> None:
        with self._changed:
            if self._leases.pop(lease.key, None) is not None:
                self._handler_ended_locked(lease)
            self._changed_locked()

    def _handler_ended_locked(self, lease: HeldLease) -> None:
        if lease.running:
            lease.running = False
            self._running -= 1

    def held(self) -> list[HeldLease]:
        """Every lease, lost ones included (their handlers may still run)."""
        with self._changed:
            return list(self._leases.values())

    def live(self) -> list[HeldLease]:
        """The leases still ours: the ones to heartbeat."""
        with self._changed:
            return self._live_locked()

    def find(self, ref: worker_pb2.LeaseRef) -> HeldLease | None:
        key = (ref.job_id, ref.scheduled_at.seconds, ref.scheduled_at.nanos, ref.fencing_token)
        with self._changed:
            return self._leases.get(key)

    def mark_lost(self, lease: HeldLease, reason: CancelReason) -> bool:
        """Stop treating `lease` as ours and cancel its run; False if it was already lost."""
        with self._changed:
            if lease.lost is not None:
                return False
            lease.lost = reason
            self._changed_locked()
        lease.ctx.cancel(reason)
        return True

    def wake(self) -> None:
        """Wake every waiter (the heartbeater too) so it re-checks its stop condition."""
        with self._changed:
            self._beat_wake.set()
            self._changed.notify_all()

    # The heartbeater's view: read, plan, wait; a lease added meanwhile is never missed.
    def heartbeat_view(self) -> list[HeldLease]:
        """The live leases, as the heartbeater plans from them."""
        with self._changed:
            self._beat_wake.clear()
            self._beat_needed_s = math.inf
            return self._live_locked()

    def plan_heartbeat(self, at_s: float) -> None:
        """The heartbeater looks again at `at_s` (monotonic; inf: once a lease arrives), or
        sooner if a lease added since `heartbeat_view` (or from now on) needs a beat before."""
        with self._changed:
            self._beat_planned_s = at_s
            if self._beat_needed_s < at_s:
                self._beat_wake.set()

    def wait_heartbeat_change(self, timeout_s: float | None) -> None:
        self._beat_wake.wait(timeout_s)

    def wait(self, predicate: Callable[[], bool], timeout_s: float | None) -> bool:
        """Wait until `predicate()` (called under the table's lock) holds; its last value."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout_s)

    def free_slots(self) -> int:
        with self._changed:
            return self.free_slots_locked()

    def free_slots_locked(self) -> int:
        """Runs that may start now; call it from a `wait` predicate (the lock is held there)."""
        return min(self.capacity - self._running, 2 * self.capacity - len(self._leases))

    def _live_locked(self) -> list[HeldLease]:
        return [lease for lease in self._leases.values() if lease.lost is None]

    def empty_locked(self) -> bool:
        return not self._leases

    def keys_locked(self) -> set[tuple]:
        return set(self._leases)

    def _changed_locked(self) -> None:
        self._changed.notify_all()


def grant_lease_ttl_s(grant: worker_pb2.LeaseGrant) -> float:
    if grant.HasField("lease_ttl"):
        ttl_s = grant.lease_ttl.ToNanoseconds() / 1e9
        if ttl_s > 0:
            return ttl_s
    log.warning("run %s: grant without a lease TTL; assuming %.0fs", grant.run_key, DEFAULT_LEASE_TTL_S)
    return DEFAULT_LEASE_TTL_S


def _context_for(grant: worker_pb2.LeaseGrant, worker_id: str) -> tuple[RunContext, str]:
    """The run context of `grant`, and an error if its payload is not JSON (empty if it is)."""
    kind = grant.target.WhichOneof("kind")
    fields = dict(
        job_id=grant.job_id,
        run_key=grant.run_key,
        scheduled_at=grant.scheduled_at.ToDatetime(tzinfo=timezone.utc),
        fencing_token=grant.fencing_token,
        attempt=grant.attempt,
        deadline=grant.deadline.ToDatetime(tzinfo=timezone.utc) if grant.HasField("deadline") else None,
        worker_id=worker_id,
        target=grant.target.handler if kind == "handler" else (kind if kind in ("shell", "http") else ""),
    )
    try:
        return RunContext(payload_json=grant.payload_json, **fields), ""
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        return RunContext(payload_json="", **fields), f"payload is not valid JSON: {exc}"
