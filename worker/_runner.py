"""The Worker: leases runs from the cluster, runs their handlers, reports their outcomes.

    worker = Worker("10.0.0.1:7201,10.0.0.2:7201,10.0.0.3:7201", concurrency=8)

    @worker.handler("reports.build")
    def build_report(ctx):
        ...                      # return = SUCCESS, raise RetryLater(...) = RETRY_LATER,
                                 # raise anything else = FAILURE
    worker.run()                 # blocks; SIGTERM/SIGINT drain it gracefully

Threads: one lease loop (a session with the leader, see _session.py: it announces the free slots
as credits and the leader pushes grants for at most those; or, on a cluster without sessions or
while none can be opened, long-polls WorkerService.Lease for at most the free slots), one
heartbeater (one Heartbeat call for all leases, see _heartbeat.py), one thread per running attempt
(reused from attempt to attempt, see _threads.py; it hands the outcome to the completion sender
and goes back to the pool, see _completion.py), one asyncio loop for `async def` handlers, and one
watcher for every attempt's deadline. A lease counts against `concurrency` from its grant until
its handler returns (a cancelled handler still running counts too), so the worker never runs
more handlers than `concurrency`. Its outcome is then reported while the next run starts: the
lease stays held, and heartbeated, until the cluster answers, and at most `concurrency` outcomes
wait for an answer at once, so a worker whose reports do not get through stops leasing. Calls go
to the first node that answers, then to the leader once a node names it.

Stopping (`stop()`, or the first SIGTERM/SIGINT under `run()`) drains in stages: stop leasing
(the long poll in flight is cancelled); wait up to the drain timeout for running attempts to end,
heartbeating them meanwhile; cancel the rest and report them RETRY_LATER "worker shutting down"
so the cluster leases them again at once; close the channels. A second signal skips the wait.
A handler that ignores cancellation is reported anyway after the shell grace period, with what it
wrote so far, and left running in its (daemon) thread: Python threads cannot be killed. Under `isolation="process"`
handlers run in child processes instead (see _isolation.py), killed at their deadline or a lost
lease, so such a handler frees its slot; the pool's children are stopped at the end of a drain.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import Any

import grpc

from worker._backoff import Backoff, FailureLog, describe_rpc_error
from worker._client import ClusterClient, Credentials, parse_cluster
from worker._completion import CompletionBatcher, report_in_background, report_outcome
from worker._context import CancelReason
from worker._execution import AsyncLoopThread, Handler, Outcome, OutcomeKind, arm_deadline, execute, with_capture
from worker._heartbeat import Heartbeater
from worker._http import HTTP_TARGET, HttpAllowList, HttpCall, HttpRequest
from worker._isolation import PROCESS, THREAD, HandlerRef, ProcessPool, check_isolation, handler_ref, in_handler_process
from worker._leases import SHELL_TARGET, HeldLease, LeaseTable, lease_from_grant
from worker._session import WorkerCalls, WorkerSession
from worker._shell import DEFAULT_GRACE_S, ShellCommand, check_env_names
from worker._shell import shell_user as shell_user_named
from worker._threads import HandlerThreads
from worker.api.v1 import common_pb2, worker_pb2

__all__ = ["SHELL_TARGET", "LeaseRefused", "Worker"]

# What signal.signal() returns and takes back: a handler, SIG_DFL/SIG_IGN, or None (not set from Python).
_SignalHandler = Callable[[int, FrameType | None], Any] | int | None

log = logging.getLogger("raftcron.worker")

# How long a grant for a target this worker cannot run waits before another attempt.
UNSERVED_RETRY_AFTER_S = 10.0
# Lease answers that no retry changes: the token is not accepted, or may not lease these
# targets. Everything else (UNAVAILABLE while a leader is elected, RESOURCE_EXHAUSTED...) passes.
_REFUSED_CODES = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)


class LeaseRefused(Exception):
    """The cluster refused this worker's leases for good: its token is not accepted, or may not
    lease the targets it asked for. `Worker.run()` raises it once the worker has stopped."""

    def __init__(self, code: str, details: str, targets: Iterable[str]) -> None:
        self.code, self.details, self.targets = code, details, tuple(targets)
        super().__init__(f"the cluster refused to lease {', '.join(self.targets)}: {code}: {details}")


class Worker:
    """Runs handlers for the cluster's runs (see the module docstring).

    Args:
        cluster: node addresses, a list or "host:port,host:port"; any node will do. Default
            RAFTCRON_CLUSTER (what `raftcron dev` prints).
        concurrency: most handlers running at once (and most outcomes waiting for the
            cluster's answer at once; a run's slot frees when its handler returns).
        worker_id: stable id reported to the cluster; default "<hostname>-<pid>".
        targets: target names to lease; default every registered handler, plus "shell" if
            `shell` is on. Must be a subset of those.
        handlers: {target name: handler}; or register with `@worker.handler(name)`.
        lease_wait_s: how long one Lease call waits for due runs (long poll).
        shell: also run `{shell: CMD}` targets with /bin/sh (see _shell.py).
        shell_owners: run only these owners' shell commands (leases `shell:OWNER` for each, so the
            cluster hands it no other owner's); default every owner's (`shell`).
        shell_env: names of the worker's environment variables a command also gets, beyond
            PATH, HOME, LANG, LC_* and TZ (never a RAFTCRON_* one: those are its credentials).
        shell_user: run commands as this user (its primary group, no supplementary groups);
            the worker must run as root.
        drain_timeout_s: how long a graceful stop waits for running attempts.
        shell_grace_s: between SIGTERM and SIGKILL of a cancelled command's process group, or of a
            cancelled handler's process under process isolation.
        http: also run `{http: {...}}` targets (leases "http"; see _http.py).
        http_allow: the hosts those requests may call, "HOST" (the scheme's default port) or
            "HOST:PORT"; required with `http` (a request to any other host fails unsent).
        call_timeout_s: per-call timeout of Heartbeat and Complete (Lease: lease_wait_s more).
        complete_retry_s: how long an unreachable cluster is retried to report an outcome.
        metadata: gRPC metadata sent with every call.
        credentials: TLS and bearer token; default `Credentials.from_env()` (RAFTCRON_CA,
            RAFTCRON_TOKEN_FILE...), so a worker started where `raftcron dev` was is secured.
        isolation: how Python handlers run: "thread" (in this process; a handler that ignores
            cancellation keeps its slot until it returns) or "process" (in a pool of child
            processes, one per slot, killed `shell_grace_s` after SIGTERM at the deadline or a
            lost lease; see _isolation.py). A handler may override it at registration.
        stream: lease, heartbeat and report on one long-lived session with the leader when the
            cluster offers it (unary calls otherwise, and while no session can be opened).
            Off by default: it measured no faster than unary calls (docs/design/worker-stream.md).
    """

    def __init__(
        self,
        cluster: list[str] | str | None = None,
        concurrency: int = 4,
        worker_id: str | None = None,
        targets: Iterable[str] | None = None,
        handlers: Mapping[str, Handler] | None = None,
        lease_wait_s: float = 5.0,
        *,
        shell: bool = False,
        drain_timeout_s: float = 30.0,
        shell_grace_s: float = DEFAULT_GRACE_S,
        shell_owners: Iterable[str] | None = None,
        shell_env: Iterable[str] = (),
        shell_user: str | None = None,
        http: bool = False,
        http_allow: Iterable[str] = (),
        call_timeout_s: float = 5.0,
        complete_retry_s: float = 60.0,
        metadata: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        isolation: str = THREAD,
        stream: bool = False,
    ) -> None:
        if cluster is None:
            cluster = os.environ.get("RAFTCRON_CLUSTER", "")
            if not cluster:
                raise ValueError(
                    "no cluster to lease from: pass Worker(cluster='host:port,...') or set RAFTCRON_CLUSTER"
                )
        self._addresses = parse_cluster(cluster) if isinstance(cluster, str) else list(cluster)
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency!r}")
        for name, value in (
            ("lease_wait_s", lease_wait_s),
            ("drain_timeout_s", drain_timeout_s),
            ("shell_grace_s", shell_grace_s),
            ("complete_retry_s", complete_retry_s),
        ):
            if value < 0:
                raise ValueError(f"{name} must not be negative, got {value!r}")
        if call_timeout_s <= 0:
            raise ValueError(f"call_timeout_s must be positive, got {call_timeout_s!r}")
        self.isolation = check_isolation(isolation)
        self.stream = bool(stream)
        # Observes each session push (oldest credit's announce time, arrival, credits, granted).
        self._on_session_grants: Callable[[float, float, int, int], None] | None = None
        self.worker_id = worker_id or f"{socket.gethostname()}-{os.getpid()}"
        self.concurrency = concurrency
        self.lease_wait_s = float(lease_wait_s)
        self.shell = shell
        self.drain_timeout_s = float(drain_timeout_s)
        self.shell_grace_s = float(shell_grace_s)
        if not shell and (shell_owners is not None or shell_env or shell_user):
            raise ValueError("shell_owners, shell_env and shell_user need shell=True")
        self.shell_owners = None if shell_owners is None else tuple(dict.fromkeys(shell_owners))
        if self.shell_owners is not None and (not self.shell_owners or not all(self.shell_owners)):
            raise ValueError("shell_owners must name at least one owner (None: every owner's)")
        self.shell_env = check_env_names(shell_env)
        self.shell_user = shell_user_named(shell_user) if shell_user else None
        self.http = http
        self.http_allow = _http_allow_list(http, http_allow)
        self.call_timeout_s = float(call_timeout_s)
        self.complete_retry_s = float(complete_retry_s)
        self._metadata = metadata
        self._credentials = credentials if credentials is not None else Credentials.from_env()
        self._explicit_targets = None if targets is None else list(targets)
        self._handlers: dict[str, Handler] = {}
        self._in_process: dict[str, HandlerRef] = {}  # handlers that run in the process pool
        self._pool: ProcessPool | None = None
        self._state = "new"  # new -> running -> stopping -> stopped
        for name, handler in (handlers or {}).items():
            self.add_handler(name, handler)

        self._table = LeaseTable(concurrency)
        self._threads = HandlerThreads()
        self._async_loop = AsyncLoopThread()
        self._state_lock = threading.Lock()
        self._leasing_stopped = threading.Event()
        self._give_up = threading.Event()  # last stage of a stop: no more Complete retries
        self._stop_requested = threading.Event()  # wakes run()
        self.refused: LeaseRefused | None = None  # set when the cluster refuses leases for good
        # Signals received under run(). A signal handler only bumps this counter: taking a lock
        # there could deadlock with the very code it interrupted; the main thread polls it.
        self._signals = 0
        self._stopped = threading.Event()
        # Made by start(); only the running and stopping states touch them.
        self._lease_client: ClusterClient
        self._client: ClusterClient
        self._heartbeater: Heartbeater
        self._calls: WorkerCalls
        self._completions: CompletionBatcher
        self._lease_thread: threading.Thread

    # Registration
    def handler(self, name: str, *, isolation: str | None = None) -> Callable[[Handler], Handler]:
        """Decorator registering a function (plain or `async def`) as the handler of `name`;
        `isolation` overrides the worker's for this handler."""

        def register(function: Handler) -> Handler:
            self.add_handler(name, function, isolation=isolation)
            return function

        return register

    def add_handler(self, name: str, handler: Handler, *, isolation: str | None = None) -> None:
        """Register `handler` for target `name`. Under process isolation it must be importable by
        name (a module-level function): a lambda or a closure is refused with ValueError."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"handler name must be a non-empty string, got {name!r}")
        if name == SHELL_TARGET:
            raise ValueError(f"{SHELL_TARGET!r} names shell targets; pass shell=True to run them")
        if name == HTTP_TARGET:
            raise ValueError(f"{HTTP_TARGET!r} names HTTP targets; pass http=True to run them")
        if not callable(handler):
            raise TypeError(f"handler for {name!r} is not callable: {handler!r}")
        if name in self._handlers:
            raise ValueError(f"a handler for {name!r} is already registered")
        if self._state != "new":
            raise RuntimeError("register handlers before start(): the leased targets are fixed then")
        if (check_isolation(isolation) if isolation is not None else self.isolation) == PROCESS:
            try:
                self._in_process[name] = handler_ref(handler)
            except ValueError as exc:
                raise ValueError(
                    f"handler {name!r} cannot run in a handler process: {exc}; define it at module level, "
                    "or register it with isolation='thread'"
                ) from None
        self._handlers[name] = handler

    @property
    def targets(self) -> list[str]:
        """The target names this worker leases."""
        served = sorted(self._handlers) + (self._shell_targets() if self.shell else [])
        served += [HTTP_TARGET] if self.http else []
        if self._explicit_targets is None:
            return served
        unknown = sorted(set(self._explicit_targets) - set(served))
        if unknown:
            raise ValueError(f"targets without a handler on this worker: {', '.join(unknown)}")
        return list(dict.fromkeys(self._explicit_targets))

    def _shell_targets(self) -> list[str]:
        if self.shell_owners is None:
            return [SHELL_TARGET]
        return [f"{SHELL_TARGET}:{owner}" for owner in self.shell_owners]

    @property
    def active_runs(self) -> int:
        """Leases held now (running, or finished and not yet reported)."""
        return len(self._table)

    # Lifecycle
    def start(self) -> None:
        """Start leasing in background threads; returns at once."""
        if in_handler_process():
            raise RuntimeError(
                "a Worker was started inside one of its own handler processes: start it under "
                "`if __name__ == '__main__':` in the script that defines it"
            )
        targets = self.targets
        if not targets:
            raise ValueError("nothing to run: register a handler or pass shell=True or http=True")
        if self._in_process:
            modules = tuple(sorted({module for module, _ in self._in_process.values()}))
            self._pool = ProcessPool(self.concurrency, grace_s=self.shell_grace_s, modules=modules)
            self._pool.start()  # before leasing: a pool that cannot start fails start(), not each run
        with self._state_lock:
            if self._state != "new":
                raise RuntimeError(f"worker already {self._state}")
            self._state = "running"
        self._targets = targets
        # A client of its own for leasing, so closing it cancels the long poll without
        # touching the heartbeats and completions that must go on during a drain.
        self._lease_client = ClusterClient(
            self._addresses, timeout_s=self.call_timeout_s, metadata=self._metadata, credentials=self._credentials
        )
        self._client = ClusterClient(
            self._addresses, timeout_s=self.call_timeout_s, metadata=self._metadata, credentials=self._credentials
        )
        # Heartbeats and outcomes go on the session while one is open, unary calls otherwise.
        self._calls = WorkerCalls(self._client)
        self._heartbeater = Heartbeater(self._calls, self.worker_id, self._table)
        self._heartbeater.start()
        self._completions = CompletionBatcher(self._calls, self.worker_id, self.call_timeout_s)
        self._lease_thread = threading.Thread(target=self._lease_loop, daemon=True, name="raftcron-lease")
        self._lease_thread.start()
        log.info(
            "worker %s: leasing %s (concurrency %d) from %s",
            self.worker_id,
            ", ".join(targets),
            self.concurrency,
            ",".join(self._addresses),
        )

    def run(self) -> None:
        """start(), then block until stopped; on the main thread, SIGTERM and SIGINT drain.
        Raises LeaseRefused, after stopping, when the cluster refuses the worker's token."""
        self.start()
        previous = self._install_signal_handlers()
        try:
            while not self._stop_requested.wait(0.2) and not self._signals:
                pass
            if self._signals:
                log.info(
                    "worker %s: signal received: draining (up to %.0fs; signal again to stop at once)",
                    self.worker_id,
                    self.drain_timeout_s,
                )
            self.stop()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if self.refused is not None:
            raise self.refused

    def stop(self, timeout_s: float | None = None) -> bool:
        """Drain and stop (see the module docstring); waits up to `timeout_s` (default
        `drain_timeout_s`) for running attempts, plus the shell grace and a few call timeouts.
        True if every attempt ended on its own within the drain."""
        drain_s = self.drain_timeout_s if timeout_s is None else timeout_s
        with self._state_lock:
            state = self._state
            if state == "running":
                self._state = "stopping"
            elif state == "new":
                self._state = "stopped"
                self._stopped.set()
        self._stop_requested.set()
        if state != "running":
            self._stopped.wait()
            return True
        try:
            return self._drain(drain_s)
        finally:
            self._state = "stopped"
            self._stopped.set()

    def __enter__(self) -> Worker:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"Worker({self.worker_id!r}, targets={self.targets!r}, concurrency={self.concurrency})"

    # Stopping
    def _drain(self, drain_s: float) -> bool:
        self._leasing_stopped.set()
        self._table.wake()
        self._lease_client.close()  # cancels the long poll in flight
        self._lease_thread.join(self.call_timeout_s + 1.0)
        held = len(self._table)
        if held:
            log.info("worker %s: draining: waiting up to %.0fs for %d runs", self.worker_id, drain_s, held)
        drained = self._wait_until_empty(drain_s)
        abandoned: set[tuple] = set()
        if not drained:
            rest = self._table.held()
            log.warning(
                "worker %s: drain timeout: cancelling %d runs, reported RETRY_LATER to be leased again",
                self.worker_id,
                len(rest),
            )
            for lease in rest:
                lease.ctx.cancel(CancelReason.SHUTDOWN)
            # Cancelled commands get their SIGTERM grace; cooperative handlers return quickly.
            if not self._wait_until_empty(self.shell_grace_s + 1.0, hurry=False):
                abandoned = self._report_abandoned()
        self._give_up.set()
        # Completes still in flight get one more call timeout; abandoned runs are not waited for.
        self._table.wait(lambda: self._table.keys_locked() <= abandoned, self.call_timeout_s)
        self._heartbeater.stop()
        self._completions.close()
        self._client.close()
        self._async_loop.close()
        if self._pool is not None:
            self._pool.close()
        log.info("worker %s: stopped", self.worker_id)
        return drained

    def _wait_until_empty(self, timeout_s: float, hurry: bool = True) -> bool:
        """Wait for every lease to be released; with `hurry`, a second signal ends the wait."""
        stop_at = time.monotonic() + timeout_s
        while (left_s := stop_at - time.monotonic()) > 0:
            if self._table.wait(self._table.empty_locked, min(left_s, 0.2)):
                return True
            if hurry and self._signals >= 2:
                log.warning("worker %s: signal received again: cancelling running attempts now", self.worker_id)
                break
        return len(self._table) == 0

    def _report_abandoned(self) -> set[tuple]:
        """Report the runs whose handlers ignore cancellation, with what they wrote so far; their
        threads are left behind. Returns their keys."""
        outcome = Outcome(OutcomeKind.RETRY_LATER, "worker shutting down", retry_after_s=0.0)
        abandoned = set()
        for lease in self._table.held():
            if lease.lost is not None:  # not ours to report any more
                abandoned.add(lease.key)
            elif lease.claim_report():  # else its own thread is reporting it: wait for that
                log.warning("run %s: handler ignores cancellation; reporting it without waiting", lease.run_key)
                self._report(lease, with_capture(outcome, lease.capture), retry_for_s=self.call_timeout_s)
                abandoned.add(lease.key)
        return abandoned

    def _install_signal_handlers(self) -> dict[int, _SignalHandler]:
        if threading.current_thread() is not threading.main_thread():
            return {}
        previous: dict[int, _SignalHandler] = {}
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, self._on_signal)
        return previous

    def _on_signal(self, _signum: int, _frame: object) -> None:
        self._signals += 1

    # Leasing
    def _lease_loop(self) -> None:
        backoff = Backoff(initial_s=0.2, max_s=10.0)
        failures = FailureLog(log, "lease")
        sessions = _SessionTries(self.stream)
        while not self._leasing_stopped.is_set():
            try:
                if sessions.due():
                    if not self._session_once(sessions):
                        break
                    continue
                if not self._lease_once(backoff, failures):
                    break
            except Exception:  # noqa: BLE001 (a bug here must not silently end all leasing)
                log.exception("worker %s: unexpected error in the lease loop; going on", self.worker_id)
                self._leasing_stopped.wait(backoff.next_delay_s())

    def _lease_once(self, backoff: Backoff, failures: FailureLog) -> bool:
        """One Lease call for the free slots (after waiting for one); False once stopping."""
        self._table.wait(lambda: self._leasing_stopped.is_set() or self._table.free_slots_locked() > 0, None)
        if self._leasing_stopped.is_set():
            return False
        request = worker_pb2.LeaseRequest(
            worker_id=self.worker_id, targets=self._targets, max_runs=self._table.free_slots()
        )
        request.wait.FromNanoseconds(round(self.lease_wait_s * 1e9))
        asked_at = time.monotonic()
        try:
            response = self._lease_client.lease(request, timeout_s=self.lease_wait_s + self.call_timeout_s)
        except ValueError:  # closed by stop()
            return False
        except grpc.RpcError as error:
            if self._stopped_or_refused(error):
                return False
            failures.failed(error)
            self._leasing_stopped.wait(backoff.next_delay_s())
            return True
        failures.succeeded()
        backoff.reset()
        if response.leader_address:
            self._follow_leader(response.leader_address)
        for grant in response.leases:
            self._accept(grant)
        if not response.leases and time.monotonic() - asked_at < self.lease_wait_s / 2:
            # The node answered "nothing" well before the wait we asked for (it caps the wait,
            # or ignores it): pause, jittered, so an idle worker never polls in a tight loop.
            self._leasing_stopped.wait(random.uniform(0.5, 1.0))
        return True

    def _stopped_or_refused(self, error: grpc.RpcError) -> bool:
        """After a failed Lease or session: True when leasing ends (stopping, or refused for good)."""
        if self._leasing_stopped.is_set():
            return True
        if isinstance(error, grpc.Call) and error.code() in _REFUSED_CODES:
            self._refuse(LeaseRefused(error.code().name, error.details() or "", self._targets))
            return True
        return False

    def _session_once(self, tries: _SessionTries) -> bool:
        """Open a session and serve it until it ends; False once stopping or refused for good."""
        session = WorkerSession(
            self.worker_id,
            self._targets,
            self._table,
            lambda grant: self._accept(grant, background=True),
            self.call_timeout_s,
            on_grants=self._on_session_grants,
        )
        try:
            session.open(self._lease_client)
        except ValueError:  # closed by stop()
            return False
        except grpc.RpcError as error:
            if self._stopped_or_refused(error):
                return False
            tries.failed(error)
            return True
        log.info("worker %s: session open on %s", self.worker_id, session.address)
        self._client.prefer(session.address)  # the leader: unary calls go there too while no session is open
        self._calls.session = session
        try:
            ended_by = session.serve(self._leasing_stopped)
        finally:
            self._calls.session = None
        if self._leasing_stopped.is_set():
            return False
        tries.ended(ended_by)
        return True

    def _refuse(self, refusal: LeaseRefused) -> None:
        """Stop leasing for good: retrying a refused token only fills the node's logs. Runs
        already held go on and report; run() stops the worker and raises the refusal."""
        self.refused = refusal
        log.error("worker %s: %s; stopping (check its token and the targets it may lease)", self.worker_id, refusal)
        self._stop_requested.set()

    def _follow_leader(self, address: str) -> None:
        """The node called forwarded our Lease to the leader at `address`: call the leader
        directly from now on, for leases and for heartbeats and outcomes (a follower proposes
        those through the leader too). An address outside our list (the nodes may know each
        other by other names than ours) changes nothing: the forwarding goes on working."""
        if self._lease_client.prefer(address) and self._client.prefer(address):
            log.debug("worker %s: the leader is %s: calling it directly", self.worker_id, address)

    def _accept(self, grant: worker_pb2.LeaseGrant, background: bool = False) -> None:
        """Hold and start `grant`'s run; a hand-back is reported on another thread when
        `background` (the session's reader must not wait for an answer it reads itself)."""
        lease, bad_payload = lease_from_grant(grant, self.worker_id)
        ctx = lease.ctx
        hand_back = None
        if self._leasing_stopped.is_set():
            # The answer to a Lease call (a push) crossed our stop: hand the run back at once.
            hand_back = Outcome(OutcomeKind.RETRY_LATER, "worker shutting down", retry_after_s=0.0)
        elif not self._table.add(lease):
            log.warning("run %s: the cluster granted more runs than asked; handing it back", lease.run_key)
            hand_back = Outcome(OutcomeKind.RETRY_LATER, "worker at capacity", retry_after_s=0.0)
        if hand_back is not None:
            if background:
                self._threads.submit(self._report, lease, hand_back, self.call_timeout_s)
            else:
                self._report(lease, hand_back, retry_for_s=self.call_timeout_s)
            return
        handler = self._handler_for(grant.target)
        if bad_payload:
            self._finish(lease, Outcome(OutcomeKind.FAILURE, bad_payload))
        elif handler is None:
            log.warning("run %s: no handler for target %r here; handing it back", lease.run_key, ctx.target)
            message = f"worker {self.worker_id} has no handler for target {ctx.target!r}"
            self._finish(lease, Outcome(OutcomeKind.RETRY_LATER, message, retry_after_s=UNSERVED_RETRY_AFTER_S))
        else:
            log.info("run %s: leased (attempt %d, token %d)", lease.run_key, ctx.attempt, ctx.fencing_token)
            ref = self._in_process.get(grant.target.handler) if grant.target.WhichOneof("kind") == "handler" else None
            self._threads.submit(self._run, lease, handler, ref)

    def _handler_for(self, target: common_pb2.Target) -> Handler | None:
        kind = target.WhichOneof("kind")
        if kind == "handler" and target.handler in self._targets:
            return self._handlers.get(target.handler)
        if kind == "shell" and any(t == SHELL_TARGET or t.startswith(SHELL_TARGET + ":") for t in self._targets):
            # Whose command it is, the cluster decided: it hands out only the `shell:OWNER` asked for.
            return ShellCommand(
                target.shell, grace_s=self.shell_grace_s, env_names=self.shell_env, user=self.shell_user
            )
        if kind == "http" and HTTP_TARGET in self._targets:
            return HttpCall(HttpRequest.from_pb(target.http), self.http_allow)
        return None

    # Running and reporting
    def _run(self, lease: HeldLease, handler: Handler, ref: HandlerRef | None = None) -> None:
        timer = arm_deadline(lease.ctx)
        try:
            if ref is not None and self._pool is not None:
                outcome = self._pool.run(ref, lease.ctx, lease.capture)
            else:
                outcome = execute(handler, lease.ctx, self._async_loop, lease.capture)
        finally:
            if timer is not None:
                timer.cancel()
        self._finish(lease, outcome)

    def _finish(self, lease: HeldLease, outcome: Outcome) -> None:
        self._table.handler_ended(lease)  # the next run may start while this outcome is reported
        # Stopped at its deadline, the attempt was ended `timed_out` by the cluster at that same
        # instant, so a heartbeat during the kill grace finds the lease fenced. Its outcome is
        # still sent when it carries output: the cluster fences the outcome and keeps the output
        # on the attempt it timed out (docs/design/output-of-killed-handlers.md).
        late_output = (
            lease.lost is not None
            and outcome.cancel_reason == CancelReason.DEADLINE
            and bool(outcome.stdout_tail or outcome.stderr_tail)
        )
        if (lease.lost is not None and not late_output) or not outcome.reportable:
            log.info(
                "run %s: ended after its lease was %s: outcome not reported",
                lease.run_key,
                lease.lost or outcome.cancel_reason,
            )
        elif lease.claim_report(even_if_lost=late_output):
            # This thread goes back to the pool; the lease is held until the cluster answers.
            try:
                report_in_background(
                    self._completions,
                    self._threads.submit,
                    self.worker_id,
                    lease,
                    outcome,
                    retry_for_s=self.complete_retry_s,
                    give_up=self._give_up,
                    on_done=lambda: self._table.remove(lease),
                )
                return
            except BaseException:
                self._table.remove(lease)  # never a lease held forever: a stop would wait on it
                raise
        self._table.remove(lease)

    def _report(self, lease: HeldLease, outcome: Outcome, retry_for_s: float | None = None) -> None:
        report_outcome(
            self._completions.send,
            self.worker_id,
            lease,
            outcome,
            retry_for_s=self.complete_retry_s if retry_for_s is None else retry_for_s,
            give_up=self._give_up,
        )


class _SessionTries:
    """When the lease loop tries a session (the rest of the time it leases with unary calls):
    at once after one ended, after a growing pause after a failed open, never again once the
    cluster answers that it has no sessions (UNIMPLEMENTED: an older cluster)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._next_at = 0.0
        self._backoff = Backoff(initial_s=0.5, max_s=30.0)
        self._failures = FailureLog(log, "opening a worker session")

    def due(self) -> bool:
        return self.enabled and time.monotonic() >= self._next_at

    def failed(self, error: grpc.RpcError) -> None:
        if isinstance(error, grpc.Call) and error.code() == grpc.StatusCode.UNIMPLEMENTED:
            self.enabled = False
            log.info("the cluster has no worker sessions: leasing with unary calls")
            return
        self._failures.failed(error)
        self._next_at = time.monotonic() + self._backoff.next_delay_s()

    def ended(self, error: grpc.RpcError | None) -> None:
        self._failures.succeeded()
        self._backoff.reset()
        if error is not None:
            log.info("worker session ended (%s); opening another", describe_rpc_error(error))


def _http_allow_list(http: bool, entries: Iterable[str]) -> HttpAllowList:
    allow = HttpAllowList(entries)
    if allow and not http:
        raise ValueError("http_allow needs http=True")
    if http and not allow:
        # A worker that would fail every request is a mistake, not a policy.
        raise ValueError("http=True needs http_allow: the hosts this worker may call (HOST or HOST:PORT)")
    return allow
