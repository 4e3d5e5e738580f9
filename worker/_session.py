"""The worker's side of WorkerService.Session: one long-lived stream to the leader.

The worker announces credits (the runs it can start: its free slots, less the credits it
announced that no grant used yet); the leader pushes grants for at most those; heartbeats and
outcomes go on the stream and are answered on it, matched by `seq`. While no session is open
(an older cluster, a failover, a node that names a leader this worker does not know), the same
calls go unary (`WorkerCalls`) and the lease loop long-polls Lease, as before sessions existed.
See docs/design/worker-stream.md.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import grpc

from worker._client import ClusterClient
from worker._leases import LeaseTable
from worker.api.v1 import worker_pb2

__all__ = ["CreditLedger", "SessionClosed", "SessionError", "WorkerCalls", "WorkerSession"]

log = logging.getLogger("raftcron.worker.session")

_CODES = {code.value[0]: code for code in grpc.StatusCode}


class CreditLedger:
    """Credits announced to the node that no grant has used yet (pure; its owner locks it).

    The node never grants more than the credits it holds, so a worker that announces only
    `free slots - outstanding` never receives more runs than it can start."""

    def __init__(self, max_credits: int = 1000) -> None:
        self.max_credits = max_credits
        self.outstanding = 0

    def to_announce(self, free_slots: int) -> int:
        """Credits to announce now, for `free_slots` runs the worker could start."""
        return max(0, min(free_slots, self.max_credits) - self.outstanding)

    def announced(self, credits: int) -> None:
        self.outstanding += credits

    def granted(self, runs: int) -> int:
        """`runs` arrived; how many of them no credit covered (a node breaking the contract)."""
        over = max(0, runs - self.outstanding)
        self.outstanding -= runs - over
        return over


class SessionError(grpc.RpcError, grpc.Call):
    """A session call's failure, shaped as a unary call's (code and details) so that the same
    retry rules apply: UNAVAILABLE when the session ended before the answer came."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def initial_metadata(self):
        return ()

    def trailing_metadata(self):
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback) -> bool:
        return False


class SessionClosed(SessionError):
    """The session ended before the message was sent: it can go unary at once."""

    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.UNAVAILABLE, "the worker session ended")


class _Answer:
    __slots__ = ("done", "response", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.response: Any = None
        self.error: BaseException | None = None


_CLOSE = object()


class WorkerSession:
    """One session: `open` it, then `serve` (blocks until it ends) on the lease thread.

    `accept(grant)` holds one granted run (it is called under the session's lock, so that the
    free slots it takes and the credits the grant used change together; a report it makes must
    not wait for an answer, which this session's own thread reads). `on_grants(oldest_credit_at, now, credits,
    granted)` observes each push (wall-clock times), for benchmarks."""

    def __init__(
        self,
        worker_id: str,
        targets: list[str],
        table: LeaseTable,
        accept: Callable[[worker_pb2.LeaseGrant], None],
        call_timeout_s: float,
        on_grants: Callable[[float, float, int, int], None] | None = None,
    ) -> None:
        self.worker_id, self.targets = worker_id, list(targets)
        self._table, self._accept, self._call_timeout_s = table, accept, call_timeout_s
        self._on_grants = on_grants
        self._ledger = CreditLedger()
        self._credit_times: collections.deque[list] = collections.deque()  # [announced at, credits left]
        self._lock = threading.Lock()  # the ledger, and the table's slots taken by grants
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: dict[int, _Answer] = {}
        self._seq = 0
        self._ended = threading.Event()
        self._call: Any = None
        self.address = ""

    @property
    def usable(self) -> bool:
        return self._call is not None and not self._ended.is_set()

    def open(self, client: ClusterClient) -> None:
        """Raises grpc.RpcError when no node opens it (UNIMPLEMENTED: the cluster has no sessions)."""
        self._call, first, self.address = client.open_session(self._requests, self._call_timeout_s)
        if first.WhichOneof("kind") != "opened":
            self._call.cancel()
            raise SessionError(grpc.StatusCode.INTERNAL, "the node's first session message was not `opened`")
        if first.opened.max_credits > 0:
            self._ledger.max_credits = first.opened.max_credits

    def _requests(self) -> Iterator[worker_pb2.SessionRequest]:
        """The messages of one attempt to open the session. Each attempt has a queue of its own:
        the messages of a refused attempt are still being read by gRPC, and would take the next
        attempt's. The last attempt made is the one that opened."""
        outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._outbox.put(_CLOSE)
        self._outbox = outbox
        return self._messages(outbox)

    def _messages(self, outbox: queue.SimpleQueue) -> Iterator[worker_pb2.SessionRequest]:
        yield worker_pb2.SessionRequest(open=worker_pb2.SessionOpen(worker_id=self.worker_id, targets=self.targets))
        while True:
            message = outbox.get()
            if message is _CLOSE:
                return
            yield message

    def serve(self, stopping: threading.Event) -> grpc.RpcError | None:
        """Read the node's messages until the session ends; the error that ended it, if any."""
        announcer = threading.Thread(target=self._announce, args=(stopping,), daemon=True, name="raftcron-credits")
        announcer.start()
        try:
            for message in self._call:
                kind = message.WhichOneof("kind")
                if kind == "grants":
                    self._granted(message.grants.leases)
                elif kind in ("heartbeat", "complete", "refused"):
                    self._answered(message, kind)
            return None
        except grpc.RpcError as error:
            return error
        finally:
            self.close()
            announcer.join(1.0)

    def close(self) -> None:
        if self._ended.is_set():
            return
        self._ended.set()
        self._outbox.put(_CLOSE)
        if self._call is not None:
            self._call.cancel()
        self._table.wake()
        with self._lock:
            pending, self._pending = self._pending, {}
        for answer in pending.values():
            answer.error = SessionError(grpc.StatusCode.UNAVAILABLE, "the worker session ended before the answer")
            answer.done.set()

    # -- grants and credits --------------------------------------------------------------------------
    def _granted(self, grants) -> None:
        now = time.time()
        with self._lock:
            credits = self._ledger.outstanding
            for grant in grants:
                self._accept(grant)  # takes a slot: under the lock, with the ledger below
            over = self._ledger.granted(len(grants))
            oldest = self._use_credit_times(len(grants) - over, now)
        self._table.wake()  # the announcer looks again
        if over:
            log.warning("the node granted %d runs beyond this worker's credits; they were handed back", over)
        if self._on_grants is not None:
            self._on_grants(oldest, now, credits, len(grants))

    def _use_credit_times(self, used: int, now: float) -> float:
        oldest = now
        while used > 0 and self._credit_times:
            entry = self._credit_times[0]
            oldest = min(oldest, entry[0])
            taken = min(used, entry[1])
            entry[1] -= taken
            used -= taken
            if entry[1] == 0:
                self._credit_times.popleft()
        return oldest

    def _announce(self, stopping: threading.Event) -> None:
        """Announce credits whenever slots free (a handler returned, an outcome was answered)."""
        table = self._table
        while True:
            table.wait(
                lambda: (
                    self._ended.is_set() or stopping.is_set() or self._ledger.to_announce(table.free_slots_locked()) > 0
                ),
                None,
            )
            if self._ended.is_set() or stopping.is_set():
                return
            with self._lock:
                credits = self._ledger.to_announce(table.free_slots())
                self._ledger.announced(credits)
                if credits:
                    self._credit_times.append([time.time(), credits])
            if credits:
                self._outbox.put(worker_pb2.SessionRequest(credits=credits))

    # -- heartbeats and outcomes -------------------------------------------------------------------
    def call(self, kind: str, request, timeout_s: float | None) -> Any:
        """The node's answer to a heartbeat or complete sent on the session (HeartbeatResponse,
        CompleteManyResponse); raises SessionError as the unary call would fail."""
        answer = _Answer()
        with self._lock:
            if self._ended.is_set():
                raise SessionClosed()
            self._seq += 1
            seq = self._seq
            self._pending[seq] = answer
        self._outbox.put(worker_pb2.SessionRequest(seq=seq, **{kind: request}))
        if not answer.done.wait(self._call_timeout_s if timeout_s is None else timeout_s):
            with self._lock:
                self._pending.pop(seq, None)
            raise SessionError(grpc.StatusCode.DEADLINE_EXCEEDED, f"no answer to the session's {kind} in time")
        if answer.error is not None:
            raise answer.error
        return answer.response

    def _answered(self, message: worker_pb2.SessionResponse, kind: str) -> None:
        with self._lock:
            answer = self._pending.pop(message.seq, None)
        if answer is None:
            return  # its caller gave up waiting
        if kind == "refused":
            code = _CODES.get(message.refused.code, grpc.StatusCode.UNKNOWN)
            answer.error = SessionError(code, message.refused.message)
        else:
            answer.response = getattr(message, kind)
        answer.done.set()


class WorkerCalls:
    """Heartbeats and outcomes: on the open session when there is one, unary calls otherwise."""

    def __init__(self, client: ClusterClient) -> None:
        self.client = client
        self.session: WorkerSession | None = None

    def _on_session(self, kind: str, request: Callable[[], Any], timeout_s: float | None) -> Any:
        """The answer on the open session, or None: no session, or it ended just now (go unary)."""
        session = self.session
        if session is None or not session.usable:
            return None
        try:
            return session.call(kind, request(), timeout_s)
        except SessionClosed:
            return None

    def heartbeat(
        self, request: worker_pb2.HeartbeatRequest | None = None, /, *, timeout_s: float | None = None, **fields: Any
    ) -> worker_pb2.HeartbeatResponse:
        answer = self._on_session("heartbeat", lambda: request or worker_pb2.HeartbeatRequest(**fields), timeout_s)
        return answer if answer is not None else self.client.heartbeat(request, timeout_s=timeout_s, **fields)

    def complete_many(
        self,
        request: worker_pb2.CompleteManyRequest | None = None,
        /,
        *,
        timeout_s: float | None = None,
        **fields: Any,
    ) -> worker_pb2.CompleteManyResponse:
        answer = self._on_session("complete", lambda: request or worker_pb2.CompleteManyRequest(**fields), timeout_s)
        return answer if answer is not None else self.client.complete_many(request, timeout_s=timeout_s, **fields)

    def complete(
        self, request: worker_pb2.CompleteRequest | None = None, /, *, timeout_s: float | None = None, **fields: Any
    ) -> worker_pb2.CompleteResponse:
        return self.client.complete(request, timeout_s=timeout_s, **fields)
