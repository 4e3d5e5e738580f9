"""The authorization policy, pure: which roles may call which method, and the owner and target
scopes. The interceptor applies the method table; servicers apply the scopes after a lookup
(a job's owner, a run's target). Each check returns None when allowed, or the reason it is not.

Every RPC of every service must be listed here (a test enforces it), and an unlisted method
is refused: a new RPC cannot slip through unprotected.
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase

from scheduler.core.vocabulary import TargetKind
from scheduler.security.principals import (
    ADMIN,
    HOLDER_SEPARATOR,
    HTTP,
    HTTP_PREFIX,
    READER,
    SHELL,
    SHELL_PREFIX,
    SUBMITTER,
    WORKER,
    Principal,
)

ANONYMOUS = "anonymous"
PUBLIC = frozenset({ANONYMOUS})  # no token needed: tells only whether the node is up
ADMIN_ONLY = frozenset({ADMIN})
READERS = frozenset({ADMIN, SUBMITTER, READER})
SUBMITTERS = frozenset({ADMIN, SUBMITTER})  # and owner-scoped in the servicer
WORKERS = frozenset({ADMIN, WORKER})  # and target-scoped in the servicer
ANYONE_KNOWN = frozenset({ADMIN, SUBMITTER, WORKER, READER})

_V1 = "/raftcron.v1."
METHOD_ROLES: dict[str, frozenset[str]] = {
    "/grpc.health.v1.Health/Check": PUBLIC,
    "/grpc.health.v1.Health/Watch": PUBLIC,
    # The schema is public, but a reflection stream holds a server thread: callers known only.
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": ANYONE_KNOWN,
    _V1 + "ClusterService/Status": ANYONE_KNOWN,
    _V1 + "ClusterService/AddMember": ADMIN_ONLY,
    _V1 + "ClusterService/RemoveMember": ADMIN_ONLY,
    _V1 + "JobService/GetJob": READERS,
    _V1 + "JobService/ListJobs": READERS,
    _V1 + "JobService/ListCalendars": READERS,
    _V1 + "JobService/ListRoutes": READERS,
    _V1 + "JobService/ApplyJobs": SUBMITTERS,
    _V1 + "JobService/DeleteJob": SUBMITTERS,
    _V1 + "JobService/PauseJob": SUBMITTERS,
    _V1 + "JobService/ResumeJob": SUBMITTERS,
    _V1 + "JobService/TriggerJob": SUBMITTERS,
    _V1 + "JobService/BackfillJob": SUBMITTERS,
    _V1 + "JobService/CancelRun": SUBMITTERS,
    _V1 + "RunService/ListRuns": READERS,
    _V1 + "RunService/GetRun": READERS,
    _V1 + "WorkerService/Lease": WORKERS,
    _V1 + "WorkerService/Heartbeat": WORKERS,
    _V1 + "WorkerService/Complete": WORKERS,
    _V1 + "WorkerService/CompleteMany": WORKERS,
    _V1 + "WorkerService/Session": WORKERS,
    _V1 + "OpsService/KillClass": ADMIN_ONLY,
    _V1 + "OpsService/ReviveClass": ADMIN_ONLY,
    _V1 + "OpsService/ListKills": READERS,
    _V1 + "OpsService/ListAlerts": READERS,
}


def is_public(method: str) -> bool:
    return ANONYMOUS in METHOD_ROLES.get(method, ())


def method_denial(principal: Principal, method: str) -> str | None:
    roles = METHOD_ROLES.get(method)
    if roles is None:
        return f"{method} has no authorization policy; refused"
    if ANONYMOUS in roles or principal.role in roles:
        return None
    allowed = ", ".join(sorted(roles))
    return f"{principal.name} (role {principal.role}) may not call {method.rsplit('/', 1)[-1]}: needs {allowed}"


def job_change_denial(principal: Principal, job_id: str, owner: str) -> str | None:
    """May `principal` change (or create, delete, pause, trigger...) job `job_id` owned by `owner`?"""
    if principal.owns(owner):
        return None
    return f"{principal.name} may change jobs of owners {list(principal.owners)}, not job {job_id!r} of owner {owner!r}"


def _admin_only_denial(principal: Principal, changed: Iterable[str], what: str) -> str | None:
    names = sorted(changed)
    if not names or principal.role == ADMIN:
        return None
    return f"{principal.name} may not change {what} {names}: needs admin"


def resources_change_denial(principal: Principal, changed: Iterable[str]) -> str | None:
    """Resource budgets are shared by every owner: only an admin changes them."""
    return _admin_only_denial(principal, changed, "shared resources")


def calendars_change_denial(principal: Principal, changed: Iterable[str]) -> str | None:
    """Calendars are shared by every owner, like resources: only an admin changes them."""
    return _admin_only_denial(principal, changed, "shared calendars")


def routes_change_denial(principal: Principal, changed: Iterable[str]) -> str | None:
    """Alert routes decide where every owner's alerts go (and hold secret urls): admin only."""
    return _admin_only_denial(principal, changed, "alert routes")


def lease_denial(principal: Principal, targets: Iterable[str]) -> str | None:
    """May `principal` lease runs of `targets` (empty: every target; `shell`: every owner's shell
    commands, which a worker scoped to some owners' must ask for as `shell:OWNER`)?"""
    targets = list(targets)
    if not targets:
        if principal.serves_every_target:
            return None
        return f"{principal.name} must name the targets it leases (it may lease {list(principal.targets)})"
    every_owners = {SHELL: SHELL_PREFIX + "*", HTTP: HTTP_PREFIX + "*"}
    foreign = [t for t in targets if not principal.serves(every_owners.get(t, t))]
    if not foreign:
        return None
    return f"{principal.name} may lease targets {list(principal.targets)}, not {foreign}"


def run_denial(principal: Principal, run_key: str, target: str) -> str | None:
    """May `principal` heartbeat or complete run `run_key`, whose job runs on `target`?"""
    if principal.serves(target):
        return None
    return f"{principal.name} may report runs of targets {list(principal.targets)}, not {run_key} (target {target!r})"


def apply_denial(principal: Principal, jobs: Iterable[tuple[str, str]], resources: Iterable[str]) -> str | None:
    """An apply touching `jobs` ((job id, owner) before and after the change) and `resources`."""
    for job_id, owner in jobs:
        if denial := job_change_denial(principal, job_id, owner):
            return denial
    return resources_change_denial(principal, resources)


def prunes(principal: Principal | None, owner: str) -> bool:
    """Whether `--prune` may remove a job of `owner`: a submitter's file speaks for its owners only."""
    return principal is None or principal.owns(owner)


# -- targets are authority: what a submitter's jobs may run --------------------------------------

HANDLER_PREFIX = "handler:"
# A submitter whose principal lists no `targets` (files written before targets were authority):
# every handler, never a shell command.
LEGACY_SUBMITTER_TARGETS = (HANDLER_PREFIX + "*",)


# Target kinds named by their job's owner, whose names only patterns of their own prefix match.
_OWNER_NAMED: dict[str, str] = {TargetKind.SHELL: SHELL_PREFIX, TargetKind.HTTP: HTTP_PREFIX}


def canonical_target(kind: str, target: str, owner: str) -> str:
    """The name a submitter's `targets` patterns match: `handler:NAME`, `shell:OWNER` for a shell
    command (the command text is no authority: `pg_dump *` would match `pg_dump x; rm -rf /`), or
    `http:OWNER` for an HTTP request (which hosts are called is the worker's `--http-allow`)."""
    prefix = _OWNER_NAMED.get(kind)
    return prefix + owner if prefix else HANDLER_PREFIX + target


def target_denial(principal: Principal, job_id: str, owner: str, kind: str, target: str) -> str | None:
    """May `principal` make job `job_id` (of `owner`) run `target`? A shell or HTTP target needs a
    pattern that starts with `shell:` or `http:` itself: a bare `*` grants every handler only."""
    if principal.role == ADMIN:
        return None
    name = canonical_target(kind, target, owner)
    patterns = principal.targets or LEGACY_SUBMITTER_TARGETS
    prefix = _OWNER_NAMED.get(kind)
    if prefix:
        patterns = tuple(p for p in patterns if p.startswith(prefix))
    if any(fnmatchcase(name, pattern) for pattern in patterns):
        return None
    return (
        f"{principal.name} may not use target {name!r} for job {job_id!r}: its targets are "
        f"{list(principal.targets or LEGACY_SUBMITTER_TARGETS)}"
        + (f"; {kind} targets need a pattern starting with {prefix!r}" if prefix else "")
    )


def jobs_target_denial(principal: Principal, jobs: Iterable[tuple[str, str, str, str]]) -> str | None:
    """The first refusal among `jobs` ((job id, owner, target kind, target)), else None."""
    for job_id, owner, kind, target in jobs:
        if denial := target_denial(principal, job_id, owner, kind, target):
            return denial
    return None


# -- reads: whose payloads and output tails a caller sees ---------------------------------------


def sees_details(principal: Principal | None, owner: str) -> bool:
    """Payloads and output tails are the owner's: shown to an admin, and to a submitter or
    reader whose `owners` match (a reader without owners sees none). Without authentication
    (a loopback or explicitly insecure node) everything is shown, as before."""
    if principal is None or principal.role == ADMIN:
        return True
    return principal.role in (SUBMITTER, READER) and principal.owns(owner)


# -- leases belong to the principal they were granted to ----------------------------------------


def lease_holder(principal: Principal | None, worker_id: str) -> str:
    """The worker id recorded for a lease: qualified by the authenticated principal, so that a
    client-chosen worker id can never name another principal's lease."""
    return worker_id if principal is None else f"{principal.name}{HOLDER_SEPARATOR}{worker_id}"


def held_by(principal: Principal, recorded_worker_id: str) -> bool:
    """Whether the lease recorded for `recorded_worker_id` is `principal`'s. An unqualified id was
    recorded by a node of an earlier version (a rolling upgrade): such a lease is bound to no one,
    as before, and the target scope alone applies to it."""
    if HOLDER_SEPARATOR not in recorded_worker_id:
        return True
    return recorded_worker_id.startswith(principal.name + HOLDER_SEPARATOR)


def holder_of_token(run, fencing_token: int) -> str | None:
    """The recorded worker id of the attempt `fencing_token` granted (None: no such attempt).
    A token's holder never changes: each grant is a new attempt with a new token."""
    for attempt in reversed(run.attempts):
        if attempt.fencing_token == fencing_token:
            return attempt.worker_id
    return None


def holder_denial(principal: Principal, run_key: str, fencing_token: int, holder: str) -> str | None:
    """May `principal` heartbeat or complete the lease `fencing_token` of `run_key`, held by `holder`?"""
    if held_by(principal, holder):
        return None
    return f"{principal.name} does not hold lease {fencing_token} of {run_key}; refused"
