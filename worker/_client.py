"""A small client for a raftcron cluster, with failover between nodes.

Any node answers any call (writes are forwarded to the leader), so the client only needs one
reachable node. It holds a gRPC channel to every address, tries the node that answered last
first, and moves on to the next address when a node is UNAVAILABLE (down, unreachable, refusing
connections, not ready). Each address is tried at most once per call; when all of them fail, the
last error is raised, with a note listing every attempt. Any other status (NOT_FOUND,
INVALID_ARGUMENT, DEADLINE_EXCEEDED, ...) is raised at once: the node was reached, and a write
that timed out may still commit, so retrying it is the caller's decision.

Credentials (TLS, a client certificate, a bearer token) come from `Credentials`, usually
`Credentials.from_env()`: the variables `raftcron dev` prints.

A write request with an empty `request_id` gets a fresh one, shared by every attempt of the
call, so a write that reached a node before it failed over is deduplicated by the cluster
instead of being applied twice. With `outcome_retries`, a write whose outcome is unknown (the
node says so in trailing metadata, `raftcron-outcome: unknown`, when leadership changed or its
entry did not commit in time; or the call's deadline passed) is sent again with the same id: the
cluster answers the first outcome if there was one, and applies it once otherwise.

    with ClusterClient(parse_cluster("10.0.0.1:7100,10.0.0.2:7100")) as client:
        job = client.get_job(job_id="nightly-report").job
        client.pause_job(job_id="nightly-report", author="alice", reason="maintenance")
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import message as _message
from google.protobuf import message_factory

from worker.api.v1 import (
    cluster_pb2,
    cluster_pb2_grpc,
    jobs_pb2,
    jobs_pb2_grpc,
    ops_pb2,
    ops_pb2_grpc,
    runs_pb2,
    runs_pb2_grpc,
    worker_pb2,
    worker_pb2_grpc,
)
from worker.api.v1.metadata import LEADER_ADDRESS, OUTCOME_UNKNOWN

__all__ = ["ClusterClient", "Credentials", "PlaintextTokenRefused", "parse_cluster", "plaintext_decision"]

# Service name -> (file descriptor holding it, stub class).
_SERVICES = {
    "JobService": (jobs_pb2.DESCRIPTOR, jobs_pb2_grpc.JobServiceStub),
    "RunService": (runs_pb2.DESCRIPTOR, runs_pb2_grpc.RunServiceStub),
    "ClusterService": (cluster_pb2.DESCRIPTOR, cluster_pb2_grpc.ClusterServiceStub),
    "WorkerService": (worker_pb2.DESCRIPTOR, worker_pb2_grpc.WorkerServiceStub),
    "OpsService": (ops_pb2.DESCRIPTOR, ops_pb2_grpc.OpsServiceStub),
}

# Status codes after which the next node is tried.
_FAILOVER_CODES = frozenset({grpc.StatusCode.UNAVAILABLE})
OUTCOME_RETRY_BACKOFF_S = 0.25

log = logging.getLogger("raftcron.client")

Metadata = Sequence[tuple[str, str]] | Mapping[str, str]


def _outcome_unknown(error: grpc.RpcError) -> bool:
    """The node said it does not know whether the write commits, or the call's deadline passed."""
    if not isinstance(error, grpc.Call):
        return False
    if error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return True
    return OUTCOME_UNKNOWN in tuple(error.trailing_metadata() or ())


def parse_cluster(s: str) -> list[str]:
    """Split "host:port,host:port" into a list of addresses, validating each one.

    Spaces around addresses are ignored; IPv6 hosts are written in brackets ("[::1]:7100").
    Raises ValueError on an empty list, an empty or malformed address, a bad port or a duplicate.
    """
    if not isinstance(s, str) or not s.strip():
        raise ValueError(f"empty cluster address list {s!r}: expected 'host:port,host:port'")
    addresses = [_check_address(item.strip()) for item in s.split(",")]
    _check_unique(addresses)
    return addresses


def _check_address(address: str) -> str:
    if not isinstance(address, str) or not address:
        raise ValueError(f"empty address {address!r} in cluster list: expected 'host:port'")
    if any(c.isspace() for c in address):
        raise ValueError(f"invalid address {address!r}: contains whitespace")
    if address.startswith("["):
        host, sep, port = address[1:].partition("]:")
    else:
        host, sep, port = address.rpartition(":")
        if ":" in host:
            raise ValueError(f"invalid address {address!r}: write an IPv6 host in brackets, e.g. '[::1]:7100'")
    if not sep or not host:
        raise ValueError(f"invalid address {address!r}: expected 'host:port'")
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise ValueError(f"invalid address {address!r}: port must be a number from 1 to 65535")
    return address


def _check_unique(addresses: Sequence[str]) -> None:
    seen: set[str] = set()
    for address in addresses:
        if address in seen:
            raise ValueError(f"duplicate address {address!r} in cluster list")
        seen.add(address)


# What a client does about a bearer token on a channel without TLS (plaintext_decision).
ALLOW, WARN, REFUSE = "allow", "warn", "refuse"
_TRUE_WORDS = ("1", "true", "yes", "on")


def _is_loopback_address(address: str) -> bool:
    """True for 'localhost', 127.0.0.0/8 and ::1; any other name could resolve anywhere."""
    host = address[1:].partition("]")[0] if address.startswith("[") else address.rpartition(":")[0]
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plaintext_decision(address: str, tls: bool, has_token: bool, allow_plaintext: bool) -> str:
    """Whether a call to `address` may carry the bearer token: a token sent without TLS can be
    read (and replayed) by anyone on the path, so off loopback it needs an explicit yes."""
    if tls or not has_token:
        return ALLOW
    if _is_loopback_address(address):
        return WARN
    return ALLOW if allow_plaintext else REFUSE


class PlaintextTokenRefused(ValueError):
    """The client would have sent its bearer token without TLS to a non-loopback address."""


_warned_plaintext: set[str] = set()
_warned_lock = threading.Lock()


@dataclass(frozen=True)
class Credentials:
    """How to reach a secured cluster. TLS is on when `ca_file` or a client certificate is set
    (no `ca_file`: the system's roots); the token travels as `authorization: Bearer ...`.
    A token is never sent without TLS to an address off loopback unless `allow_plaintext`
    (RAFTCRON_INSECURE=1, `--insecure`) says so."""

    ca_file: str = ""
    token: str = field(default="", repr=False)
    client_cert_file: str = ""
    client_key_file: str = ""
    allow_plaintext: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Credentials:
        """RAFTCRON_CA, RAFTCRON_TOKEN or RAFTCRON_TOKEN_FILE, RAFTCRON_CLIENT_CERT and _KEY,
        RAFTCRON_INSECURE."""
        token = environ.get("RAFTCRON_TOKEN", "")
        token_file = environ.get("RAFTCRON_TOKEN_FILE", "")
        if token_file and not token:
            try:
                token = Path(token_file).read_text().strip()
            except OSError as exc:
                raise ValueError(f"cannot read RAFTCRON_TOKEN_FILE {token_file!r}: {exc.strerror}") from None
        return cls(
            ca_file=environ.get("RAFTCRON_CA", ""),
            token=token,
            client_cert_file=environ.get("RAFTCRON_CLIENT_CERT", ""),
            client_key_file=environ.get("RAFTCRON_CLIENT_KEY", ""),
            allow_plaintext=environ.get("RAFTCRON_INSECURE", "").strip().lower() in _TRUE_WORDS,
        )

    @property
    def tls(self) -> bool:
        return bool(self.ca_file or self.client_cert_file)

    def check_address(self, address: str) -> None:
        """Raise PlaintextTokenRefused before any connection when the token must not go to
        `address` in plaintext; warn (once per address) when it goes there over loopback."""
        decision = plaintext_decision(address, self.tls, bool(self.token), self.allow_plaintext)
        if decision == REFUSE:
            raise PlaintextTokenRefused(
                f"refusing to send a bearer token in plaintext to {address}: anyone on the network path "
                "could read it. Configure TLS with the CA that signs the nodes' certificates (RAFTCRON_CA "
                "or --ca), or, on a network you trust, accept plaintext explicitly (RAFTCRON_INSECURE=1, "
                "--insecure, or Credentials(allow_plaintext=True))"
            )
        if decision == WARN:
            with _warned_lock:
                first = address not in _warned_plaintext
                _warned_plaintext.add(address)
            if first:
                log.warning(
                    "sending a bearer token without TLS to %s (loopback: readable by local users "
                    "who can capture it); set RAFTCRON_CA to use TLS",
                    address,
                )

    def channel(self, address: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
        self.check_address(address)
        if not self.tls:
            return grpc.insecure_channel(address, options=options)
        if bool(self.client_cert_file) != bool(self.client_key_file):
            raise ValueError("a client certificate needs its key (RAFTCRON_CLIENT_CERT and RAFTCRON_CLIENT_KEY)")
        credentials = grpc.ssl_channel_credentials(
            root_certificates=_read_file(self.ca_file, "CA certificate") if self.ca_file else None,
            private_key=_read_file(self.client_key_file, "client key") if self.client_key_file else None,
            certificate_chain=_read_file(self.client_cert_file, "client certificate")
            if self.client_cert_file
            else None,
        )
        return grpc.secure_channel(address, credentials, options=options)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()


def _read_file(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the {what} {path!r}: {exc.strerror}") from None


class ClusterClient:
    """Calls raftcron nodes over gRPC, failing over between them (see the module docstring).

    Every public method takes either a request message or the request's fields as keyword
    arguments (``client.get_job(job_id="x")``), and returns the response message.
    Thread-safe; close it (or use it as a context manager) to release the channels.
    """

    def __init__(
        self,
        addresses: list[str],
        timeout_s: float = 5.0,
        metadata: Metadata | None = None,
        credentials: Credentials | None = None,
        outcome_retries: int = 0,
    ) -> None:
        """`outcome_retries`: how many times a write whose outcome is unknown is sent again
        with its request id (0: the caller decides; see the module docstring)."""
        if isinstance(addresses, str):
            raise TypeError("addresses must be a list of 'host:port' strings; use parse_cluster() for 'a:1,b:2'")
        self._addresses = tuple(_check_address(a) for a in addresses)
        if not self._addresses:
            raise ValueError("at least one node address is required")
        _check_unique(self._addresses)
        if not 0 < timeout_s < math.inf:  # every call gets a deadline: no NaN, no infinity
            raise ValueError(f"timeout_s must be a positive, finite number of seconds, got {timeout_s!r}")
        self._timeout_s = float(timeout_s)
        if not isinstance(outcome_retries, int) or outcome_retries < 0:
            raise ValueError(f"outcome_retries must be a whole number >= 0, got {outcome_retries!r}")
        self._outcome_retries = outcome_retries
        items = metadata.items() if isinstance(metadata, Mapping) else (metadata or ())
        self._credentials = credentials or Credentials()
        for address in self._addresses:  # refused here, before any channel exists
            self._credentials.check_address(address)
        self._metadata = tuple((str(k), str(v)) for k, v in items) + self._credentials.metadata() or None
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[tuple[str, str], Any] = {}
        self._preferred = 0  # index of the last node that answered
        self._closed = False

    def prefer(self, address: str) -> bool:
        """Try `address` first from now on (a node named it the leader); False, and nothing
        changed, if it is not one of this client's addresses."""
        try:
            index = self._addresses.index(address)
        except ValueError:
            return False
        with self._lock:
            self._preferred = index
        return True

    @property
    def addresses(self) -> tuple[str, ...]:
        """The node addresses, in configuration order."""
        return self._addresses

    # JobService
    def apply_jobs(
        self, request: jobs_pb2.ApplyJobsRequest | None = None, /, **fields: Any
    ) -> jobs_pb2.ApplyJobsResponse:
        return self._call("JobService", "ApplyJobs", request, fields)

    def get_job(self, request: jobs_pb2.GetJobRequest | None = None, /, **fields: Any) -> jobs_pb2.GetJobResponse:
        return self._call("JobService", "GetJob", request, fields)

    def list_jobs(self, request: jobs_pb2.ListJobsRequest | None = None, /, **fields: Any) -> jobs_pb2.ListJobsResponse:
        return self._call("JobService", "ListJobs", request, fields)

    def list_calendars(
        self, request: jobs_pb2.ListCalendarsRequest | None = None, /, **fields: Any
    ) -> jobs_pb2.ListCalendarsResponse:
        return self._call("JobService", "ListCalendars", request, fields)

    def list_routes(
        self, request: jobs_pb2.ListRoutesRequest | None = None, /, **fields: Any
    ) -> jobs_pb2.ListRoutesResponse:
        return self._call("JobService", "ListRoutes", request, fields)

    def delete_job(
        self, request: jobs_pb2.DeleteJobRequest | None = None, /, **fields: Any
    ) -> jobs_pb2.DeleteJobResponse:
        return self._call("JobService", "DeleteJob", request, fields)

    def pause_job(self, request: jobs_pb2.PauseJobRequest | None = None, /, **fields: Any) -> jobs_pb2.PauseJobResponse:
        return self._call("JobService", "PauseJob", request, fields)

    def resume_job(
        self, request: jobs_pb2.ResumeJobRequest | None = None, /, **fields: Any
    ) -> jobs_pb2.ResumeJobResponse:
        return self._call("JobService", "ResumeJob", request, fields)

    def trigger_job(
        self, request: jobs_pb2.TriggerJobRequest | None = None, /, **fields: Any
    ) -> jobs_pb2.TriggerJobResponse:
        return self._call("JobService", "TriggerJob", request, fields)

    def cancel_run(
        self, request: jobs_pb2.CancelRunRequest | None = None, /, **fields: Any
    ) -> jobs_pb2.CancelRunResponse:
        """Cancel one queued or leased run (the cluster must be at log format 3)."""
        return self._call("JobService", "CancelRun", request, fields)

    def kill_class(
        self, request: ops_pb2.KillClassRequest | None = None, /, **fields: Any
    ) -> ops_pb2.KillClassResponse:
        return self._call("OpsService", "KillClass", request, fields)

    def revive_class(
        self, request: ops_pb2.ReviveClassRequest | None = None, /, **fields: Any
    ) -> ops_pb2.ReviveClassResponse:
        return self._call("OpsService", "ReviveClass", request, fields)

    def list_kills(
        self, request: ops_pb2.ListKillsRequest | None = None, /, **fields: Any
    ) -> ops_pb2.ListKillsResponse:
        return self._call("OpsService", "ListKills", request, fields)

    def list_alerts(
        self, request: ops_pb2.ListAlertsRequest | None = None, /, **fields: Any
    ) -> ops_pb2.ListAlertsResponse:
        return self._call("OpsService", "ListAlerts", request, fields)

    def backfill_job(
        self, request: jobs_pb2.BackfillJobRequest | None = None, /, **fields: Any
    ) -> jobs_pb2.BackfillJobResponse:
        return self._call("JobService", "BackfillJob", request, fields)

    # RunService
    def list_runs(self, request: runs_pb2.ListRunsRequest | None = None, /, **fields: Any) -> runs_pb2.ListRunsResponse:
        return self._call("RunService", "ListRuns", request, fields)

    def get_run(self, request: runs_pb2.GetRunRequest | None = None, /, **fields: Any) -> runs_pb2.GetRunResponse:
        return self._call("RunService", "GetRun", request, fields)

    # ClusterService
    def status(self, address: str | None = None, include_digest: bool = False) -> cluster_pb2.StatusResponse:
        """One node's view (that node only when `address` is given); the state digest on request."""
        return self._call("ClusterService", "Status", None, {"include_digest": include_digest}, address=address)

    def add_member(
        self, request: cluster_pb2.AddMemberRequest | None = None, /, *, timeout_s: float | None = None, **fields: Any
    ) -> cluster_pb2.MembershipResponse:
        """Make a running node (`raftcron serve --join`) a voter; admin only. Any node forwards it to the leader."""
        return self._call("ClusterService", "AddMember", request, fields, timeout_s=timeout_s)

    def remove_member(
        self,
        request: cluster_pb2.RemoveMemberRequest | None = None,
        /,
        *,
        timeout_s: float | None = None,
        **fields: Any,
    ) -> cluster_pb2.MembershipResponse:
        """Remove a member, dead or alive (a leader hands over first); admin only."""
        return self._call("ClusterService", "RemoveMember", request, fields, timeout_s=timeout_s)

    # WorkerService. `timeout_s` overrides the per-call timeout for one call: a long-poll Lease
    # needs more than its `wait`, a heartbeat less than the interval between two heartbeats.
    def lease(
        self, request: worker_pb2.LeaseRequest | None = None, /, *, timeout_s: float | None = None, **fields: Any
    ) -> worker_pb2.LeaseResponse:
        return self._call("WorkerService", "Lease", request, fields, timeout_s=timeout_s)

    def heartbeat(
        self, request: worker_pb2.HeartbeatRequest | None = None, /, *, timeout_s: float | None = None, **fields: Any
    ) -> worker_pb2.HeartbeatResponse:
        return self._call("WorkerService", "Heartbeat", request, fields, timeout_s=timeout_s)

    def complete(
        self, request: worker_pb2.CompleteRequest | None = None, /, *, timeout_s: float | None = None, **fields: Any
    ) -> worker_pb2.CompleteResponse:
        return self._call("WorkerService", "Complete", request, fields, timeout_s=timeout_s)

    def complete_many(
        self,
        request: worker_pb2.CompleteManyRequest | None = None,
        /,
        *,
        timeout_s: float | None = None,
        **fields: Any,
    ) -> worker_pb2.CompleteManyResponse:
        return self._call("WorkerService", "CompleteMany", request, fields, timeout_s=timeout_s)

    def open_session(
        self, requests: Callable[[], Iterator[worker_pb2.SessionRequest]], open_timeout_s: float | None = None
    ) -> tuple[Any, worker_pb2.SessionResponse, str]:
        """Open WorkerService.Session on the first node that accepts it, the preferred one first;
        a node that is not leading names the leader (trailing metadata), which is tried next.
        `requests()` makes the messages of one attempt. Returns the call (iterate it for the
        node's messages, cancel it to end the session), its first message and the node's address;
        raises the last grpc.RpcError when no node accepts (UNIMPLEMENTED at once: an older node)."""
        timeout_s = self._timeout_s if open_timeout_s is None else open_timeout_s
        with self._lock:
            start = self._preferred
        order = [self._addresses[(start + step) % len(self._addresses)] for step in range(len(self._addresses))]
        failures: list[str] = []
        last_error: grpc.RpcError | None = None
        while order:
            address = order.pop(0)
            call = self._stub(address, "WorkerService").Session(requests(), metadata=self._metadata)
            timer = threading.Timer(timeout_s, call.cancel)  # a node that never answers the open
            timer.daemon = True
            timer.start()
            try:
                first = next(call)
            except grpc.RpcError as error:
                code = error.code() if isinstance(error, grpc.Call) else None
                if code != grpc.StatusCode.UNAVAILABLE:
                    raise
                failures.append(f"{address}: {code.name}: {error.details()}")
                last_error = error
                leader = dict(error.trailing_metadata() or ()).get(LEADER_ADDRESS, "")
                if leader in order:
                    order.remove(leader)
                    order.insert(0, leader)
                continue
            except StopIteration:
                failures.append(f"{address}: the session ended at once")
                continue
            finally:
                timer.cancel()
            with self._lock:
                self._preferred = self._addresses.index(address)
            return call, first, address
        failure = last_error or grpc.RpcError("no node opened a session")
        failure.add_note("WorkerService.Session: no node opened it:\n  " + "\n  ".join(failures))
        raise failure

    def close(self) -> None:
        """Close every channel. Idempotent; calls after close raise ValueError."""
        with self._lock:
            self._closed = True
            channels, self._channels, self._stubs = self._channels, {}, {}
        for channel in channels.values():
            channel.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"ClusterClient({list(self._addresses)!r}, timeout_s={self._timeout_s!r})"

    # Internals
    def _call(
        self,
        service: str,
        method: str,
        request: _message.Message | None,
        fields: Mapping[str, Any],
        *,
        address: str | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        """Call service/method, on `address` only if given, else with failover; a write whose
        outcome is unknown is sent again with its request id, up to `outcome_retries` times."""
        request = self._request(service, method, request, fields)
        if timeout_s is None:
            timeout_s = self._timeout_s
        elif not 0 < timeout_s < math.inf:
            raise ValueError(f"timeout_s must be a positive, finite number of seconds, got {timeout_s!r}")
        retries = self._outcome_retries if getattr(request, "request_id", "") else 0
        for attempt in range(retries + 1):
            try:
                return self._call_once(service, method, request, address, timeout_s)
            except grpc.RpcError as error:
                if attempt == retries or not _outcome_unknown(error):
                    raise
                log.warning(
                    "%s.%s: outcome unknown (%s); sending it again with request id %s (%d of %d)",
                    service,
                    method,
                    error.details(),
                    request.request_id,
                    attempt + 1,
                    retries,
                )
                time.sleep(OUTCOME_RETRY_BACKOFF_S * 2**attempt)
        raise AssertionError("unreachable")

    def _call_once(
        self, service: str, method: str, request: _message.Message, address: str | None, timeout_s: float
    ) -> Any:
        if address is not None:
            return self._invoke(_check_address(address), service, method, request, timeout_s)
        with self._lock:
            start = self._preferred
        count = len(self._addresses)
        failures: list[str] = []
        last_error: grpc.RpcError | None = None
        for step in range(count):
            index = (start + step) % count
            node = self._addresses[index]
            try:
                response = self._invoke(node, service, method, request, timeout_s)
            except grpc.RpcError as error:
                code = error.code() if isinstance(error, grpc.Call) else None
                if code is None or code not in _FAILOVER_CODES:
                    raise
                details = error.details() if isinstance(error, grpc.Call) else str(error)
                failures.append(f"{node}: {code.name}: {details}")
                last_error = error
                continue
            with self._lock:
                self._preferred = index
            return response
        assert last_error is not None
        last_error.add_note(f"{service}.{method}: no node answered:\n  " + "\n  ".join(failures))
        raise last_error

    @staticmethod
    def _request(
        service: str, method: str, request: _message.Message | None, fields: Mapping[str, Any]
    ) -> _message.Message:
        """The request message, built from `fields` if needed, with a request id if it takes one."""
        file_descriptor, _ = _SERVICES[service]
        input_type = file_descriptor.services_by_name[service].methods_by_name[method].input_type
        if request is None:
            request = message_factory.GetMessageClass(input_type)(**fields)
        elif fields:
            raise TypeError(f"{method}: pass a request message or keyword fields, not both")
        elif request.DESCRIPTOR is not input_type:
            raise TypeError(f"{method} takes {input_type.full_name}, got {request.DESCRIPTOR.full_name}")
        if "request_id" in input_type.fields_by_name and not request.request_id:
            filled = type(request)()
            filled.CopyFrom(request)
            filled.request_id = uuid.uuid4().hex
            request = filled
        return request

    def _invoke(self, address: str, service: str, method: str, request: _message.Message, timeout_s: float) -> Any:
        rpc = getattr(self._stub(address, service), method)
        return rpc(request, timeout=timeout_s, metadata=self._metadata)

    def _stub(self, address: str, service: str) -> Any:
        with self._lock:
            if self._closed:
                raise ValueError("ClusterClient is closed")
            stub = self._stubs.get((address, service))
            if stub is None:
                channel = self._channels.get(address)
                if channel is None:
                    channel = self._channels[address] = self._credentials.channel(address)
                stub = self._stubs[(address, service)] = _SERVICES[service][1](channel)
            return stub
