"""How a call's request message is read: on a deadline, and slow reads within a share.

gRPC's synchronous server reads a unary call's request on a pool thread, and waits for it as long
as the caller likes: about 70 calls that send their headers and never their body took every
thread, and every other call, the admin's Status included, hit its deadline. `RequestIntake`
turns each unary method into a request-streaming one, so the handler runs first and reads the
one message itself, watched by a `ReadWatch`:

- a read still pending after `RpcLimits.slow_request_read_s` (0.5 s) is slow; a caller (its
  principal, or its host without tokens) may have `max_slow_request_reads_per_caller` of them,
  and the node `max_slow_request_reads` (never more than a quarter of grpc_threads): a read that
  turns slow beyond either is cancelled at once, which wakes its thread, and that caller's next
  calls are refused RESOURCE_EXHAUSTED at once while its slow reads last;
- every read is cancelled at `request_read_timeout_s`.

Only slow reads count: a legitimate burst waits for nothing but the server's polling thread, and
must not be refused. A flood of stalled calls holds threads for at most the slow threshold (plus a
sweep), then a few of them until the deadline. A handler that is already request-streaming is left
alone: that is how the AuthInterceptor refuses a call on its metadata alone, without reading its
body at all (scheduler/security/interceptor.py).
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

__all__ = ["CallDeadlines", "ReadWatch", "RequestIntake", "caller_key"]

log = logging.getLogger("raftcron.rpc")


def caller_key(context) -> str:
    """Whose share a call's read counts against: its principal, else the host it comes from."""
    principal = current_principal()
    if principal is not None:
        return f"principal:{principal.name}"
    peer = context.peer() or ""  # "ipv4:127.0.0.1:5555", "ipv6:[::1]:5555", "unix:..."
    return "host:" + peer.rpartition(":")[0] if peer.count(":") >= 2 else "host:" + peer


class CallDeadlines:
    """One thread that runs each armed action once its deadline has passed, unless disarmed (the
    HTTP port's deadline for a connection's request head).

    Deadlines fall in buckets of `period_s` (they are seconds long; a fraction of one is precise
    enough), swept by one thread: arming costs a dict insert, no thread or timer per deadline, and
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


class _Read:
    __slots__ = ("caller", "started", "cancel", "slow")

    def __init__(self, caller: str, started: float, cancel) -> None:
        self.caller, self.started, self.cancel, self.slow = caller, started, cancel, False


class ReadWatch:
    """The calls reading their request, and which of them are slow.

    A read is *slow* once it has waited `slow_s`: a message normally arrives with its call's
    headers, and a legitimate burst waits only for the server's own polling thread, so counting
    every pending read would refuse bursts (128 calls in flight from one host: a third refused).
    A caller with `most_slow_per_caller` slow reads, or with any while the node has `most_slow`,
    has further calls refused at once; a read that turns slow beyond either share is cancelled at
    once, and every read at `timeout_s`. `sweep` runs every `period_s` on one thread.
    """

    def __init__(
        self,
        timeout_s: float,
        slow_s: float,
        most_slow: int,
        most_slow_per_caller: int,
        period_s: float = 0.1,
        clock=time.monotonic,
    ) -> None:
        self._timeout_s, self._slow_s = timeout_s, slow_s
        self._most_slow, self._most_slow_per_caller = most_slow, min(most_slow, most_slow_per_caller)
        self._period_s, self._clock = period_s, clock
        self._lock = threading.Lock()
        self._reads: dict[int, _Read] = {}
        self._tokens = itertools.count()
        self._slow = 0
        self._slow_per_caller: Counter[str] = Counter()
        self._thread: threading.Thread | None = None

    def start(self, caller: str, cancel) -> int | str:
        """A token for the read, or why the caller must retry later."""
        with self._lock:
            slow = self._slow_per_caller[caller]
            if slow >= self._most_slow_per_caller or (slow and self._slow >= self._most_slow):
                return f"{slow} of your calls have not sent their request yet; retry after a pause"
            token = next(self._tokens)
            self._reads[token] = _Read(caller, self._clock(), cancel)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="request-reads", daemon=True)
                self._thread.start()
            return token

    def end(self, token: int) -> None:
        with self._lock:
            read = self._reads.pop(token, None)
            if read is not None and read.slow:
                self._unslow(read.caller)

    def pending(self) -> int:
        with self._lock:
            return len(self._reads)

    def sweep(self) -> list:
        """Mark reads that turned slow; the cancels of those beyond a share or past the deadline."""
        now, cancels = self._clock(), []
        with self._lock:
            for token, read in list(self._reads.items()):
                waited_s = now - read.started
                if waited_s >= self._timeout_s:
                    cancels.append(read.cancel)
                elif waited_s >= self._slow_s and not read.slow:
                    read.slow = True
                    self._slow += 1
                    self._slow_per_caller[read.caller] += 1
                    if self._slow_per_caller[read.caller] > self._most_slow_per_caller or self._slow > self._most_slow:
                        cancels.append(read.cancel)
                    else:
                        continue
                else:
                    continue
                del self._reads[token]  # its end() finds nothing; the counts are settled here
                if read.slow:
                    self._unslow(read.caller)
        return cancels

    def _unslow(self, caller: str) -> None:
        self._slow -= 1
        self._slow_per_caller[caller] -= 1
        if not self._slow_per_caller[caller]:
            del self._slow_per_caller[caller]

    def _run(self) -> None:
        while True:
            time.sleep(self._period_s)
            for cancel in self.sweep():
                try:
                    cancel()
                except Exception:  # a call that ended meanwhile; never lose the thread
                    log.debug("cancelling a call that did not send its request failed", exc_info=True)


class RequestIntake(grpc.ServerInterceptor):
    def __init__(
        self, limits: RpcLimits = DEFAULT_LIMITS, max_slow_reads: int | None = None, reads: ReadWatch | None = None
    ) -> None:
        self.reads = reads or ReadWatch(
            limits.request_read_timeout_s,
            limits.slow_request_read_s,
            max_slow_reads or limits.max_slow_request_reads,
            limits.max_slow_request_reads_per_caller,
        )

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
        token = self.reads.start(caller_key(context), context.cancel)
        if isinstance(token, str):
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, token)
        try:
            # A cancelled call (by its caller, or by the watch) raises grpc.RpcError, which the
            # server recognises as its own: it ends the call without a log line.
            return next(request_iterator)
        except StopIteration:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "a unary call takes exactly one request message")
        finally:
            self.reads.end(token)
