"""The authorization policy: every RPC has one, roles and scopes say what they should."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import worker.api.v1 as api
from scheduler.security.policy import (
    METHOD_ROLES,
    apply_denial,
    is_public,
    job_change_denial,
    lease_denial,
    method_denial,
    prunes,
    resources_change_denial,
    run_denial,
)
from scheduler.security.principals import ADMIN, READER, SUBMITTER, WORKER, Principal

admin = Principal("root", ADMIN)
submitter = Principal("fin-ci", SUBMITTER, owners=("finance", "team-*"))
worker = Principal("rep-worker", WORKER, targets=("reports.*", "shell"))
any_worker = Principal("all-worker", WORKER, targets=("*",))
reader = Principal("grafana", READER)
V1 = "/raftcron.v1."


def every_rpc() -> list[str]:
    """Every method of every service in the generated modules, as gRPC names it on the wire."""
    methods = []
    for info in pkgutil.iter_modules(api.__path__):
        if info.name.endswith("_pb2"):
            module = importlib.import_module(f"{api.__name__}.{info.name}")
            for service in module.DESCRIPTOR.services_by_name.values():
                methods += [f"/{service.full_name}/{method.name}" for method in service.methods]
    return methods


def test_every_rpc_of_every_service_has_a_policy():
    methods = every_rpc()
    assert len(methods) >= 20
    missing = [m for m in methods if m not in METHOD_ROLES]
    assert not missing, f"add these to scheduler/security/policy.py METHOD_ROLES: {missing}"


STANDARD_SERVICES = {
    "/grpc.health.v1.Health/Check",
    "/grpc.health.v1.Health/Watch",
    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
}


def test_no_policy_for_a_method_that_does_not_exist():
    stale = set(METHOD_ROLES) - set(every_rpc()) - STANDARD_SERVICES
    assert not stale


def test_reflection_needs_a_token_of_any_role():
    method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
    assert not is_public(method)
    assert all(method_denial(p, method) is None for p in (admin, submitter, worker, reader))


def test_only_health_is_public():
    assert [m for m in METHOD_ROLES if is_public(m)] == ["/grpc.health.v1.Health/Check", "/grpc.health.v1.Health/Watch"]


def test_an_unlisted_method_is_refused_even_to_an_admin():
    assert "no authorization policy" in method_denial(admin, V1 + "ClusterService/Reconfigure")


@pytest.mark.parametrize(
    "method, allowed",
    [
        ("JobService/ApplyJobs", {ADMIN, SUBMITTER}),
        ("JobService/DeleteJob", {ADMIN, SUBMITTER}),
        ("JobService/BackfillJob", {ADMIN, SUBMITTER}),
        ("JobService/ListJobs", {ADMIN, SUBMITTER, READER}),
        ("RunService/GetRun", {ADMIN, SUBMITTER, READER}),
        ("WorkerService/Lease", {ADMIN, WORKER}),
        ("WorkerService/Complete", {ADMIN, WORKER}),
        ("OpsService/KillClass", {ADMIN}),
        ("OpsService/ReviveClass", {ADMIN}),
        ("OpsService/ListAlerts", {ADMIN, SUBMITTER, READER}),
        ("ClusterService/Status", {ADMIN, SUBMITTER, WORKER, READER}),
    ],
)
def test_roles_per_method(method, allowed):
    for principal in (admin, submitter, worker, reader):
        denial = method_denial(principal, V1 + method)
        assert (denial is None) == (principal.role in allowed), (principal.role, method, denial)


def test_a_denial_names_who_what_and_the_roles_needed():
    assert method_denial(submitter, V1 + "OpsService/KillClass") == (
        "fin-ci (role submitter) may not call KillClass: needs admin"
    )


def test_submitter_changes_jobs_of_its_owners_only():
    assert job_change_denial(submitter, "payroll", "finance") is None
    assert job_change_denial(submitter, "x", "team-blue") is None  # a pattern
    denial = job_change_denial(submitter, "etl", "analytics")
    assert "fin-ci" in denial and "'etl'" in denial and "'analytics'" in denial
    assert job_change_denial(admin, "etl", "analytics") is None


def test_an_apply_is_refused_if_any_job_before_or_after_belongs_to_another_owner():
    assert apply_denial(submitter, [("a", "finance"), ("b", "team-x")], []) is None
    # Taking over another owner's job: its current owner is listed too.
    assert apply_denial(submitter, [("etl", "finance"), ("etl", "analytics")], []) is not None


def test_shared_resources_are_changed_by_admins_only():
    assert resources_change_denial(submitter, []) is None
    assert "db-main" in resources_change_denial(submitter, ["db-main"])
    assert resources_change_denial(admin, ["db-main"]) is None
    assert apply_denial(submitter, [("a", "finance")], ["db-main"]) is not None


def test_prune_removes_only_jobs_the_caller_owns():
    assert prunes(None, "anyone")  # no authentication on this node
    assert prunes(submitter, "finance") and not prunes(submitter, "analytics")


def test_worker_leases_only_its_targets():
    assert lease_denial(worker, ["reports.build", "shell"]) is None
    assert "billing.run" in lease_denial(worker, ["reports.build", "billing.run"])
    assert "must name the targets" in lease_denial(worker, [])  # empty means every target
    assert lease_denial(any_worker, []) is None
    assert lease_denial(admin, []) is None


def test_worker_reports_only_runs_of_its_targets():
    assert run_denial(worker, "r@t", "reports.daily") is None
    denial = run_denial(worker, "bill@2026-01-01T00:00:00Z", "billing.run")
    assert "bill@2026-01-01T00:00:00Z" in denial and "billing.run" in denial
