"""The authorization policy, pure: which roles may call which method, and the owner and target
scopes. The interceptor applies the method table; servicers apply the scopes after a lookup
(a job's owner, a run's target). Each check returns None when allowed, or the reason it is not.

Every RPC of every service must be listed here (a test enforces it), and an unlisted method
is refused: a new RPC cannot slip through unprotected.
"""

from __future__ import annotations

from collections.abc import Iterable

from scheduler.security.principals import ADMIN, READER, SUBMITTER, WORKER, Principal

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
    _V1 + "ClusterService/Status": ANYONE_KNOWN,
    _V1 + "ClusterService/AddMember": ADMIN_ONLY,
    _V1 + "ClusterService/RemoveMember": ADMIN_ONLY,
    _V1 + "JobService/GetJob": READERS,
    _V1 + "JobService/ListJobs": READERS,
    _V1 + "JobService/ApplyJobs": SUBMITTERS,
    _V1 + "JobService/DeleteJob": SUBMITTERS,
    _V1 + "JobService/PauseJob": SUBMITTERS,
    _V1 + "JobService/ResumeJob": SUBMITTERS,
    _V1 + "JobService/TriggerJob": SUBMITTERS,
    _V1 + "JobService/BackfillJob": SUBMITTERS,
    _V1 + "RunService/ListRuns": READERS,
    _V1 + "RunService/GetRun": READERS,
    _V1 + "WorkerService/Lease": WORKERS,
    _V1 + "WorkerService/Heartbeat": WORKERS,
    _V1 + "WorkerService/Complete": WORKERS,
    _V1 + "WorkerService/CompleteMany": WORKERS,
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
    return (
        f"{principal.name} may change jobs of owners {list(principal.owners)}, "
        f"not job {job_id!r} of owner {owner!r}"
    )


def resources_change_denial(principal: Principal, changed: Iterable[str]) -> str | None:
    """Resource budgets are shared by every owner: only an admin changes them."""
    names = sorted(changed)
    if not names or principal.role == ADMIN:
        return None
    return f"{principal.name} may not change shared resources {names}: needs admin"


def lease_denial(principal: Principal, targets: Iterable[str]) -> str | None:
    """May `principal` lease runs of `targets` (empty: every target)?"""
    targets = list(targets)
    if not targets:
        if principal.serves_every_target:
            return None
        return f"{principal.name} must name the targets it leases (it may lease {list(principal.targets)})"
    foreign = [t for t in targets if not principal.serves(t)]
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
