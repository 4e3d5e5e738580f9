"""What a handler gets (RunContext) and how it asks for a retry (RetryLater).

Two keys protect a job's effects, and they do different jobs:

- `ctx.idempotency_key` is derived from the run key (job id + nominal slot instant) only. It is
  the same for every attempt of a slot, on every worker, so a downstream system that
  deduplicates by it performs "this slot's effect" once, however many times the run is retried
  or re-leased. Use it for "do this once per slot" (a payment, an e-mail, an insert).
- `ctx.fencing_token` is the Raft log index of the entry that granted this attempt's lease. It
  grows with every new lease, so a downstream store that remembers the highest token it has
  seen for a resource can refuse a write carrying a lower one: the write of a stale attempt
  whose lease was lost while it kept running (a paused VM, a partition). Use it to stop stale
  writers, not to deduplicate (each attempt has its own token).
"""

from __future__ import annotations

import enum
import hashlib
import json
import logging
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

__all__ = ["CancelReason", "RetryLater", "RunContext", "idempotency_key_for"]


class CancelReason(enum.StrEnum):
    """Why a run's `ctx.cancelled` was set (compare with the enum or with plain strings)."""

    # The lease's fencing token is no longer current: another attempt may own the run now.
    FENCED = "fenced"
    # The cluster does not know the run or the lease any more.
    NOT_FOUND = "not_found"
    # An operator, a replacing run or the deletion of the job cancelled the run.
    RUN_CANCELLED = "run_cancelled"
    # Heartbeats failed for longer than the lease TTL: the cluster will lease the run again.
    LEASE_LOST = "lease_lost"
    # The attempt reached its deadline (the job's maximum runtime).
    DEADLINE = "deadline"
    # The worker is shutting down and its drain timeout has passed.
    SHUTDOWN = "shutdown"


# Reasons after which the attempt must not report an outcome: the lease is no longer this
# worker's, so a Complete would be rejected at best and misleading at worst.
UNREPORTABLE_REASONS = frozenset(
    {CancelReason.FENCED, CancelReason.NOT_FOUND, CancelReason.RUN_CANCELLED, CancelReason.LEASE_LOST}
)


class FinalFailure(Exception):
    """Raise from a handler to fail the run for good: no retry, whatever the job's retry policy.

    For failures another attempt cannot fix (bad input, a refused account); any other exception
    is retried as the policy says. Needs a cluster at log format 3 (every node upgraded).
    """

    def __init__(self, message: str = "") -> None:
        super().__init__(message or "failed (final)")
        self.message = message or "failed (final)"


class RetryLater(Exception):
    """Raise from a handler to end the attempt as RETRY_LATER: "try again in `after_s` seconds".

    `after_s=None` leaves the delay to the job's retry backoff. It counts as an attempt against
    the job's retry policy, like a failure, but says the handler chose to stop (a busy
    downstream, an input not there yet) rather than that it broke.
    """

    def __init__(self, after_s: float | None = None, message: str = "") -> None:
        if after_s is not None and after_s < 0:
            raise ValueError(f"after_s must not be negative, got {after_s!r}")
        super().__init__(message or "retry later")
        self.after_s = None if after_s is None else float(after_s)
        self.message = message or "retry later"


def idempotency_key_for(run_key: str) -> str:
    """The idempotency key of a run key: 40 lowercase hex characters.

    A hash rather than the run key itself so that it fits any downstream API's key rules
    (length, allowed characters). The "raftcron/v1" prefix is part of the contract: changing
    it would change every key and break deduplication across an upgrade, so it never changes.
    """
    return hashlib.sha256(b"raftcron/v1\0" + run_key.encode("utf-8")).hexdigest()[:40]


class RunContext:
    """Everything a handler knows about the attempt it runs.

    Attributes (read-only by convention):
        job_id, run_key:  the run; the run key is (job id, nominal slot instant) in printable form.
        scheduled_at:     the nominal slot instant (aware datetime, UTC), without jitter.
        fencing_token:    this attempt's lease token (see the module docstring).
        idempotency_key:  stable across attempts of one slot (see the module docstring).
        attempt:          1 for the first attempt.
        deadline:         when the attempt is stopped (aware datetime, UTC), or None.
        payload:          the job's payload parsed from JSON, None if it has none.
        payload_json:     the same payload as JSON text ("" if none).
        worker_id, target: who runs it, and the handler name (or "shell").
        cancelled:        a threading.Event set when the attempt must stop; `cancel_reason`
                          says why (a CancelReason). Long handlers should check it, or sleep
                          with `ctx.cancelled.wait(seconds)` instead of time.sleep.

    A Python handler cannot be killed: one that ignores `cancelled` keeps its thread until it
    returns. The cluster still ends its lease at the maximum runtime, so another attempt may
    start while it runs; its late outcome is discarded (FENCED). Write effects with the
    fencing token or the idempotency key so such overlap is harmless.
    """

    def __init__(
        self,
        *,
        job_id: str,
        run_key: str,
        scheduled_at: datetime,
        fencing_token: int,
        attempt: int,
        deadline: datetime | None,
        payload_json: str = "",
        worker_id: str = "",
        target: str = "",
    ) -> None:
        for name, value in (("scheduled_at", scheduled_at), ("deadline", deadline)):
            if value is not None and value.tzinfo is None:
                raise ValueError(f"{name} must be an aware datetime, got {value!r}")
        self.job_id = job_id
        self.run_key = run_key
        self.scheduled_at = scheduled_at.astimezone(timezone.utc)
        self.fencing_token = int(fencing_token)
        self.attempt = int(attempt)
        self.deadline = deadline.astimezone(timezone.utc) if deadline is not None else None
        self.payload_json = payload_json
        # Parsed once here so a bad payload fails the attempt before the handler runs.
        self.payload: Any = json.loads(payload_json) if payload_json else None
        self.worker_id = worker_id
        self.target = target
        self.idempotency_key = idempotency_key_for(run_key)
        self._cancelled: threading.Event | None = None  # made when first asked for (see `cancelled`)
        self._cancel_reason: CancelReason | None = None
        self._lock = threading.Lock()
        self._cancel_callbacks: list[Callable[[], None]] = []

    @property
    def cancelled(self) -> threading.Event:
        """Set when the attempt must stop (see `cancel_reason`).

        Made on first use: most handlers never look at it, and an Event (with its Condition)
        was a measurable part of a short run's cost on a busy worker (bench execution)."""
        with self._lock:
            if self._cancelled is None:
                self._cancelled = threading.Event()
                if self._cancel_reason is not None:
                    self._cancelled.set()
            return self._cancelled

    @property
    def cancel_reason(self) -> CancelReason | None:
        """Why the attempt was cancelled; None while it is not."""
        return self._cancel_reason

    def is_cancelled(self) -> bool:
        return self._cancel_reason is not None

    def time_left_s(self) -> float | None:
        """Seconds until the deadline (negative once it passed); None without a deadline."""
        if self.deadline is None:
            return None
        return (self.deadline - datetime.now(timezone.utc)).total_seconds()

    def cancel(self, reason: CancelReason | str) -> bool:
        """Ask the attempt to stop. The first reason wins; returns False if already cancelled."""
        reason = CancelReason(reason)
        with self._lock:
            if self._cancel_reason is not None:
                return False
            self._cancel_reason = reason
            callbacks, self._cancel_callbacks = self._cancel_callbacks, []
            event = self._cancelled  # one made later is made set
        if event is not None:
            event.set()
        for callback in callbacks:
            _call_safely(callback, self.run_key)
        return True

    def add_cancel_callback(self, callback: Callable[[], None]) -> None:
        """Call `callback()` once when the attempt is cancelled (at once if it already is).

        It runs on the thread that cancels (the heartbeater, a timer): keep it short.
        """
        with self._lock:
            if self._cancel_reason is None:
                self._cancel_callbacks.append(callback)
                return
        _call_safely(callback, self.run_key)

    def __repr__(self) -> str:
        return (
            f"RunContext(run_key={self.run_key!r}, attempt={self.attempt}, "
            f"fencing_token={self.fencing_token}, cancel_reason={self._cancel_reason!r})"
        )


def _call_safely(callback: Callable[[], None], run_key: str) -> None:
    # Cancel callbacks run on the heartbeater's or a timer's thread: one that raises must not
    # take that thread down with it.
    try:
        callback()
    except Exception:  # noqa: BLE001
        logging.getLogger("raftcron.worker").exception("run %s: cancel callback %r failed", run_key, callback)
