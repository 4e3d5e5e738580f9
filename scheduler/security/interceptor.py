"""The gRPC side of authorization: a server interceptor that authenticates every call and
applies the method table, and the helpers servicers use for owner and target scopes.

    server = grpc.server(pool, interceptors=[AuthInterceptor(authenticator)])
    ...
    def PauseJob(self, request, context):              # in a servicer, after looking the job up
        require(context, job_change_denial, job.spec.id, job.spec.owner)

The interceptor runs on the server's polling thread; the principal is bound in a context
variable around the handler itself, on the thread that runs the call.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable

import grpc

from scheduler.security.policy import is_public, method_denial
from scheduler.security.principals import Authenticator, Principal

AUTHORIZATION = "authorization"
_BEARER = "bearer "

# None while the node runs without authentication (a loopback or explicitly insecure node).
_CALLER: contextvars.ContextVar[Principal | None] = contextvars.ContextVar("raftcron_caller", default=None)


def current_principal() -> Principal | None:
    """Who made the call being served; None when the node runs without authentication."""
    return _CALLER.get()


def require(context: grpc.ServicerContext, check: Callable[..., str | None], *args) -> None:
    """Abort with PERMISSION_DENIED when `check(principal, *args)` names a reason (auth on only)."""
    principal = _CALLER.get()
    if principal is None:
        return
    denial = check(principal, *args)
    if denial:
        context.abort(grpc.StatusCode.PERMISSION_DENIED, denial)


def audited_author(claimed: str) -> str:
    """The author recorded in replicated state: the authenticated principal when there is one."""
    principal = _CALLER.get()
    return principal.name if principal is not None else (claimed or "anonymous")


def bearer_token(metadata) -> str | None:
    for key, value in metadata or ():
        if key == AUTHORIZATION and isinstance(value, str) and value[: len(_BEARER)].lower() == _BEARER:
            return value[len(_BEARER) :].strip()
    return None


def caller_authorization(context: grpc.ServicerContext) -> tuple[tuple[str, str], ...]:
    """The caller's authorization metadata, to forward a call on its behalf."""
    return tuple((k, v) for k, v in context.invocation_metadata() if k == AUTHORIZATION)


class AuthInterceptor(grpc.ServerInterceptor):
    def __init__(self, authenticator: Authenticator) -> None:
        self._authenticator = authenticator

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or is_public(method):
            return handler
        principal = self._authenticator.authenticate(bearer_token(handler_call_details.invocation_metadata))
        if principal is None:
            return _refusing(handler, grpc.StatusCode.UNAUTHENTICATED, "a valid bearer token is required")
        denial = method_denial(principal, method)
        if denial:
            return _refusing(handler, grpc.StatusCode.PERMISSION_DENIED, denial)
        return _bound(handler, principal)


def _refusing(handler, code: grpc.StatusCode, message: str):
    """A call refused on its metadata alone, before a byte of its body is read or parsed: a
    request-streaming handler that never touches its request iterator, with no deserializer.
    (A unary handler would wait on a pool thread for a body that may never come.)"""

    def refuse(_requests, context):
        context.abort(code, message)

    def refuse_stream(_requests, context):
        context.abort(code, message)
        yield  # pragma: no cover - abort raises

    if handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(refuse_stream)
    return grpc.stream_unary_rpc_method_handler(refuse)


def _rebuild(handler, wrap):
    if handler.request_streaming and handler.response_streaming:
        make, behavior = grpc.stream_stream_rpc_method_handler, handler.stream_stream
    elif handler.request_streaming:
        make, behavior = grpc.stream_unary_rpc_method_handler, handler.stream_unary
    elif handler.response_streaming:
        make, behavior = grpc.unary_stream_rpc_method_handler, handler.unary_stream
    else:
        make, behavior = grpc.unary_unary_rpc_method_handler, handler.unary_unary
    return make(
        wrap(behavior, handler.response_streaming),
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


def _bound(handler, principal: Principal):
    def wrap(behavior, streaming: bool):
        def call(request, context):
            token = _CALLER.set(principal)
            try:
                return behavior(request, context)
            finally:
                _CALLER.reset(token)

        def call_stream(request, context):
            token = _CALLER.set(principal)
            try:
                yield from behavior(request, context)
            finally:
                _CALLER.reset(token)

        return call_stream if streaming else call

    return _rebuild(handler, wrap)
