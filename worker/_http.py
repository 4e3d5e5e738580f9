"""The executor of `target: {http: ...}` jobs: one HTTP request per attempt.

The request carries `Idempotency-Key` (the run key) and `X-Raftcron-Fencing-Token`,
`X-Raftcron-Job`, `X-Raftcron-Scheduled-At` (ISO-8601 UTC) and `X-Raftcron-Attempt`, so the
server can deduplicate and fence without the job author remembering to. The body is the run's
JSON payload when it has one (a trigger's `--payload`, or the job's `payload:`), sent as
`application/json`, else the job's `body`.

Which hosts are called is the worker operator's decision (`--http-allow HOST[:PORT]`), checked
before any connection and again at every redirect (followed only when the job says so). The
request ends by min(the job's `timeout`, the run's deadline) whatever the server does: it runs in
a helper thread that a timer abandons (closing its socket), since a name lookup or a server
trickling bytes would not honour a socket timeout alone.

The standard library's http.client, not urllib or httpx: it follows no redirect and reads no
proxy from the environment on its own, and the SDK keeps needing nothing beyond grpcio and
protobuf. See docs/design/http-target.md.
"""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from urllib.parse import urljoin, urlsplit

from worker._context import RunContext
from worker._execution import Outcome, OutcomeKind, truncate_head
from worker.api.v1 import common_pb2

__all__ = ["HTTP_TARGET", "HttpAllowList", "HttpCall", "HttpRequest"]

log = logging.getLogger("raftcron.worker.http")

# The target name under which a worker leases `{http: ...}` jobs (every owner's).
HTTP_TARGET = "http"
BODY_PREFIX_BYTES = 4096
MAX_REDIRECTS = 5
DEFAULT_PORTS = {"http": 80, "https": 443}
BODYLESS_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
# Dropped when a redirect leaves the origin they were written for.
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})
USER_AGENT = "raftcron-worker"


def _host_port(text: str) -> tuple[str, int | None]:
    """`HOST`, `HOST:PORT`, `[V6]` or `[V6]:PORT`, lowercased."""
    parts = urlsplit("//" + text.strip())
    try:
        port = parts.port
    except ValueError as error:
        raise ValueError(f"--http-allow {text!r}: {error}") from None
    host = parts.hostname
    if not host or parts.path or parts.query or "@" in parts.netloc or "*" in text:
        raise ValueError(f"--http-allow {text!r}: expected HOST or HOST:PORT (no scheme, path or wildcard)")
    return host, port


class HttpAllowList:
    """The hosts a worker may call: `HOST` allows the scheme's default port (80 for http, 443 for
    https), `HOST:PORT` that port. Names match as written (case-insensitive), never resolved:
    allow `10.0.0.5` and `api.internal` separately if jobs use both."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.entries = tuple(dict.fromkeys(e.strip() for e in entries))
        self._allowed = {_host_port(entry) for entry in self.entries}

    def allows(self, host: str, port: int, scheme: str) -> bool:
        host = host.lower()
        return (host, port) in self._allowed or (port == DEFAULT_PORTS.get(scheme) and (host, None) in self._allowed)

    def __bool__(self) -> bool:
        return bool(self._allowed)

    def __repr__(self) -> str:
        return f"HttpAllowList({list(self.entries)!r})"


@dataclass(frozen=True)
class HttpRequest:
    """A job's request as the grant carries it."""

    url: str
    method: str = "GET"
    headers: tuple[tuple[str, str], ...] = ()
    body: str = ""
    timeout_s: float | None = None  # None: the run's deadline alone
    success_codes: frozenset[int] = frozenset()  # empty: any 2xx
    follow_redirects: bool = False

    @classmethod
    def from_pb(cls, target: common_pb2.HttpTarget) -> HttpRequest:
        return cls(
            url=target.url,
            method=(target.method or "GET").upper(),
            headers=tuple((h.name, h.value) for h in target.headers),
            body=target.body,
            timeout_s=target.timeout.ToNanoseconds() / 1e9 if target.HasField("timeout") else None,
            success_codes=frozenset(target.success_codes),
            follow_redirects=target.follow_redirects,
        )

    def succeeded(self, status: int) -> bool:
        return status in self.success_codes if self.success_codes else 200 <= status < 300


class _Failed(Exception):
    """An attempt that ends FAILURE with `message`, before or without a response."""

    def __init__(self, message: str, exception_type: str = "") -> None:
        super().__init__(message)
        self.message, self.exception_type = message, exception_type


@dataclass(frozen=True)
class _Response:
    status: int
    reason: str
    body_prefix: str


class HttpCall:
    """A handler that sends one job's HTTP request for a run (see the module docstring)."""

    def __init__(self, request: HttpRequest, allow: HttpAllowList, ssl_context: ssl.SSLContext | None = None) -> None:
        self.request = request
        self.allow = allow
        self.ssl_context = ssl_context or _default_tls()

    def __call__(self, ctx: RunContext) -> Outcome:
        budget_s = self._budget_s(ctx)
        if budget_s <= 0:
            return Outcome(OutcomeKind.FAILURE, error="deadline exceeded before the request was sent")
        try:
            self._check_allowed(self.request.url)  # before any thread, lookup or connection
        except _Failed as failed:
            return Outcome(OutcomeKind.FAILURE, error=failed.message, exception_type=failed.exception_type)
        exchange = _Exchange(self, ctx, None if budget_s == float("inf") else budget_s)
        done = threading.Event()
        ctx.add_cancel_callback(done.set)
        thread = threading.Thread(target=exchange.run, args=(done,), daemon=True, name="raftcron-http")
        thread.start()
        finished = done.wait(exchange.budget_s)
        if not finished or exchange.result is None:
            exchange.abandon()
            if ctx.is_cancelled():
                return Outcome(OutcomeKind.FAILURE, error=f"cancelled: {ctx.cancel_reason}")
            return Outcome(OutcomeKind.FAILURE, error=_timed_out(budget_s), exception_type="TimeoutError")
        return exchange.result

    def _budget_s(self, ctx: RunContext) -> float:
        """min(the job's request timeout, the time left before the run's deadline)."""
        left = (ctx.deadline - datetime.now(timezone.utc)).total_seconds() if ctx.deadline else None
        limits = [t for t in (self.request.timeout_s, left) if t is not None]
        return min(limits) if limits else float("inf")

    def _check_allowed(self, url: str) -> tuple[str, str, int]:
        parts = urlsplit(url)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
            raise _Failed(f"cannot call {url!r}: only http:// and https:// URLs with a host")
        try:
            port = parts.port or DEFAULT_PORTS[parts.scheme]
        except ValueError:
            raise _Failed(f"cannot call {url!r}: bad port") from None
        host = parts.hostname
        if not self.allow.allows(host, port, parts.scheme):
            where = _authority(host, port)
            raise _Failed(f"host {where} is not allowed on this worker: start it with --http-allow {where}")
        return parts.scheme, host, port


class _Exchange:
    """One attempt's request, redirects included, in a helper thread."""

    def __init__(self, call: HttpCall, ctx: RunContext, budget_s: float | None) -> None:
        self.call, self.ctx, self.budget_s = call, ctx, budget_s
        self.result: Outcome | None = None
        self._lock = threading.Lock()
        self._connection: http.client.HTTPConnection | None = None
        self._abandoned = False

    def run(self, done: threading.Event) -> None:
        try:
            self.result = self._outcome()
        except BaseException as error:  # noqa: BLE001 (a bug here must still end the attempt)
            log.exception("run %s: HTTP request failed unexpectedly", self.ctx.run_key)
            self.result = Outcome(OutcomeKind.FAILURE, error=truncate_head(f"{type(error).__name__}: {error}"))
        finally:
            done.set()

    def abandon(self) -> None:
        """Close the connection under the helper thread: it stops at its next socket call."""
        with self._lock:
            self._abandoned = True
            connection, self._connection = self._connection, None
        if connection is not None:
            _close(connection)

    def _outcome(self) -> Outcome:
        request = self.call.request
        try:
            response = self._send_following(request)
        except _Failed as failed:
            return Outcome(
                OutcomeKind.FAILURE, error=truncate_head(failed.message), exception_type=failed.exception_type
            )
        status_line = f"HTTP {response.status} {response.reason}".rstrip()
        tail = f"{status_line}\n{response.body_prefix}"
        if request.succeeded(response.status):
            return Outcome(
                OutcomeKind.SUCCESS, output_tail=tail, stdout_tail=response.body_prefix, http_status=response.status
            )
        error = status_line
        if response.status in REDIRECT_CODES and not request.follow_redirects:
            error += " (redirects are not followed: set follow_redirects: true to follow them)"
        return Outcome(
            OutcomeKind.FAILURE,
            error=error,
            output_tail=tail,
            stdout_tail=response.body_prefix,
            http_status=response.status,
        )

    def _send_following(self, request: HttpRequest) -> _Response:
        url, method, body, headers = request.url, request.method, self._body(request), self._headers(request)
        for _ in range(MAX_REDIRECTS + 1):
            response, location = self._send(url, method, body, headers)
            if not (request.follow_redirects and response.status in REDIRECT_CODES and location):
                return response
            target = urljoin(url, location)
            if (urlsplit(target).hostname, urlsplit(target).port) != (urlsplit(url).hostname, urlsplit(url).port):
                headers = [(n, v) for n, v in headers if n.lower() not in _CREDENTIAL_HEADERS]
            if response.status == 303 or (response.status in (301, 302) and method == "POST"):
                method, body = "GET", None  # what browsers and curl do
                headers = [(n, v) for n, v in headers if n.lower() != "content-type"]
            url = target
        raise _Failed(f"more than {MAX_REDIRECTS} redirects (last to {url})")

    def _send(self, url: str, method: str, body: bytes | None, headers) -> tuple[_Response, str]:
        scheme, host, port = self.call._check_allowed(url)
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        where = _authority(host, port)
        connection: http.client.HTTPConnection
        if scheme == "https":
            connection = http.client.HTTPSConnection(host, port, timeout=self.budget_s, context=self.call.ssl_context)
        else:
            # The timeout bounds the connect, before there is a socket that abandon() could close.
            connection = http.client.HTTPConnection(host, port, timeout=self.budget_s)
        with self._lock:
            if self._abandoned:
                raise _Failed("abandoned")
            self._connection = connection
        try:
            connection.request(method, path, body=body, headers=dict(headers))
            answer = connection.getresponse()
            prefix = answer.read(BODY_PREFIX_BYTES) if method != "HEAD" else b""
            return (
                _Response(answer.status, answer.reason, prefix.decode("utf-8", errors="replace")),
                answer.getheader("Location", ""),
            )
        except TimeoutError as error:  # a socket timeout: the same budget as the wait on this thread
            raise _Failed(_timed_out(self.budget_s or 0.0), type(error).__name__) from None
        except ConnectionRefusedError as error:
            raise _Failed(f"connection refused to {where}", type(error).__name__) from None
        except socket.gaierror as error:
            raise _Failed(f"cannot resolve {host}: {error.strerror or error}", type(error).__name__) from None
        except ssl.SSLError as error:
            raise _Failed(f"TLS error with {where}: {error.reason or error}", type(error).__name__) from None
        except (OSError, http.client.HTTPException) as error:
            raise _Failed(
                f"{type(error).__name__} from {where}: {error or 'no answer'}", type(error).__name__
            ) from None
        finally:
            with self._lock:
                self._connection = None
            _close(connection)

    def _headers(self, request: HttpRequest) -> list[tuple[str, str]]:
        ctx = self.ctx
        headers = [("User-Agent", USER_AGENT)] if not _has(request.headers, "user-agent") else []
        headers += list(request.headers)
        if ctx.payload_json and request.method not in BODYLESS_METHODS and not _has(request.headers, "content-type"):
            headers.append(("Content-Type", "application/json"))
        headers += [
            ("Idempotency-Key", ctx.run_key),
            ("X-Raftcron-Fencing-Token", str(ctx.fencing_token)),
            ("X-Raftcron-Job", ctx.job_id),
            ("X-Raftcron-Scheduled-At", ctx.scheduled_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ").replace(".000000Z", "Z")),
            ("X-Raftcron-Attempt", str(ctx.attempt)),
        ]
        return headers

    def _body(self, request: HttpRequest) -> bytes | None:
        if request.method in BODYLESS_METHODS:
            return None
        if self.ctx.payload_json:
            return self.ctx.payload_json.encode("utf-8")
        return request.body.encode("utf-8")


_tls_lock = threading.Lock()
_tls: list[ssl.SSLContext] = []


def _default_tls() -> ssl.SSLContext:
    """One verifying context for the process: loading the system's CAs per request costs ms."""
    with _tls_lock:
        if not _tls:
            _tls.append(ssl.create_default_context())
        return _tls[0]


def _timed_out(budget_s: float) -> str:
    return f"timed out after {budget_s:.3g} s"


def _has(headers: Iterable[tuple[str, str]], name: str) -> bool:
    return any(n.lower() == name for n, _ in headers)


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _close(connection: http.client.HTTPConnection) -> None:
    sock = connection.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked reading it
        except OSError:
            pass
    connection.close()
