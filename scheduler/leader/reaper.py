"""The reaper: ends leases whose heartbeats stopped and runs past their maximum runtime.

It proposes; the core decides in replicated time whether each lease really has
passed, so a leader with a fast clock cannot end healthy leases.
"""

from __future__ import annotations

import logging
import random

from scheduler.core.commands import AdvanceTime, ExpireLeases, Expiry, LeaseRef
from scheduler.core.model import SECOND_US
from scheduler.core.vocabulary import ExpiryReason, RejectionCode
from scheduler.leader.lifecycle import LeaderTerm
from scheduler.replication import RaftLog, ReplicationError

log = logging.getLogger("raftcron.reaper")

MAX_SLEEP_US = SECOND_US // 2
# Replicated time is refreshed at least this often while the leader is otherwise idle.
TICK_US = SECOND_US // 2
BATCH = 1000


def overdue(state, now_us: int) -> tuple[list[Expiry], int]:
    """Leases to end now, and the next instant one falls due (pure: tests call it directly)."""
    expiries: list[Expiry] = []
    next_due_us = now_us + MAX_SLEEP_US
    # Runs under the state lock, which the apply waits for: a live lease costs two compares.
    for run in state.leased():  # leased runs only: the queued backlog may be far larger
        if run.deadline_us <= now_us:
            reason = ExpiryReason.TIMED_OUT
        elif run.lease_expires_us <= now_us:
            reason = ExpiryReason.LEASE_EXPIRED
        else:
            due_us = run.deadline_us if run.deadline_us < run.lease_expires_us else run.lease_expires_us
            if due_us < next_due_us:
                next_due_us = due_us
            continue
        lease = LeaseRef(run.job_id, run.scheduled_us, run.fencing_token)
        expiries.append(Expiry(lease, reason, random.randrange(1_000_000)))
    return expiries, next_due_us


class Reaper:
    """Also the epoch's clock tick: when nothing else moved replicated time for a while, it
    proposes AdvanceTime, so heartbeats and completions are judged at a fresh time."""

    def __init__(self, term: LeaderTerm, raftlog: RaftLog, timeout_s: float) -> None:
        self._term = term
        self._raftlog = raftlog
        self._clock = term.clock
        self._timeout_s = timeout_s
        self._warned_us = 0

    def __call__(self) -> None:
        while not self._term.stopping.is_set():
            now_us, mono_us = self._clock.read()
            with self._raftlog.read() as state:
                expiries, next_due_us = overdue(state, now_us)
                stale_time = now_us - state.now_us >= TICK_US
                ignored_us = state.clock_ignored_us
            self._warn_clock_jump(ignored_us, now_us)
            for start in range(0, len(expiries), BATCH):
                batch = tuple(expiries[start : start + BATCH])
                if not self._propose(ExpireLeases(now_us, self._term.epoch, batch, mono_us)):
                    return
            if not expiries and stale_time and not self._propose(AdvanceTime(now_us, self._term.epoch, mono_us)):
                return
            wait_us = min(max(next_due_us - self._clock.now_us(), 10_000), TICK_US) if not expiries else 10_000
            self._term.stopping.wait(wait_us / SECOND_US)

    def _warn_clock_jump(self, ignored_us: int, now_us: int) -> None:
        """The core ignored part of this leader's wall clock: say so, at most once a minute."""
        if ignored_us > SECOND_US and now_us - self._warned_us > 60 * SECOND_US:
            self._warned_us = now_us
            log.warning(
                "this leader's wall clock runs %.1fs ahead of what its monotonic clock allows; replicated "
                "time follows the monotonic clock (check NTP; a leader change re-anchors time)",
                ignored_us / SECOND_US,
            )

    def _propose(self, command: ExpireLeases | AdvanceTime) -> bool:
        try:
            result = self._raftlog.submit(command, self._timeout_s)
        except ReplicationError as exc:
            log.warning("expiry batch not confirmed: %r", exc)
            return True
        if not result.accepted and result.rejection.code == RejectionCode.STALE_EPOCH:
            self._term.depose(result.rejection.message)
            return False
        return True
