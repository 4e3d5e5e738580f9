"""Reporting an attempt's outcome with WorkerService.CompleteMany (Complete on older nodes).

Runs that finish together are reported together: a `CompletionBatcher` sends whatever is
waiting in one CompleteMany call, so a herd of N runs costs a few calls instead of N (the
cluster commits the whole call as one entry). A run's thread hands its outcome over and goes
back to the pool (`report_in_background`): the sender thread settles each answer, so a busy
worker does not wake one thread per run to learn that its outcome committed. A report whose
call failed is retried on a pool thread (`report_outcome`), the rare path.

A report is retried on UNAVAILABLE (no node answered) and DEADLINE_EXCEEDED (a node answered too
late: the completion may or may not have committed) with backoff, for a bounded time. Retrying
is safe because a completion names its lease by fencing token and the cluster treats a repeated
completion of the same token as the same completion. Meanwhile the lease stays in the table, so
the heartbeater keeps it alive.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import grpc

from worker._backoff import Backoff, describe_rpc_error
from worker._client import ClusterClient
from worker._execution import Outcome
from worker._leases import HeldLease
from worker._session import WorkerCalls
from worker.api.v1 import worker_pb2

__all__ = ["CompletionBatcher", "complete_request", "report_in_background", "report_outcome"]

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
        final=outcome.final,
        stdout_tail=outcome.stdout_tail,
        stderr_tail=outcome.stderr_tail,
        exception_type=outcome.exception_type,
        http_status=outcome.http_status,
    )
    if outcome.retry_after_s is not None:
        # Set even when zero: an unset retry_after means "the job's backoff", zero means "now".
        request.retry_after.SetInParent()
        request.retry_after.FromNanoseconds(round(outcome.retry_after_s * 1e9))
    return request


Answered = Callable[[worker_pb2.CompleteResponse | None, BaseException | None], None]


class _Pending:
    __slots__ = ("request", "done", "response", "error", "on_answer")

    def __init__(self, request: worker_pb2.CompleteRequest, on_answer: Answered | None = None) -> None:
        self.request = request
        # Only a waiter (`send`) needs an Event; a callback report (the hot path) does not.
        self.done = threading.Event() if on_answer is None else None
        self.response: worker_pb2.CompleteResponse | None = None
        self.error: BaseException | None = None
        self.on_answer = on_answer  # called by the sender thread instead of waking a waiter

    def settle(self) -> None:
        if self.on_answer is None:
            if self.done is not None:  # always, without a callback (see __init__)
                self.done.set()
            return
        try:
            self.on_answer(self.response, self.error)
        except Exception:  # noqa: BLE001 (one report's bookkeeping must not stop the sender)
            log.exception("unexpected error settling the report of %s", self.request.lease.job_id)


class CompletionBatcher:
    """Sends waiting completions together (see the module docstring).

    A few sender threads each take everything waiting (up to `max_batch`) and send it in one
    call: while calls are in flight, new completions gather into the next batch, so batching
    needs no added delay. A node without CompleteMany (UNIMPLEMENTED) gets unary Completes.
    """

    def __init__(
        self,
        client: ClusterClient | WorkerCalls,
        worker_id: str,
        call_timeout_s: float,
        max_batch: int = 500,
        senders: int = 2,
    ) -> None:
        self._client = client
        self._worker_id = worker_id
        self._call_timeout_s = call_timeout_s
        self._max_batch = max_batch
        self._waiting: list[_Pending] = []
        self._cond = threading.Condition()
        self._closed = False
        self._unary_only = False
        self._threads = [
            threading.Thread(target=self._send_loop, daemon=True, name=f"raftcron-complete-{i}") for i in range(senders)
        ]
        for thread in self._threads:
            thread.start()

    def send(self, request: worker_pb2.CompleteRequest) -> worker_pb2.CompleteResponse:
        """The cluster's answer to this completion; raises what the call raised (grpc.RpcError,
        or ValueError once closed)."""
        if self._unary_only:
            return self._client.complete(request, timeout_s=self._call_timeout_s)
        pending = self._enqueue(_Pending(request))
        assert pending.done is not None
        pending.done.wait()
        if pending.error is not None:
            raise pending.error
        assert pending.response is not None  # settled: an answer or an error, never neither
        return pending.response

    def submit(self, request: worker_pb2.CompleteRequest, on_answer: Answered) -> None:
        """Send `request` with the next batch; the sender thread calls `on_answer(response,
        error)` once the call is answered or failed. Raises ValueError once closed."""
        self._enqueue(_Pending(request, on_answer))

    def _enqueue(self, pending: _Pending) -> _Pending:
        with self._cond:
            if self._closed:
                raise ValueError("completion batcher closed")
            self._waiting.append(pending)
            self._cond.notify()
        return pending

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(self._call_timeout_s + 1.0)

    def _send_loop(self) -> None:
        while True:
            with self._cond:
                while not self._waiting and not self._closed:
                    self._cond.wait()
                if not self._waiting:
                    return
                batch, self._waiting = self._waiting[: self._max_batch], self._waiting[self._max_batch :]
            self._send(batch)

    def _send(self, batch: list[_Pending]) -> None:
        try:
            if not self._unary_only and self._send_many(batch):
                return
            for pending in batch:
                pending.response = self._client.complete(pending.request, timeout_s=self._call_timeout_s)
        except grpc.RpcError as error:
            _fail_unanswered(batch, error)
        except BaseException as error:  # a closed client (ValueError) or a bug: the waiters must wake
            _fail_unanswered(batch, error)
        finally:
            for pending in batch:
                if pending.response is not None or pending.error is not None:
                    pending.settle()

    def _send_many(self, batch: list[_Pending]) -> bool:
        """One CompleteMany call for the batch; False if the node does not know CompleteMany."""
        try:
            response = self._client.complete_many(
                worker_id=self._worker_id, completions=[p.request for p in batch], timeout_s=self._call_timeout_s
            )
        except grpc.RpcError as error:
            if not (isinstance(error, grpc.Call) and error.code() == grpc.StatusCode.UNIMPLEMENTED):
                raise
            if not self._unary_only:
                self._unary_only = True
                log.info("the cluster has no CompleteMany: reporting outcomes one call each")
            return False
        for pending, result in zip(batch, response.results, strict=True):
            pending.response = result
        return True


def _fail_unanswered(batch: list[_Pending], error: BaseException) -> None:
    for pending in batch:
        if pending.response is None:
            pending.error = error


def report_outcome(
    send: Callable[[worker_pb2.CompleteRequest], worker_pb2.CompleteResponse],
    worker_id: str,
    lease: HeldLease,
    outcome: Outcome,
    *,
    retry_for_s: float,
    give_up: threading.Event,
    first_error: grpc.RpcError | None = None,
) -> int | None:
    """Report `outcome` through `send` (CompletionBatcher.send); the LeaseOutcome the cluster
    answered, None if none did. `first_error`: a first attempt already made failed so."""
    request = complete_request(worker_id, lease.ref, outcome)
    stop_at = time.monotonic() + retry_for_s
    backoff = Backoff(initial_s=0.1, max_s=5.0)
    attempts, error = (1, first_error) if first_error is not None else (0, None)
    while True:
        if error is not None:
            delay_s = _retry_delay_s(error, backoff, stop_at, give_up)
            if delay_s is None:
                log.error(
                    "run %s (token %d): could not report outcome %s after %d attempts (%s); "
                    "its lease will expire and the run be leased again",
                    lease.run_key,
                    lease.ref.fencing_token,
                    outcome.kind,
                    attempts,
                    describe_rpc_error(error),
                )
                return None
            log.debug(
                "run %s: Complete failed (%s), retrying in %.2fs", lease.run_key, describe_rpc_error(error), delay_s
            )
            give_up.wait(delay_s)
        attempts += 1
        try:
            response = send(request)
            break
        except ValueError:  # the client was closed: the worker stopped waiting for us
            log.warning("run %s: outcome %s not reported: worker closed", lease.run_key, outcome.kind)
            return None
        except grpc.RpcError as failed:
            error = failed
    _log_answer(lease, outcome, response)
    return response.outcome


def _retry_delay_s(error: grpc.RpcError, backoff: Backoff, stop_at: float, give_up: threading.Event) -> float | None:
    """How long to wait before the next attempt; None to give up."""
    retryable = isinstance(error, grpc.Call) and error.code() in _RETRY_CODES
    delay_s = backoff.next_delay_s()
    if not retryable or time.monotonic() + delay_s > stop_at or give_up.is_set():
        return None
    return delay_s


def _log_answer(lease: HeldLease, outcome: Outcome, response: worker_pb2.CompleteResponse) -> None:
    if response.outcome == worker_pb2.OK:
        log.info(
            "run %s (attempt %d): %s%s",
            lease.run_key,
            lease.ctx.attempt,
            outcome.kind,
            f": {outcome.error}" if outcome.error else "",
        )
    else:
        log.warning(
            "run %s (token %d): outcome %s discarded by the cluster (%s): the lease was no longer current",
            lease.run_key,
            lease.ref.fencing_token,
            outcome.kind,
            worker_pb2.LeaseOutcome.Name(response.outcome),
        )


def report_in_background(
    batcher: CompletionBatcher,
    retry_on: Callable[[Callable[[], None]], None],
    worker_id: str,
    lease: HeldLease,
    outcome: Outcome,
    *,
    retry_for_s: float,
    give_up: threading.Event,
    on_done: Callable[[], None],
) -> None:
    """Report `outcome` without holding the caller's thread; `on_done()` once the cluster answered
    or the report was given up. A failed first call goes on as `report_outcome` (its retries and
    backoff, within `retry_for_s` of now) in a call to `retry_on`, which runs it on another thread."""
    request = complete_request(worker_id, lease.ref, outcome)
    started = time.monotonic()

    def retry(first_error: grpc.RpcError) -> None:
        try:
            report_outcome(
                batcher.send,
                worker_id,
                lease,
                outcome,
                give_up=give_up,
                first_error=first_error,
                retry_for_s=max(0.0, retry_for_s - (time.monotonic() - started)),
            )
        finally:
            on_done()

    def answered(response: worker_pb2.CompleteResponse | None, error: BaseException | None) -> None:
        if response is not None:
            _log_answer(lease, outcome, response)
            on_done()
        elif isinstance(error, grpc.RpcError):
            try:
                retry_on(lambda: retry(error))  # backs off, then retries or gives up, as report_outcome does
            except BaseException:
                on_done()  # no thread to retry on: give the lease back to the table rather than hold it
                raise
        else:  # closed meanwhile, or a bug in the sender: the worker stopped waiting for us
            log.warning("run %s: outcome %s not reported: %r", lease.run_key, outcome.kind, error)
            on_done()

    try:
        batcher.submit(request, answered)
    except ValueError:  # the batcher was closed: the worker stopped waiting for us
        log.warning("run %s: outcome %s not reported: worker closed", lease.run_key, outcome.kind)
        on_done()
