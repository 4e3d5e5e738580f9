"""The gate every raftcron.v1 call passes before its servicer runs.

`LimitsInterceptor` answers INVALID_ARGUMENT with every problem `request_problems` lists
(request_checks.py; bytes that are no message too), cleans the free text of what it lets
through, caps the long polls waiting at once and the state digests computed at once
(RESOURCE_EXHAUSTED beyond), and ends a long poll before its caller's deadline.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import grpc
from google.protobuf.message import DecodeError

from scheduler.rpc.limits import DEFAULT_LIMITS, RpcLimits
from scheduler.rpc.request_checks import _PACKAGE, clean_free_text, describe, request_problems, status_code
from worker.api.v1 import worker_pb2 as wpb

__all__ = ["LimitsInterceptor"]

_LEASE_METHOD = "/raftcron.v1.WorkerService/Lease"
_STATUS_METHOD = "/raftcron.v1.ClusterService/Status"
_SESSION_METHOD = "/raftcron.v1.WorkerService/Session"


@dataclass(frozen=True)
class _Undecodable:
    reason: str


class LimitsInterceptor(grpc.ServerInterceptor):
    """Refuses invalid requests, caps concurrent long polls and digests, keeps long polls inside deadlines."""

    def __init__(self, limits: RpcLimits = DEFAULT_LIMITS, max_lease_waits: int | None = None) -> None:
        self._limits = limits
        self._lease_waits = threading.BoundedSemaphore(max_lease_waits or limits.max_concurrent_lease_waits)
        self._digests = threading.BoundedSemaphore(limits.max_concurrent_digests)

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is not None and method == _SESSION_METHOD and handler.stream_stream is not None:
            return self._session(handler)
        if handler is None or handler.unary_unary is None or not method.startswith("/" + _PACKAGE):
            return handler
        behavior, parse = handler.unary_unary, handler.request_deserializer

        def parsed(data: bytes):
            # gRPC answers an undecodable request INTERNAL and logs a traceback for each one: it is
            # the caller's mistake (or malice), answered INVALID_ARGUMENT without a log line.
            try:
                return parse(data)
            except DecodeError as error:
                return _Undecodable(str(error))

        def checked(request, context):
            if isinstance(request, _Undecodable):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a valid message: {request.reason}")
            problems = request_problems(request, self._limits)
            if problems:
                context.abort(status_code(problems), describe(problems))
            clean_free_text(request)
            if method == _LEASE_METHOD and request.HasField("wait") and request.wait.ToNanoseconds() > 0:
                self._fit_wait(request, context)
                gate, busy = self._lease_waits, "too many Lease calls are waiting on this node; retry after a pause"
            elif method == _STATUS_METHOD and request.include_digest:
                gate, busy = self._digests, "include_digest: another digest is being computed on this node; retry"
            else:
                return behavior(request, context)
            if not gate.acquire(blocking=False):
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, busy)
            try:
                return behavior(request, context)
            finally:
                gate.release()

        return grpc.unary_unary_rpc_method_handler(
            checked,
            request_deserializer=parsed if parse is not None else None,
            response_serializer=handler.response_serializer,
        )

    def _session(self, handler):
        """A worker session holds a server thread for as long as it lasts, as a long poll holds
        one while it waits: it takes one of the same places (its messages are checked one by one
        by the session, which refuses a bad one as the unary call would)."""
        behavior = handler.stream_stream

        def gated(requests, context):
            if not self._lease_waits.acquire(blocking=False):
                context.abort(
                    grpc.StatusCode.RESOURCE_EXHAUSTED, "too many worker sessions and Lease calls wait on this node"
                )
            try:
                yield from behavior(requests, context)
            finally:
                self._lease_waits.release()

        return grpc.stream_stream_rpc_method_handler(
            gated, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )

    def _fit_wait(self, request: wpb.LeaseRequest, context) -> None:
        """A long poll answers before its caller gives up: runs granted to a caller that is
        gone would sit leased until their TTL runs out."""
        remaining_s = context.time_remaining()
        if remaining_s is None:
            return
        budget_s = max(0.0, remaining_s - self._limits.deadline_margin_s)
        if request.wait.ToNanoseconds() > budget_s * 1e9:
            request.wait.FromNanoseconds(int(budget_s * 1e9))
