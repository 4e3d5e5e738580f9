"""gRPC server reflection (grpc.reflection.v1alpha), so grpcurl, grpcui, Postman and the like
list the node's services and call them without a copy of proto/.

    add_reflection(server, service_names)     # while building the server

Reflection reveals the schema only, which is public (proto/ in the repository). What it costs is
a thread: a reflection call is a bidirectional stream that holds a server thread for as long as
the caller keeps it open. So a node serves at most MAX_STREAMS of them at once (RESOURCE_EXHAUSTED
beyond), ends each after STREAM_MAX_S, and, when the node has tokens on, asks for a token of any
role like every other call but the health check (scheduler/security/policy.py); see
docs/design/grpc-reflection.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2_grpc

from scheduler.rpc.intake import CallDeadlines

__all__ = ["MAX_STREAMS", "REFLECTION_SERVICE", "STREAM_MAX_S", "add_reflection"]

REFLECTION_SERVICE = reflection.SERVICE_NAME  # grpc.reflection.v1alpha.ServerReflection
MAX_STREAMS = 4
# grpcurl's `list` and `describe` take one stream of a few messages; a UI keeps one open a while.
STREAM_MAX_S = 60.0


class BoundedReflectionServicer(reflection.ReflectionServicer):
    def __init__(self, service_names: Iterable[str], max_streams: int, stream_max_s: float) -> None:
        super().__init__(tuple(service_names))
        self._streams = threading.BoundedSemaphore(max_streams)
        self._stream_max_s = stream_max_s
        self._deadlines = CallDeadlines()

    def ServerReflectionInfo(self, request_iterator, context):
        if not self._streams.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED, "too many reflection streams are open on this node; retry later"
            )
        armed = self._deadlines.arm(self._stream_max_s, context.cancel)
        try:
            yield from super().ServerReflectionInfo(request_iterator, context)
        finally:
            self._deadlines.disarm(armed)
            self._streams.release()


def add_reflection(
    server: grpc.Server,
    service_names: Iterable[str],
    max_streams: int = MAX_STREAMS,
    stream_max_s: float = STREAM_MAX_S,
) -> None:
    """Register the reflection service on `server`, listing `service_names` and itself."""
    names = (*service_names, REFLECTION_SERVICE)
    servicer = BoundedReflectionServicer(names, max_streams, stream_max_s)
    reflection_pb2_grpc.add_ServerReflectionServicer_to_server(servicer, server)
