"""Reporting an attempt's outcome with WorkerService.Complete.

The call is retried on UNAVAILABLE (no node answered) and DEADLINE_EXCEEDED (a node answered too
late: the completion may or may not have committed) with backoff, for a bounded time. Retrying
is safe because a completion names its lease by fencing token and the cluster treats a repeated
completion of the same token as the same completion. Meanwhile the lease stays in the table, so
the heartbeater keeps it alive.
"""

from __future__ import annotations

import logging
import threading
import time

import grpc

from worker.api.v1 import worker_pb2
from worker.backoff import Backoff, describe_rpc_error
from worker.client import ClusterClient
from worker.execution import Outcome
from worker.leases import HeldLease

__all__ = ["complete_request", "report_outcome"]

log = logging.getLogger("raftcron.worker")

_RETRY_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


def complete_request(worker_id: str, ref: worker_pb2.LeaseRef, outcome: Outcome) -> worker_pb2.CompleteRequest:
    request = worker_pb2.CompleteRequest(
        worker_id=worker_id,
        lease=ref,
        kind=worker_pb2.CompletionKind.Value(outcome.kind.value),
        exit_code=outcome.exit_code,
        error=outcome.error,
        output_tail=outcome.output_tail,
    )
    if outcome.retry_after_s is not None:
        # Set even when zero: an unset retry_after means "the job's backoff", zero means "now".
        request.retry_after.SetInParent()
        request.retry_after.FromNanoseconds(round(outcome.retry_after_s * 1e9))
    return request


def report_outcome(
    client: ClusterClient,
    worker_id: str,
    lease: HeldLease,
    outcome: Outcome,
    *,
    retry_for_s: float,
    call_timeout_s: float,
    give_up: threading.Event,
) -> int | None:
    """Send Complete for `lease`; the LeaseOutcome the cluster answered, None if none did."""
    request = complete_request(worker_id, lease.ref, outcome)
    stop_at = time.monotonic() + retry_for_s
    backoff = Backoff(initial_s=0.1, max_s=5.0)
    attempts = 0
    while True:
        attempts += 1
        try:
            response = client.complete(request, timeout_s=call_timeout_s)
            break
        except ValueError:  # the client was closed: the worker stopped waiting for us
            log.warning("run %s: outcome %s not reported: worker closed", lease.run_key, outcome.kind)
            return None
        except grpc.RpcError as error:
            retryable = isinstance(error, grpc.Call) and error.code() in _RETRY_CODES
            delay_s = backoff.next_delay_s()
            if not retryable or time.monotonic() + delay_s > stop_at or give_up.is_set():
                log.error(
                    "run %s (token %d): could not report outcome %s after %d attempts (%s); "
                    "its lease will expire and the run be leased again",
                    lease.run_key, lease.ref.fencing_token, outcome.kind, attempts, describe_rpc_error(error),
                )
                return None
            log.debug("run %s: Complete failed (%s), retrying in %.2fs",
                      lease.run_key, describe_rpc_error(error), delay_s)
            give_up.wait(delay_s)
    if response.outcome == worker_pb2.OK:
        log.info("run %s (attempt %d): %s%s", lease.run_key, lease.ctx.attempt, outcome.kind,
                 f": {outcome.error}" if outcome.error else "")
    else:
        log.warning(
            "run %s (token %d): outcome %s discarded by the cluster (%s): the lease was no longer current",
            lease.run_key, lease.ref.fencing_token, outcome.kind,
            worker_pb2.LeaseOutcome.Name(response.outcome),
        )
    return response.outcome
