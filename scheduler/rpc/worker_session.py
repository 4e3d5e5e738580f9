"""WorkerService.Session: one long-lived stream per worker, on the leader.

The worker opens it with its id and targets, then announces credits (runs it can start); a
granter thread leases runs from the dispatcher for at most the credits not yet used and pushes
them. Heartbeats and outcomes sent on the stream are answered by the servicer's own Heartbeat and
CompleteMany, through a context whose abort becomes a refusal of that one message: the same
checks, fencing and authorization as the unary calls, answered on the stream (docs/design/
worker-stream.md). A node that is not leading ends the session UNAVAILABLE naming the leader;
the end of the leader's epoch ends it the same way.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import grpc
from google.protobuf.duration_pb2 import Duration

from scheduler.leader.dispatch import NotLeading
from scheduler.replication import ReplicationError
from scheduler.rpc.request_checks import clean_free_text, describe, request_problems, status_code
from scheduler.security.interceptor import current_principal, require
from scheduler.security.policy import lease_denial, lease_holder
from worker.api.v1 import worker_pb2 as wpb
from worker.api.v1.metadata import LEADER_ADDRESS

if TYPE_CHECKING:
    from scheduler.rpc.workers import WorkerServicer

__all__ = ["SessionCredits", "serve_session"]

log = logging.getLogger("raftcron.rpc.session")

# Most credits a node holds for one session: what one Lease may grant.
MAX_SESSION_CREDITS = 1000
# Heartbeats and outcomes of one session answered at once; the reader waits beyond (and the
# stream's own flow control then holds the worker back).
SESSION_CALLS_IN_FLIGHT = 4
SESSION_QUEUED_CALLS = 16
# How long one dispatcher lease of a granter waits for a run before looking at its session again.
SESSION_LEASE_WAIT_S = 2.0
# Leases of one session in flight at once: credits that arrive while one grant commits are
# granted by the next at once, instead of after that commit (a commit is most of a grant's latency).
SESSION_GRANTERS = 2
# The open message must arrive within this of the call (as a unary call's request must).
OPEN_TIMEOUT_S = 15.0


class SessionCredits:
    """The runs a worker said it can start that no grant has used yet: the node never grants
    more (pure; the session holds its lock). Each lease reserves every credit left, so that
    leases in flight at once (SESSION_GRANTERS) never ask for the same credit twice."""

    def __init__(self, max_credits: int = MAX_SESSION_CREDITS) -> None:
        self.max_credits = max_credits
        self._left = 0
        self._reserved = 0

    @property
    def available(self) -> int:
        return self._left

    def add(self, credits: int) -> None:
        """More runs the worker can start. Beyond `max_credits` in all (reserved ones included)
        they are dropped: a worker that keeps the contract never announces more."""
        if credits > 0:
            self._left = min(self.max_credits - self._reserved, self._left + credits)

    def reserve(self) -> int:
        """Every credit left, for the next lease to ask for (0: wait for more)."""
        taken, self._left = self._left, 0
        self._reserved += taken
        return taken

    def settle(self, reserved: int, granted: int) -> None:
        """A lease that reserved `reserved` credits granted `granted` runs; the rest are left."""
        if not 0 <= granted <= reserved <= self._reserved:
            raise ValueError(f"{granted} runs granted against {reserved} credits reserved ({self._reserved} in all)")
        self._reserved -= reserved
        self._left += reserved - granted


class _Refusal(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code, self.details = code, details


class _MessageContext:
    """What the unary handlers use of a context, for one message of a session: an abort refuses
    that message, not the session."""

    def __init__(self, context) -> None:
        self._context = context

    def abort(self, code: grpc.StatusCode, details: str):
        raise _Refusal(code, details)

    def set_trailing_metadata(self, metadata) -> None:
        pass  # OUTCOME_UNKNOWN: every refusal of a session is one the worker may send again

    def peer(self) -> str:
        return self._context.peer()

    def invocation_metadata(self):
        return self._context.invocation_metadata()

    def time_remaining(self) -> float | None:
        return None


_END = object()


class _Session:
    def __init__(self, servicer: WorkerServicer, dispatcher, context) -> None:
        self.servicer, self.dispatcher, self.context = servicer, dispatcher, context
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.credits = SessionCredits()
        self.lock = threading.Lock()
        self.wake = threading.Event()  # credits arrived, the session ends, or the epoch does
        self.stopping = threading.Event()
        self.ending: tuple[grpc.StatusCode, str] | None = None
        self.calls = threading.BoundedSemaphore(SESSION_QUEUED_CALLS)
        self.pool = ThreadPoolExecutor(SESSION_CALLS_IN_FLIGHT, thread_name_prefix="session-call")
        self.opened = threading.Event()
        self.open: wpb.SessionOpen | None = None
        self.holder = ""

    def end(self, status: tuple[grpc.StatusCode, str] | None = None) -> None:
        with self.lock:
            if self.stopping.is_set():
                return
            self.ending = status
            self.stopping.set()
        self.wake.set()
        self.opened.set()
        self.outbox.put(_END)

    # -- the reader: the worker's messages --------------------------------------------------------
    def read(self, requests) -> None:
        try:
            for message in requests:
                if self.stopping.is_set():
                    return
                self._take(message)
            self.end()  # the worker closed its side
        except grpc.RpcError:
            self.end()  # cancelled, or the connection went
        except Exception:  # noqa: BLE001 (a bug here must end the session, not leave it hanging)
            log.exception("worker session: reading failed")
            self.end((grpc.StatusCode.INTERNAL, "the node failed reading the session"))

    def _take(self, message: wpb.SessionRequest) -> None:
        kind = message.WhichOneof("kind")
        problems = request_problems(message, self.servicer.limits)
        if kind == "open" or self.open is None:
            if problems or kind != "open" or self.open is not None:
                why = describe(problems) if problems else "a session starts with one open message, and only one"
                self.end((status_code(problems) if problems else grpc.StatusCode.INVALID_ARGUMENT, why))
                return
            self.open = message.open
            self.opened.set()
            return
        if problems:
            self.outbox.put(_refused(message.seq, status_code(problems), describe(problems)))
            return
        if kind == "credits":
            with self.lock:
                self.credits.add(message.credits)
            self.wake.set()
            return
        clean_free_text(message)
        self.calls.acquire()  # the worker waits while SESSION_QUEUED_CALLS are being answered
        try:
            self.pool.submit(contextvars.copy_context().run, self._answer, kind, message)
        except RuntimeError:  # the pool was shut down: the session ended meanwhile
            self.calls.release()

    def _answer(self, kind: str, message: wpb.SessionRequest) -> None:
        try:
            if kind == "heartbeat":
                answer = wpb.SessionResponse(
                    seq=message.seq, heartbeat=self.servicer.Heartbeat(message.heartbeat, self._for_message())
                )
            else:
                answer = wpb.SessionResponse(
                    seq=message.seq, complete=self.servicer.CompleteMany(message.complete, self._for_message())
                )
        except _Refusal as refusal:
            answer = _refused(message.seq, refusal.code, refusal.details)
        except Exception:  # noqa: BLE001 (answered, as a unary call's failure would be)
            log.exception("worker session: answering a %s failed", kind)
            answer = _refused(message.seq, grpc.StatusCode.INTERNAL, f"the node failed answering this {kind}")
        finally:
            self.calls.release()
        self.outbox.put(answer)

    def _for_message(self) -> _MessageContext:
        return _MessageContext(self.context)

    # -- the granter: runs against credits ----------------------------------------------------------
    def grant(self, targets: list[str]) -> None:
        registry, peer = self.servicer.registry, self.context.peer()
        try:
            while True:
                self.wake.clear()
                with self.lock:
                    ask = self.credits.reserve()
                if self.stopping.is_set():
                    return
                if ask == 0:
                    self.wake.wait()
                    continue
                granted = []
                try:
                    registry.leased(self.holder, targets, peer)
                    granted = self.dispatcher.lease(
                        self.holder, targets, min(ask, MAX_SESSION_CREDITS), SESSION_LEASE_WAIT_S
                    )
                finally:
                    with self.lock:
                        self.credits.settle(ask, len(granted))
                    self.wake.set()  # the other granter may take what this one did not use
                if granted:
                    pushed = self.servicer.grants_to_pb(granted)
                    with self.lock:  # before the end's marker in the outbox, or handed back
                        ended = self.stopping.is_set()
                        if not ended:
                            self.outbox.put(wpb.SessionResponse(grants=pushed))
                    if ended:
                        self._hand_back(pushed.leases)
        except NotLeading as exc:
            self.end(self._not_leading(f"not leading: {exc}"))
        except ReplicationError as exc:
            self.end((grpc.StatusCode.UNAVAILABLE, f"granting failed: {exc}"))
        except Exception:  # noqa: BLE001
            log.exception("worker session: granting failed")
            self.end((grpc.StatusCode.INTERNAL, "the node failed granting runs"))

    def _hand_back(self, grants) -> None:
        """Runs granted while the worker went away: released at once, as the SDK hands back a
        grant that crossed its stop, instead of held until their lease expires."""
        worker_id = self.open.worker_id if self.open is not None else ""
        request = wpb.CompleteManyRequest(
            worker_id=worker_id,
            completions=[
                wpb.CompleteRequest(
                    worker_id=worker_id,
                    lease=wpb.LeaseRef(job_id=g.job_id, scheduled_at=g.scheduled_at, fencing_token=g.fencing_token),
                    kind=wpb.RETRY_LATER,
                    error="the worker session ended before this grant reached the worker",
                    retry_after=Duration(),  # zero: at once (unset would mean the job's backoff)
                )
                for g in grants
            ],
        )
        try:
            self.servicer.CompleteMany(request, self._for_message())
        except Exception as exc:  # noqa: BLE001 (the leases then expire: what the unary path does)
            log.warning("worker session: %d runs granted after it ended not handed back: %r", len(grants), exc)

    def _not_leading(self, why: str) -> tuple[grpc.StatusCode, str]:
        address = self.servicer.leader_address()
        if address:
            self.context.set_trailing_metadata(((LEADER_ADDRESS, address),))
        return grpc.StatusCode.UNAVAILABLE, why + (f"; the leader is {address}" if address else "")


def _refused(seq: int, code: grpc.StatusCode, details: str) -> wpb.SessionResponse:
    return wpb.SessionResponse(seq=seq, refused=wpb.SessionRefusal(code=code.value[0], message=details))


def serve_session(servicer: WorkerServicer, requests, context):
    """The body of WorkerService.Session (a generator of the node's messages)."""
    dispatcher = servicer.dispatcher_now()
    if dispatcher is None:
        address = servicer.leader_address()
        if address:
            context.set_trailing_metadata(((LEADER_ADDRESS, address),))
        context.abort(
            grpc.StatusCode.UNAVAILABLE,
            "not leading: open the session on the leader" + (f" {address}" if address else ""),
        )
    session = _Session(servicer, dispatcher, context)
    context.add_callback(session.end)  # the worker went: stop granting
    unwatch = dispatcher.watch_depose(session.wake)
    # The principal the interceptor bound is a context variable of this thread: the session's
    # threads run in copies of this context.
    reader = threading.Thread(
        target=contextvars.copy_context().run, args=(session.read, requests), daemon=True, name="session-reader"
    )
    reader.start()
    try:
        if not session.opened.wait(OPEN_TIMEOUT_S) or session.open is None:
            context.abort(*(session.ending or (grpc.StatusCode.DEADLINE_EXCEEDED, "no open message in time")))
        targets = list(session.open.targets)
        require(context, lease_denial, targets)
        session.holder = lease_holder(current_principal(), session.open.worker_id)
        for _ in range(SESSION_GRANTERS):
            threading.Thread(
                target=contextvars.copy_context().run,
                args=(session.grant, targets),
                daemon=True,
                name="session-granter",
            ).start()
        yield wpb.SessionResponse(opened=wpb.SessionOpened(max_credits=session.credits.max_credits))
        while True:
            message = session.outbox.get()
            if message is _END:
                break
            yield message
        if session.ending is not None:
            context.abort(*session.ending)
    finally:
        session.end()
        unwatch()
        session.pool.shutdown(wait=False)
