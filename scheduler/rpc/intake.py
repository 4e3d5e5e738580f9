"""How a call's request message is read: on a deadline, a few calls at a time per caller.

gRPC's synchronous server reads a unary call's request on a pool thread, and waits for it as long
as the caller likes: about 70 calls that send their headers and never their body took every
thread, and every other call, the admin's Status included, hit its deadline. `RequestIntake`
turns each unary method into a request-streaming one, so the handler runs first and reads the
one message itself:

- the read has a deadline (`RpcLimits.request_read_timeout_s`): a call whose message has not
  arrived by then is cancelled, which wakes its thread;
- at most `max_reads` calls read at once on the node, and `max_reads_per_caller` for one caller
  (its principal, or its host without tokens); beyond, RESOURCE_EXHAUSTED at once, so one
  caller's stalled bodies hold a bounded share of the pool and another caller's Status reads its
  message at once.

A message normally arrives with its headers: a read slot is held for microseconds. A handler that
is already request-streaming is left alone: that is how the AuthInterceptor refuses a call on its
metadata alone, without reading its body at all (scheduler/security/interceptor.py).
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import Counter

import grpc

from scheduler.rpc.limits import DEFAULT_LIMITS, RpcLimits
from scheduler.security.interceptor import current_principal

__all__ = ["CallDeadlines", "RequestIntake", "caller_key"]

log = logging.getLogger("raftcron.rpc")


def caller_key(context) -> str:
    """Whose share a call's read counts against: its principal, else the host it comes from."""
    principal = current_principal()
    if principal is not None:
        return f"principal:{principal.name}"
    peer = context.peer() or ""  # "ipv4:127.0.0.1:5555", "ipv6:[::1]:5555", "unix:..."
    return "host:" + peer.rpartition(":")[0] if peer.count(":") >= 2 else "host:" + peer


class CallDeadlines:
    """One thread that runs each armed action once its deadline has passed, unless disarmed.

    Deadlines fall in buckets of `period_s` (they are seconds long; a fraction of one is precise
    enough), swept by one thread: arming costs a dict insert, no thread or timer per call, and
    only armed actions are kept (a disarmed one is dropped at once, not when its deadline comes).
    """

    def __init__(self, period_s: float = 0.25, clock=time.monotonic) -> None:
        self._period_s = period_s
        self._clock = clock
        self._lock = threading.Lock()
        self._buckets: dict[int, dict[int, object]] = {}
        self._tokens = itertools.count()
        self._thread: threading.Thread | None = None

    def arm(self, after_s: float, action) -> tuple[int, int]:
        bucket, token = math.ceil((self._clock() + after_s) / self._period_s), next(self._tokens)
        with self._lock:
            self._buckets.setdefault(bucket, {})[token] = action
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="call-deadlines", daemon=True)
                self._thread.start()
        return bucket, token

    def disarm(self, armed: tuple[int, int]) -> None:
        bucket, token = armed
        with self._lock:
            actions = self._buckets.get(bucket)
            if actions is not None:
                actions.pop(token, None)
                if not actions:
                    del self._buckets[bucket]

    def armed(self) -> int:
        with self._lock:
            return sum(len(actions) for actions in self._buckets.values())

    def due(self) -> list:
        """Take every action whose deadline has passed."""
        now = math.floor(self._clock() / self._period_s)
        with self._lock:
            passed = [bucket for bucket in self._buckets if bucket <= now]
            return [action for bucket in passed for action in self._buckets.pop(bucket).values()]

    def _run(self) -> None:
        while True:
            time.sleep(self._period_s)
            for action in self.due():
                try:
                    action()
                except Exception:  # a call that ended meanwhile; never lose the thread
                    log.debug("cancelling a call past its read deadline failed", exc_info=True)


class _Slots:
    """Counts of calls reading their request, node-wide and per caller."""

    def __init__(self, most: int, most_per_caller: int) -> None:
        self._lock = threading.Lock()
        self._most, self._most_per_caller = most, most_per_caller
        self._total = 0
        self._per_caller: Counter[str] = Counter()

    def take(self, key: str) -> str | None:
        """None when a slot was taken, else why not."""
        with self._lock:
            if self._per_caller[key] >= self._most_per_caller:
                return f"{self._most_per_caller} of your calls are still sending their request; retry after a pause"
            if self._total >= self._most:
                return f"{self._most} calls are still sending their request to this node; retry after a pause"
            self._total += 1
            self._per_caller[key] += 1
            return None

    def give(self, key: str) -> None:
        with self._lock:
            self._total -= 1
            self._per_caller[key] -= 1
            if not self._per_caller[key]:
                del self._per_caller[key]


class RequestIntake(grpc.ServerInterceptor):
    def __init__(
        self,
        limits: RpcLimits = DEFAULT_LIMITS,
        max_reads: int | None = None,
        max_reads_per_caller: int | None = None,
        deadlines: CallDeadlines | None = None,
    ) -> None:
        self._timeout_s = limits.request_read_timeout_s
        most = max_reads or limits.max_concurrent_request_reads
        self._slots = _Slots(most, min(most, max_reads_per_caller or limits.max_request_reads_per_caller))
        self._deadlines = deadlines or CallDeadlines()

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.request_streaming:
            return handler
        if handler.response_streaming:
            return self._streaming(handler)
        inner = handler.unary_unary

        def unary(request_iterator, context):
            return inner(self.read_one(request_iterator, context), context)

        return grpc.stream_unary_rpc_method_handler(
            unary, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )

    def _streaming(self, handler):
        inner = handler.unary_stream
        if getattr(inner, "experimental_non_blocking", False):  # the health service's Watch

            def stream(request_iterator, context, send_response_callback):
                return inner(self.read_one(request_iterator, context), context, send_response_callback)

            stream.experimental_non_blocking = True
        else:

            def stream(request_iterator, context):
                yield from inner(self.read_one(request_iterator, context), context)

        return grpc.stream_stream_rpc_method_handler(
            stream, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )

    def read_one(self, request_iterator, context):
        """The call's one request message, read within the deadline and its caller's share."""
        key = caller_key(context)
        busy = self._slots.take(key)
        if busy:
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, busy)
        timer = self._deadlines.arm(self._timeout_s, context.cancel)
        try:
            # A cancelled call (by its caller, or here at the deadline) raises grpc.RpcError,
            # which the server recognises as its own: it ends the call without a log line.
            return next(request_iterator)
        except StopIteration:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a unary call takes exactly one request message")
        finally:
            self._deadlines.disarm(timer)
            self._slots.give(key)
