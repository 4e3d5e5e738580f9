"""The node's HTTP server: Prometheus metrics on /metrics, the probes on /healthz and /readyz, the
read-only dashboard everywhere else.

    dashboard = Dashboard(node.raftlog, node.config, authorize=None)   # authorize(headers) -> Principal | bool
    server, thread = serve_http("127.0.0.1", 9100, registry, dashboard)
    ...
    server.shutdown(); server.server_close(); dashboard.close()

/metrics is prometheus_client's own WSGI app on the node's registry, unauthenticated as it
always was (scrapers); so are the probes (orchestrators send no token; see observability/probes.py). Dashboard pages pass through `authorize` first, which gets the request
headers as a mapping of lowercase names: when the node has auth on, the node wires its check
here. A browser cannot send a bearer token by itself, so HTTP Basic is taken too: the password
is the token (the user name is ignored) and reaches `authorize` as `Bearer <password>`. Every page reads the replica under its lock only long enough to copy what it shows, and
renders after releasing it.
"""

from __future__ import annotations

import base64
import binascii
import collections
import itertools
import logging
import socket
import threading
import time
from collections.abc import Callable, Mapping
from urllib.parse import parse_qs, unquote
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import Counter, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from scheduler.core.model import SECOND_US
from scheduler.dashboard import data, fates, views, views_health, views_ops
from scheduler.dashboard.herd import grouped_forecast
from scheduler.dashboard.problems import Problems, ProblemScan
from scheduler.membership import members_view, peer_by_raft_address
from scheduler.planning import parse_iso_to_us
from scheduler.planning.forecast import MINUTE_US
from scheduler.planning.runkeys import readable_run_key
from scheduler.replication.raftlog import ROLE_NAMES
from scheduler.rpc.intake import CallDeadlines
from scheduler.security.policy import sees_details
from scheduler.security.principals import ADMIN, Principal

log = logging.getLogger("raftcron.dashboard")

# Truthy to let the request in: the caller's Principal (whose owners scope payloads and output
# tails), or True when the check knows no principal (everything is shown).
Authorize = Callable[[Mapping[str, str]], object]
# pysyncobj reports a connected partner with this value.
_CONNECTED = 2
FORECAST_HOURS = 24
# The herd forecast covers every job: computed at most this often, one computation at a time.
FORECAST_TTL_S = 60.0
# The front page's problems look at every job with queued runs: found at most this often, the
# state lock held for this many jobs at a time.
PROBLEMS_TTL_S = 10.0
PROBLEM_JOBS_PER_HOLD = 250
# A backlog beyond this many jobs with queued runs is looked at in part (100,000 cost 1.4 s).
MAX_QUEUED_JOBS_LOOKED_AT = 20_000
DEFAULT_WINDOW = "1h"
MAX_WINDOW_US = 31 * 86_400 * SECOND_US
# Makes a browser ask for a user name and password (the token).
AUTH_PROMPT = 'Basic realm="raftcron dashboard: any user name, your token as password", charset="UTF-8"'
SECURITY_HEADERS = [
    ("Cache-Control", "no-store"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    (
        "Content-Security-Policy",
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'",
    ),
]


class BadRequest(ValueError):
    pass


class NotFound(LookupError):
    pass


def allow_all(headers: Mapping[str, str]) -> bool:
    return True


def request_headers(environ: dict) -> dict[str, str]:
    """WSGI's HTTP_* variables as lowercase header names (`authorization`, `cookie`, ...)."""
    headers = {key[5:].replace("_", "-").lower(): value for key, value in environ.items() if key.startswith("HTTP_")}
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            headers[key.replace("_", "-").lower()] = environ[key]
    return headers


def bearer_from_basic(headers: dict[str, str]) -> dict[str, str]:
    """`Authorization: Basic base64(user:token)` becomes `Bearer token`; other headers are kept."""
    scheme, _, credentials = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return headers
    try:
        _, _, password = base64.b64decode(credentials.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, UnicodeDecodeError):
        return {**headers, "authorization": ""}
    return {**headers, "authorization": f"Bearer {password}"}


def _int_param(params: dict, name: str, default: int = 0) -> int:
    value = params.get(name, [""])[0]
    if not value:
        return default
    if not (value.isascii() and value.isdigit() and len(value) <= 9):
        raise BadRequest(f"{name} must be a whole number, not {value[:40]!r}")
    return int(value)


def parse_window(params: dict, now_us: int, default: str = DEFAULT_WINDOW) -> tuple[int, int, str]:
    """(from_us, to_us, window label) of a job page's timeline.

    `window=5m|1h|6h|24h|7d` ends a little after replicated now, so the next few slots show as
    upcoming; `from` and `to` (ISO-8601, UTC unless an offset is given) choose any window;
    without either, the `default` window.
    """
    if "from" in params or "to" in params:
        try:
            to_us = parse_iso_to_us(params["to"][0]) if params.get("to", [""])[0] else now_us
            from_us = parse_iso_to_us(params["from"][0]) if params.get("from", [""])[0] else to_us - 3600 * SECOND_US
        except ValueError:
            raise BadRequest("from and to must be ISO-8601 times such as 2026-03-08T02:00:00Z") from None
        if not 0 < to_us - from_us <= MAX_WINDOW_US:
            raise BadRequest("the window must end after it starts and span at most 31 days")
        return from_us, to_us, ""
    label = params.get("window", [default])[0]
    seconds = dict(views.WINDOWS).get(label)
    if seconds is None:
        raise BadRequest(f"window must be one of {', '.join(name for name, _ in views.WINDOWS)}")
    span_us, end_us = seconds * SECOND_US, now_us - now_us % SECOND_US + SECOND_US
    return end_us - span_us, end_us + span_us // 12, label


class Dashboard:
    """The dashboard as a WSGI app over one node's replica."""

    def __init__(self, raftlog, config, authorize: Authorize | None = None, clock_us=None, workers=None) -> None:
        """`workers`: the node's WorkerRegistry (what the workers page shows while this node leads)."""
        self._raftlog = raftlog
        self._workers = workers
        self._config = config
        self._authorize = authorize or allow_all
        self._clock_us = clock_us or (lambda: time.time_ns() // 1000)
        self.index = data.JobIndex()
        self.watcher = data.NodeWatcher(self.index)
        raftlog.add_apply_listener(self.watcher)
        self._forecast_lock = threading.Lock()
        self._forecast: tuple[float, int, object, int] | None = None  # (monotonic, computed_at_us, result, jobs)
        self._problems_lock = threading.Lock()
        self._problems: tuple[float, object] | None = None  # (monotonic, Problems)

    def close(self) -> None:
        try:
            self._raftlog.remove_apply_listener(self.watcher)
        except ValueError:
            pass

    @property
    def _herd_window_us(self) -> int:
        return int(getattr(self._config, "herd_window_s", 3600.0) * SECOND_US)

    # -- WSGI ----------------------------------------------------------------------------------
    def __call__(self, environ: dict, start_response):
        method = environ.get("REQUEST_METHOD", "GET")
        path = environ.get("PATH_INFO", "/") or "/"
        if path == "/favicon.ico":
            start_response("204 No Content", [])
            return [b""]
        if method not in ("GET", "HEAD"):
            return self._respond(
                start_response,
                "405 Method Not Allowed",
                views.error_page(
                    "405 Method Not Allowed", "The dashboard is read-only: use the CLI or the API to change anything."
                ),
                method,
                [("Allow", "GET, HEAD")],
            )
        caller = self._authorize(bearer_from_basic(request_headers(environ)))
        if not caller:
            challenges = [("WWW-Authenticate", 'Bearer realm="raftcron"'), ("WWW-Authenticate", AUTH_PROMPT)]
            return self._respond(
                start_response,
                "401 Unauthorized",
                views.error_page(
                    "401 Unauthorized",
                    "This node requires a token for its dashboard: send it as a bearer token, or sign in with any "
                    "user name and the token as password.",
                ),
                method,
                challenges,
            )
        try:
            principal = caller if isinstance(caller, Principal) else None
            status, body = "200 OK", self.render(path, parse_qs(environ.get("QUERY_STRING", "")), principal)
        except BadRequest as exc:
            status, body = "400 Bad Request", views.error_page("400 Bad Request", str(exc), self._node_id)
        except NotFound as exc:
            status, body = "404 Not Found", views.error_page("404 Not Found", str(exc), self._node_id)
        except Exception:  # a page bug must not take the metrics endpoint or the node with it
            log.exception("dashboard page %s failed", path)
            status, body = (
                "500 Internal Server Error",
                views.error_page(
                    "500 Internal Server Error", "This page failed; the node's log has the details.", self._node_id
                ),
            )
        return self._respond(start_response, status, body, method)

    @staticmethod
    def _respond(start_response, status: str, body: str, method: str, extra: list | None = None):
        payload = body.encode("utf-8")
        headers = [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(payload)))]
        start_response(status, headers + SECURITY_HEADERS + (extra or []))
        return [b"" if method == "HEAD" else payload]

    @property
    def _node_id(self) -> str:
        return getattr(self._config, "node_id", "")

    def render(self, path: str, params: dict, principal: Principal | None = None) -> str:
        """The HTML of one page; BadRequest or NotFound for what cannot be shown. Payloads and
        output tails only for a `principal` that sees their owner's details (None: all)."""
        parts = [unquote(part) for part in path.strip("/").split("/")] if path.strip("/") else []
        refresh = params.get("refresh", [""])[0] != "0"
        if not parts:
            return self.cluster(refresh)
        if parts == ["workers"]:
            return self.workers(refresh)
        if parts == ["jobs"]:
            return self.jobs(params.get("q", [""])[0], _int_param(params, "page", 1))
        if len(parts) == 2 and parts[0] == "jobs":
            return self.job(parts[1], params, principal)
        if len(parts) == 3 and parts[0] == "runs":
            digits = parts[2].removeprefix("-")
            if not (digits.isascii() and digits.isdigit() and len(digits) <= 19):
                raise BadRequest("a run is /runs/JOB/SCHEDULED_US (microseconds since the epoch)")
            return self.run(parts[1], int(parts[2]), principal)
        if parts == ["herd"]:
            return self.herd()
        if parts == ["alerts"]:
            kind = params.get("kind", [""])[0]
            return self.alerts(params.get("pending", [""])[0] in ("1", "true"), kind, _int_param(params, "page", 1))
        if parts == ["kills"]:
            return self.kills()
        raise NotFound(f"no page at {path}")

    # -- pages ---------------------------------------------------------------------------------
    def raft_facts(self) -> data.RaftFacts:
        raftlog, config = self._raftlog, self._config
        raft = raftlog.raft_status()
        with raftlog.read() as state:
            # The replicated member table once membership changed, else the configured peers.
            members = members_view(config, state)
            leader = peer_by_raft_address(config, state, raftlog.leader_address())
        peers = tuple(
            data.PeerRow(
                peer.node_id,
                peer.raft_address,
                peer.grpc_address,
                peer.node_id == config.node_id
                or raft.get(f"partner_node_status_server_{peer.raft_address}") == _CONNECTED,
                raft.get(f"match_idx_server_{peer.raft_address}") or 0,
            )
            for peer in members
        )
        return data.RaftFacts(
            config.node_id,
            ROLE_NAMES.get(raft.get("state"), "unknown"),
            leader.node_id if leader else "",
            raftlog.term,
            raftlog.commit_index,
            raftlog.applied_index,
            peers,
            *raftlog.tick_stalls(),
        )

    def cluster(self, refresh: bool = True) -> str:
        raft = self.raft_facts()
        leading = raft.role == "leader" and self._workers is not None
        found = self.problems(leading)
        with self._raftlog.read() as state:
            facts = data.cluster_facts(state)
            # Under the lock: the watcher appends to this deque while applying.
            leaderships = tuple(reversed(self.watcher.leaderships))
        problems = views_health.problems_html(found, leading, raft.leader)
        page = data.ClusterPage(raft, facts, leaderships)
        if not refresh:
            return views.cluster_page(page, problems)
        return views.cluster_page(page, problems, views_health.refresh_note(), views_health.REFRESH_S)

    def problems(self, leading: bool) -> Problems:
        """The front page's problems, found at most every PROBLEMS_TTL_S, the state lock held for
        PROBLEM_JOBS_PER_HOLD jobs with queued runs at a time so applies go on in between."""
        with self._problems_lock:
            cached = self._problems
            if cached is not None and time.monotonic() - cached[0] <= PROBLEMS_TTL_S:
                return cached[1]  # type: ignore[return-value]
            with self._raftlog.read() as state:
                job_ids = list(itertools.islice(state.live_runs, MAX_QUEUED_JOBS_LOOKED_AT))
                scan = ProblemScan(state.now_us)
            for start in range(0, len(job_ids), PROBLEM_JOBS_PER_HOLD):
                with self._raftlog.read() as state:
                    scan.add_queued(state, job_ids[start : start + PROBLEM_JOBS_PER_HOLD])
            serving = None
            if leading:
                registry = self._workers
                serving = lambda target: len(registry.serving(target))  # noqa: E731
            with self._raftlog.read() as state:
                found = scan.finish(state, serving)
            self._problems = (time.monotonic(), found)
            return found

    def workers(self, refresh: bool = True) -> str:
        raft = self.raft_facts()
        leading = raft.role == "leader" and self._workers is not None
        seen = self._workers.workers() if leading else None
        with self._raftlog.read() as state:
            held = data.leases_by_holder(state)
            now_us = state.now_us
        return views_health.workers_page(seen, held, now_us, raft.leader, self._node_id, refresh)

    def jobs(self, query: str, page_number: int) -> str:
        page = max(0, page_number - 1)
        self.index.refresh(self._raftlog.read)
        ids, total = self.index.page(query, page, data.JOBS_PAGE_SIZE)
        with self._raftlog.read() as state:
            rows = data.job_rows(state, ids, self._herd_window_us)
            now_us = state.now_us
        return views.jobs_page(rows, query, page, total, data.JOBS_PAGE_SIZE, now_us, self._node_id)

    def job(self, job_id: str, params: dict, principal: Principal | None = None) -> str:
        with self._raftlog.read() as state:
            now_us = state.now_us
            job = state.jobs.get(job_id)
            spec = job.spec if job is not None else None
        default = fates.default_window(spec, now_us, views.WINDOWS) if spec is not None else DEFAULT_WINDOW
        from_us, to_us, label = parse_window(params, now_us, default)
        with self._raftlog.read() as state:
            detail = data.job_detail(state, job_id, from_us, to_us, self._herd_window_us)
            calendars = dict(state.calendars) if detail is not None and detail.row.spec.calendar else {}
        if detail is None:
            raise NotFound(f"job {job_id!r} does not exist (the history of a deleted job stays under /runs)")
        slots, cut = fates.timeline(detail, from_us, to_us)
        after_us = max(detail.cursor_us, now_us - 1)
        fires = data.next_fires(
            detail.row.spec, after_us, detail.spread_us, counted_runs=detail.counted_runs, calendars=calendars
        )
        details = sees_details(principal, detail.row.spec.owner)
        return views.job_page(detail, slots, cut, fires, from_us, to_us, label, self._node_id, details)

    def run(self, job_id: str, scheduled_us: int, principal: Principal | None = None) -> str:
        with self._raftlog.read() as state:
            detail = data.run_detail(state, job_id, scheduled_us)
        if detail is None:
            raise NotFound(f"no retained run {readable_run_key(job_id, scheduled_us)}")
        # A deleted job's owner is unknown: its runs' output is the admin's alone.
        details = (
            principal is None
            or (detail.spec is not None and sees_details(principal, detail.spec.owner))
            or principal.role == ADMIN
        )
        return views.run_page(detail, self._node_id, details)

    def herd(self) -> str:
        with self._forecast_lock:
            cached = self._forecast
            if cached is None or time.monotonic() - cached[0] > FORECAST_TTL_S:
                with self._raftlog.read() as state:
                    # Specs are frozen: the list is safe to use after the lock is released.
                    specs = [job.spec for job in state.jobs.values()]
                    calendars = dict(state.calendars)
                    now_us = state.now_us or self._clock_us()
                start_us = now_us - now_us % MINUTE_US
                result = grouped_forecast(specs, start_us, FORECAST_HOURS, self._herd_window_us, calendars)
                cached = self._forecast = (time.monotonic(), now_us, result, len(specs))
        _, computed_at_us, result, jobs = cached
        return views_ops.herd_page(result, computed_at_us, FORECAST_HOURS, jobs, self._node_id)

    def alerts(self, pending_only: bool, kind: str, page_number: int) -> str:
        with self._raftlog.read() as state:
            page = data.alerts_page(state, pending_only, kind, max(0, page_number - 1))
        return views_ops.alerts_page(page, pending_only, kind, self._node_id)

    def kills(self) -> str:
        with self._raftlog.read() as state:
            page = data.kills_page(state)
        return views_ops.kills_page(page, self._node_id)


# The HTTP port faces whoever can reach it: each connection costs a thread, so every connection
# must send its request line and headers within HEAD_DEADLINE_S (a slow sender is cut off however
# it trickles), in at most MAX_HEAD_BYTES, and a client holds at most MAX_CONNECTIONS_PER_CLIENT
# of the MAX_CONNECTIONS the node serves at once; a connection beyond either is closed at once
# and counted (raftcron_http_connections_refused_total).
HEAD_DEADLINE_S = 10.0
SOCKET_TIMEOUT_S = 10.0
MAX_HEAD_BYTES = 32 * 1024
MAX_CONNECTIONS = 64
MAX_CONNECTIONS_PER_CLIENT = 16


class _HeadTooLarge(Exception):
    pass


class _BoundedHead:
    """The connection's reader while the request line and headers are read: at most `most` bytes."""

    def __init__(self, raw, most: int) -> None:
        self.raw, self._left = raw, most

    def readline(self, limit: int = -1) -> bytes:
        most = self._left + 1 if limit < 0 else min(limit, self._left + 1)
        line = self.raw.readline(most)
        self._left -= len(line)
        if self._left < 0:
            raise _HeadTooLarge
        return line

    def __getattr__(self, name):
        return getattr(self.raw, name)


class _QuietHandler(WSGIRequestHandler):
    timeout = SOCKET_TIMEOUT_S  # every read and write of the connection

    def setup(self) -> None:
        super().setup()
        connection = self.connection
        self._head_deadline = self.server.deadlines.arm(HEAD_DEADLINE_S, lambda: _cut(connection))
        self.rfile = _BoundedHead(self.rfile, MAX_HEAD_BYTES)

    def parse_request(self) -> bool:
        parsed = super().parse_request()
        self.server.deadlines.disarm(self._head_deadline)
        self.rfile = self.rfile.raw
        return parsed

    def handle(self) -> None:
        try:
            super().handle()
        except (_HeadTooLarge, OSError):  # too long, too slow, or gone: the connection just ends
            pass
        finally:
            self.server.deadlines.disarm(self._head_deadline)

    def log_message(self, format, *args) -> None:  # noqa: A002 - the base class's name
        """Requests are not logged: Prometheus scrapes every few seconds."""


def _cut(connection: socket.socket) -> None:
    try:
        connection.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked reading it
    except OSError:
        pass


def probe_app(readiness: Callable[[], str | None]):
    """/healthz (200 "ok" while the process answers) and /readyz (200 "ready", or 503 and the
    one-line reason `readiness()` gives): plain text, no token, for orchestrators' probes."""

    def app(environ, start_response):
        method = environ.get("REQUEST_METHOD", "GET")
        if method not in ("GET", "HEAD"):
            status, text, extra = "405 Method Not Allowed", "probes answer GET and HEAD", [("Allow", "GET, HEAD")]
        elif environ.get("PATH_INFO") == "/healthz":
            status, text, extra = "200 OK", "ok", []
        else:
            try:
                problem = readiness()
            except Exception:  # a probe must answer, and a failing check means not ready
                log.exception("the readiness check failed")
                problem = "the readiness check failed; the node's log has the details"
            status, text, extra = (
                ("503 Service Unavailable", f"not ready: {problem}", []) if problem else ("200 OK", "ready", [])
            )
        payload = (text + "\n").encode("utf-8")
        headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(payload)))]
        start_response(status, headers + [("Cache-Control", "no-store"), ("X-Content-Type-Options", "nosniff")] + extra)
        return [b"" if method == "HEAD" else payload]

    return app


PROBE_PATHS = frozenset({"/healthz", "/readyz"})


def http_app(registry, dashboard: Dashboard, readiness: Callable[[], str | None] | None = None):
    """/metrics from `registry` exactly as prometheus_client serves it, the probes (when
    `readiness` is given), everything else is the dashboard. Neither /metrics nor the probes ask
    for a token."""
    metrics = make_wsgi_app(registry)
    probes = probe_app(readiness) if readiness is not None else None

    def app(environ, start_response):
        path = environ.get("PATH_INFO")
        if path == "/metrics":
            return metrics(environ, start_response)
        if probes is not None and path in PROBE_PATHS:
            return probes(environ, start_response)
        return dashboard(environ, start_response)

    return app


class _BoundedServer(ThreadingWSGIServer):
    """A thread per connection, for a bounded number of connections."""

    refused: Counter
    request_queue_size = 128  # the listen backlog: a burst waits to be accepted (and judged), not dropped

    def __init__(self, *args, **kwargs) -> None:
        self.deadlines = CallDeadlines()
        self._open_lock = threading.Lock()
        self._open: collections.Counter[str] = collections.Counter()
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        client = client_address[0]
        with self._open_lock:
            admitted = sum(self._open.values()) < MAX_CONNECTIONS and self._open[client] < MAX_CONNECTIONS_PER_CLIENT
            if admitted:
                self._open[client] += 1
        if not admitted:
            self.refused.inc()
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except Exception:
            self._closed(client)
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._closed(client_address[0])

    def _closed(self, client: str) -> None:
        with self._open_lock:
            self._open[client] -= 1
            if not self._open[client]:
                del self._open[client]

    def handle_error(self, request, client_address) -> None:
        log.debug("HTTP connection from %s failed", client_address[0], exc_info=True)


def serve_http(host: str, port: int, registry, dashboard: Dashboard, readiness: Callable[[], str | None] | None = None):
    """Serve `http_app` on a daemon thread; returns (server, thread)."""

    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
    refused = Counter(
        "raftcron_http_connections_refused",
        "HTTP connections closed at once: the node's or the client's share of connections was taken",
        registry=registry,
    )

    class Server(_BoundedServer):
        address_family = family

    Server.refused = refused
    server = make_server(host, port, http_app(registry, dashboard, readiness), Server, handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="http", daemon=True)
    thread.start()
    return server, thread
