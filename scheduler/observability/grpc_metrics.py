"""Per-method gRPC server metrics under the names every gRPC Prometheus middleware exports.

    metrics = GrpcServerMetrics(service_descriptors)    # the services the server registers
    server = grpc.server(pool, interceptors=[metrics.interceptor(), ...])
    registry.register(metrics)                          # a prometheus_client collector

The families are those of go-grpc-prometheus and py-grpc-prometheus, so existing dashboards and
alerts work unchanged:

    grpc_server_started_total{grpc_type, grpc_service, grpc_method}
    grpc_server_handled_total{grpc_type, grpc_service, grpc_method, grpc_code}
    grpc_server_handling_seconds{grpc_type, grpc_service, grpc_method}      (a histogram)
    grpc_server_msg_received_total{grpc_type, grpc_service, grpc_method}
    grpc_server_msg_sent_total{grpc_type, grpc_service, grpc_method}

grpc_type is `unary`, `client_stream`, `server_stream` or `bidi_stream`, taken from the
method's descriptor (the interceptors after this one rewrite handler shapes). Cardinality is
bounded: the methods are the fixed set of the registered services, and any other method name a
caller sends is counted under the one value `unknown` (service, method and type); grpc_code is one
of gRPC's 17 codes. A call is counted when a handler is found, so calls refused by the
authentication interceptor (UNAUTHENTICATED, PERMISSION_DENIED) are counted too.

The hot path takes one lock per call twice (start and end) and does a bisect: a few
microseconds, next to the hundreds a call costs (measured in the design note
docs/design/grpc-server-metrics.md).
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Iterable, Iterator

import grpc
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

__all__ = ["GrpcServerMetrics", "HANDLING_BUCKETS_S", "UNKNOWN"]

# prometheus_client's default buckets, which both middlewares use.
HANDLING_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UNKNOWN = "unknown"
_UNKNOWN_LABELS = (UNKNOWN, UNKNOWN, UNKNOWN)
_OK = grpc.StatusCode.OK


def grpc_type(client_streaming: bool, server_streaming: bool) -> str:
    if client_streaming and server_streaming:
        return "bidi_stream"
    if client_streaming:
        return "client_stream"
    return "server_stream" if server_streaming else "unary"


class _MethodStats:
    """One method's counts as plain integers, under its own lock."""

    __slots__ = ("labels", "client_streaming", "lock", "started", "handled", "received", "sent", "buckets", "seconds")

    def __init__(self, labels: tuple[str, str, str], client_streaming: bool = False) -> None:
        self.labels = labels  # (grpc_type, grpc_service, grpc_method)
        # Else the caller sends exactly one message: counted as received, as both middlewares do.
        self.client_streaming = client_streaming
        self.lock = threading.Lock()
        self.started = 0
        self.handled: dict[grpc.StatusCode, int] = {}
        self.received = 0
        self.sent = 0
        self.buckets = [0] * (len(HANDLING_BUCKETS_S) + 1)
        self.seconds = 0.0

    def start(self) -> None:
        with self.lock:
            self.started += 1

    def finish(self, code: grpc.StatusCode, elapsed_s: float, received: int, sent: int) -> None:
        slot = bisect.bisect_left(HANDLING_BUCKETS_S, elapsed_s)
        with self.lock:
            self.handled[code] = self.handled.get(code, 0) + 1
            self.received += received
            self.sent += sent
            self.buckets[slot] += 1
            self.seconds += elapsed_s

    def add_messages(self, received: int = 0, sent: int = 0) -> None:
        with self.lock:
            self.received += received
            self.sent += sent

    def snapshot(self) -> tuple[int, dict[str, int], int, int, list[int], float]:
        with self.lock:
            handled = {code.name: count for code, count in self.handled.items()}
            return self.started, handled, self.received, self.sent, list(self.buckets), self.seconds


def _failed_code(context) -> grpc.StatusCode:
    """The code of a call whose handler raised: the one it aborted with, CANCELLED when the
    caller went away, UNKNOWN (what gRPC answers) for a plain exception."""
    code = context.code()
    if code is not None:
        return code
    return grpc.StatusCode.UNKNOWN if context.is_active() else grpc.StatusCode.CANCELLED


class GrpcServerMetrics(Collector):
    def __init__(self, services: Iterable) -> None:
        """`services`: the protobuf ServiceDescriptors the server registers."""
        self._by_method: dict[str, _MethodStats] = {}
        for service in services:
            for method in service.methods:
                labels = (grpc_type(method.client_streaming, method.server_streaming), service.full_name, method.name)
                self._by_method[f"/{service.full_name}/{method.name}"] = _MethodStats(labels, method.client_streaming)
        self._unknown = _MethodStats(_UNKNOWN_LABELS)

    def stats_for(self, method: str) -> _MethodStats:
        return self._by_method.get(method, self._unknown)

    def interceptor(self) -> grpc.ServerInterceptor:
        return _MetricsInterceptor(self)

    # -- the collector ----------------------------------------------------------------------
    def describe(self) -> Iterable:
        return []

    def collect(self) -> Iterator:
        labels = ["grpc_type", "grpc_service", "grpc_method"]
        started = CounterMetricFamily("grpc_server_started", "RPCs started on the server.", labels=labels)
        handled = CounterMetricFamily(
            "grpc_server_handled", "RPCs completed on the server, by status code.", labels=[*labels, "grpc_code"]
        )
        seconds = HistogramMetricFamily(
            "grpc_server_handling_seconds", "Time the server took to handle RPCs, to their end.", labels=labels
        )
        received = CounterMetricFamily(
            "grpc_server_msg_received", "Request messages received by the server.", labels=labels
        )
        sent = CounterMetricFamily("grpc_server_msg_sent", "Response messages sent by the server.", labels=labels)
        every = [*self._by_method.values()]
        if self._unknown.snapshot()[0]:
            every.append(self._unknown)
        bounds = [*(repr(float(b)) for b in HANDLING_BUCKETS_S), "+Inf"]
        for stats in every:
            key = list(stats.labels)
            n_started, n_handled, n_received, n_sent, buckets, total_s = stats.snapshot()
            started.add_metric(key, n_started)
            for code, count in sorted(n_handled.items()):
                handled.add_metric([*key, code], count)
            running, cumulative = 0, []
            for bound, count in zip(bounds, buckets):
                running += count
                cumulative.append((bound, running))
            seconds.add_metric(key, cumulative, total_s)
            received.add_metric(key, n_received)
            sent.add_metric(key, n_sent)
        yield from (started, handled, seconds, received, sent)


class _MetricsInterceptor(grpc.ServerInterceptor):
    """Outermost, so it times and counts what the other interceptors refuse as well."""

    def __init__(self, metrics: GrpcServerMetrics) -> None:
        self._metrics = metrics

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        stats = self._metrics.stats_for(handler_call_details.method)
        if handler is None:
            return _unimplemented(stats)
        return _measured(handler, stats)


def _unimplemented(stats: _MethodStats):
    """What gRPC answers a method it does not know, counted (under `unknown`) and without
    reading the request body."""

    def refuse(_requests, context):
        stats.start()
        stats.finish(grpc.StatusCode.UNIMPLEMENTED, 0.0, 0, 0)
        context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")

    return grpc.stream_unary_rpc_method_handler(refuse)


def counted(requests, counter: list[int]):
    for request in requests:
        counter[0] += 1
        yield request


def _measured(handler, stats: _MethodStats):
    clock = time.perf_counter
    if handler.request_streaming and handler.response_streaming:
        field, behavior = "stream_stream", handler.stream_stream
    elif handler.request_streaming:
        field, behavior = "stream_unary", handler.stream_unary
    elif handler.response_streaming:
        field, behavior = "unary_stream", handler.unary_stream
    else:
        field, behavior = "unary_unary", handler.unary_unary
    # Whatever shape the interceptors after this one gave the handler, the descriptor says how
    # many messages the caller sends.
    count_requests = stats.client_streaming and handler.request_streaming

    if getattr(behavior, "experimental_non_blocking", False):
        # The health service's Watch: the behavior returns at once and the stream lives on; it
        # ends when the call does, reported by the callback.
        def non_blocking(request, context, send_response_callback):
            stats.start()
            began, received = clock(), [0 if count_requests else 1]
            if count_requests:
                request = counted(request, received)

            def send(response):
                stats.add_messages(sent=1)
                send_response_callback(response)

            context.add_callback(lambda: stats.finish(context.code() or _OK, clock() - began, received[0], 0))
            return behavior(request, context, send)

        non_blocking.experimental_non_blocking = True  # type: ignore[attr-defined]
        wrapped = non_blocking
    elif handler.response_streaming:

        def streaming(request, context):
            stats.start()
            began, received, sent, code = clock(), [0 if count_requests else 1], 0, _OK
            if count_requests:
                request = counted(request, received)
            try:
                for response in behavior(request, context):
                    sent += 1
                    yield response
                code = context.code() or _OK
            except GeneratorExit:  # the caller went away mid-stream
                code = grpc.StatusCode.CANCELLED
                raise
            except BaseException:
                code = _failed_code(context)
                raise
            finally:
                stats.finish(code, clock() - began, received[0], sent)

        wrapped = streaming
    elif count_requests:

        def client_stream(request, context):
            stats.start()
            began, received, code = clock(), [0], _OK
            try:
                response = behavior(counted(request, received), context)
                code = context.code() or _OK
                return response
            except BaseException:
                code = _failed_code(context)
                raise
            finally:
                stats.finish(code, clock() - began, received[0], 1 if code is _OK else 0)

        wrapped = client_stream
    else:

        def unary(request, context):
            stats.start()
            began, code = clock(), _OK
            try:
                response = behavior(request, context)
                code = context.code() or _OK
                return response
            except BaseException:
                code = _failed_code(context)
                raise
            finally:
                stats.finish(code, clock() - began, 1, 1 if code is _OK else 0)

        wrapped = unary
    # grpc's handler constructors import a module on every call; the handler is a namedtuple.
    replace = getattr(handler, "_replace", None)
    if replace is not None:
        return replace(**{field: wrapped})
    make = getattr(grpc, f"{field}_rpc_method_handler")
    return make(
        wrapped, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )
