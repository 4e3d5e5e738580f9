"""One background heartbeater for all of a worker's leases.

Every lease_ttl/3 (the smallest TTL among the live leases) it sends ONE Heartbeat call naming
every live lease, so a worker costs the cluster one call per interval however many runs it
holds. A lease the cluster answers FENCED, NOT_FOUND or RUN_CANCELLED is no longer ours: its
run is cancelled and it is never reported. When no heartbeat has been accepted for a lease's
whole TTL (the cluster unreachable), the cluster has expired it and will lease the run again,
so the run is cancelled as LEASE_LOST: two attempts of one run must not both believe they own it.
"""

from __future__ import annotations

import logging
import math
import threading
import time

import grpc

from worker._backoff import FailureLog
from worker._client import ClusterClient
from worker._context import CancelReason
from worker._leases import HeldLease, LeaseTable
from worker._session import WorkerCalls
from worker.api.v1 import worker_pb2

__all__ = ["Heartbeater"]

log = logging.getLogger("raftcron.worker.heartbeat")

_STOP_REASONS = {
    worker_pb2.FENCED: CancelReason.FENCED,
    worker_pb2.NOT_FOUND: CancelReason.NOT_FOUND,
    worker_pb2.RUN_CANCELLED: CancelReason.RUN_CANCELLED,
}


class Heartbeater:
    """Keeps the live leases of `table` alive (see the module docstring)."""

    def __init__(self, client: ClusterClient | WorkerCalls, worker_id: str, table: LeaseTable) -> None:
        self._client = client
        self._worker_id = worker_id
        self._table = table
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="raftcron-heartbeat")
        self._failures = FailureLog(log, "heartbeat")
        self.beats_sent = 0

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stopping.set()
        self._table.wake()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stopping.is_set():
            try:
                self._beat_until_stopped()
            except Exception:  # noqa: BLE001 (a bug here must not silently end all heartbeats)
                log.exception("heartbeater: unexpected error; going on")
                self._stopping.wait(0.5)

    def _beat_until_stopped(self) -> None:
        last_beat_at: float | None = None  # None while there is nothing to heartbeat
        last_ok = True
        while not self._stopping.is_set():
            live = self._table.heartbeat_view()
            now = time.monotonic()
            if not live:
                last_beat_at = None
                self._wait_for_change(math.inf)
                continue
            if last_beat_at is None:
                last_beat_at = now  # fresh grants: their TTL just started
            interval_s = min(lease.lease_ttl_s for lease in live) / 3
            # After a failure, try again sooner: a leader election takes a second or two.
            beat_at = last_beat_at + (interval_s if last_ok else interval_s / 2)
            expire_at = min(lease.valid_until for lease in live)
            if now < min(beat_at, expire_at):
                self._wait_for_change(min(beat_at, expire_at))
                continue
            if now >= beat_at:
                last_ok = self._beat(live, timeout_s=max(0.2, interval_s))
                last_beat_at = time.monotonic()
            self._expire_overdue()

    def _wait_for_change(self, until_s: float) -> None:
        """Until `until_s` (monotonic), or until a lease arrives that needs a beat before then."""
        self._table.plan_heartbeat(until_s)
        if not self._stopping.is_set():
            self._table.wait_heartbeat_change(None if until_s == math.inf else max(0.0, until_s - time.monotonic()))

    def _beat(self, live: list[HeldLease], timeout_s: float) -> bool:
        """Send one Heartbeat for every lease of `live`; True if the cluster answered."""
        request = worker_pb2.HeartbeatRequest(worker_id=self._worker_id, leases=[lease.ref for lease in live])
        sent_at = time.monotonic()
        try:
            response = self._client.heartbeat(request, timeout_s=timeout_s)
        except (grpc.RpcError, ValueError) as error:  # ValueError: the client was closed
            if not self._stopping.is_set():
                self._failures.failed(error)
            return False
        self.beats_sent += 1
        self._failures.succeeded()
        for result in response.results:
            lease = self._table.find(result.lease)
            if lease is None:
                continue  # finished while the call was in flight
            if result.outcome == worker_pb2.OK:
                # Counted from when we sent: the cluster extended it at that instant or later.
                lease.valid_until = max(lease.valid_until, sent_at + lease.lease_ttl_s)
            elif result.outcome in _STOP_REASONS:
                reason = _STOP_REASONS[result.outcome]
                if self._table.mark_lost(lease, reason):
                    log.warning(
                        "run %s (token %d): heartbeat answered %s: stopping it, its outcome will not be reported",
                        lease.run_key,
                        lease.ref.fencing_token,
                        worker_pb2.LeaseOutcome.Name(result.outcome),
                    )
        return True

    def _expire_overdue(self) -> None:
        now = time.monotonic()
        for lease in self._table.live():
            if now >= lease.valid_until and self._table.mark_lost(lease, CancelReason.LEASE_LOST):
                log.warning(
                    "run %s (token %d): no heartbeat accepted for its whole lease TTL (%.1fs): "
                    "the lease is lost, stopping the run (the cluster will lease it again)",
                    lease.run_key,
                    lease.ref.fencing_token,
                    lease.lease_ttl_s,
                )
