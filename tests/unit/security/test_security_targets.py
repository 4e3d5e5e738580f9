"""Targets are authority, reads of details are owner-scoped, leases belong to their principal:
the pure policies, called directly."""

from __future__ import annotations

import pytest

from scheduler.core.model import Attempt, JobSpec, Run
from scheduler.leader.dispatch import leased_queues, target_key
from scheduler.security.policy import (
    canonical_target,
    held_by,
    holder_denial,
    holder_of_token,
    jobs_target_denial,
    lease_denial,
    lease_holder,
    run_denial,
    sees_details,
    target_denial,
)
from scheduler.security.principals import ADMIN, READER, SUBMITTER, WORKER, Principal, PrincipalsError, parse_principals

admin = Principal("root", ADMIN)
legacy = Principal("old-ci", SUBMITTER, owners=("finance",))  # a file written before targets
reports = Principal("rep-ci", SUBMITTER, owners=("finance", "ops"), targets=("handler:reports.*", "shell:ops"))
starry = Principal("star-ci", SUBMITTER, owners=("*",), targets=("*",))
shell_all = Principal("sh-ci", SUBMITTER, owners=("*",), targets=("shell:*",))


def test_canonical_names_of_targets():
    assert canonical_target("handler", "reports.build", "finance") == "handler:reports.build"
    # A shell command is named by its owner, never by its text.
    assert canonical_target("shell", "pg_dump db; rm -rf /", "ops") == "shell:ops"


@pytest.mark.parametrize(
    "principal, kind, target, owner, allowed",
    [
        (legacy, "handler", "anything.at.all", "finance", True),  # no targets: every handler...
        (legacy, "shell", "echo hi", "finance", False),  # ...and never a shell
        (reports, "handler", "reports.build", "finance", True),
        (reports, "handler", "payroll.run", "finance", False),
        (reports, "shell", "echo hi", "ops", True),
        (reports, "shell", "echo hi", "finance", False),  # shell for ops only
        (starry, "handler", "payroll.run", "x", True),
        (starry, "shell", "echo hi", "x", False),  # a bare * never grants shell
        (shell_all, "shell", "echo hi", "x", True),
        (shell_all, "handler", "reports.build", "x", False),
        (admin, "shell", "echo hi", "x", True),
    ],
)
def test_a_submitter_uses_only_its_targets(principal, kind, target, owner, allowed):
    assert (target_denial(principal, "job-1", owner, kind, target) is None) == allowed


def test_a_refusal_names_the_target_the_job_and_the_principal():
    denial = target_denial(starry, "nightly", "x", "shell", "cat /etc/shadow")
    assert "star-ci" in denial and "'shell:x'" in denial and "'nightly'" in denial and "shell:" in denial
    assert "cat /etc/shadow" not in denial
    assert jobs_target_denial(
        reports, [("a", "ops", "shell", "x"), ("b", "finance", "handler", "payroll.run")]
    ) == target_denial(reports, "b", "finance", "handler", "payroll.run")


def test_submitters_may_list_targets_and_readers_owners():
    entries = parse_principals(
        {
            "principals": [
                {
                    "name": "ci",
                    "role": "submitter",
                    "owners": ["ops"],
                    "targets": ["shell:ops"],
                    "token_sha256": "ab" * 32,
                },
                {"name": "grafana", "role": "reader", "owners": ["*"], "token_sha256": "cd" * 32},
            ]
        }
    )
    assert [p for _, p in entries] == [
        Principal("ci", SUBMITTER, ("ops",), ("shell:ops",)),
        Principal("grafana", READER, ("*",)),
    ]
    with pytest.raises(PrincipalsError, match="targets to submitters and workers"):
        parse_principals({"principals": [{"name": "r", "role": "reader", "targets": ["x"], "token_sha256": "ab" * 32}]})


def test_a_principal_name_cannot_contain_the_holder_separator():
    with pytest.raises(PrincipalsError, match="may not contain '/'"):
        parse_principals({"principals": [{"name": "team/a", "role": "admin", "token_sha256": "ab" * 32}]})


# -- the shell targets workers lease -------------------------------------------------------------


def shell_job(owner: str) -> JobSpec:
    return JobSpec(id="j", schedule="* * * * *", target_kind="shell", target="echo hi", owner=owner)


def test_a_shell_job_is_leased_under_its_owner():
    assert target_key(shell_job("ops")) == "shell:ops"
    assert (
        target_key(JobSpec(id="j", schedule="* * * * *", target_kind="handler", target="reports.build"))
        == "reports.build"
    )


def test_shell_leases_every_owners_shell_queue_and_an_owner_only_its_own():
    queued = ["reports.build", "shell:ops", "shell:finance"]
    assert leased_queues(["shell"], queued) == ["shell:ops", "shell:finance"]
    assert leased_queues(["shell:ops", "reports.build"], queued) == ["shell:ops", "reports.build"]
    assert leased_queues([], queued) == queued


def test_a_worker_token_scoped_to_an_owner_serves_only_its_shell_jobs():
    ops_worker = Principal("ops-w", WORKER, targets=("shell:ops",))
    old_worker = Principal("old-w", WORKER, targets=("shell",))  # before per-owner names: every owner's
    assert lease_denial(ops_worker, ["shell:ops"]) is None
    assert lease_denial(ops_worker, ["shell"]) is not None  # every owner's: not for it
    assert lease_denial(ops_worker, ["shell:finance"]) is not None
    assert run_denial(ops_worker, "j@t", "shell:finance") is not None
    assert lease_denial(old_worker, ["shell"]) is None and lease_denial(old_worker, ["shell:finance"]) is None
    assert run_denial(old_worker, "j@t", "shell:finance") is None


# -- owner-scoped details --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "principal, owner, sees",
    [
        (None, "finance", True),  # a node without tokens
        (admin, "finance", True),
        (Principal("fin", SUBMITTER, owners=("finance",)), "finance", True),
        (Principal("fin", SUBMITTER, owners=("finance",)), "ops", False),
        (Principal("grafana", READER), "finance", False),  # a reader without owners sees none
        (Principal("grafana", READER, owners=("*",)), "finance", True),
        (Principal("w", WORKER, targets=("*",)), "finance", False),
    ],
)
def test_payloads_and_output_tails_are_the_owners(principal, owner, sees):
    assert sees_details(principal, owner) == sees


# -- leases belong to the principal they were granted to ------------------------------------------


def leased_run(*holders_and_tokens: tuple[str, int]) -> Run:
    attempts = tuple(Attempt(number=i + 1, worker_id=w, fencing_token=t) for i, (w, t) in enumerate(holders_and_tokens))
    return Run(job_id="j", scheduled_us=1, status="leased", attempts=attempts, fencing_token=attempts[-1].fencing_token)


def test_a_lease_is_recorded_under_its_principal():
    a = Principal("worker-a", WORKER, targets=("x",))
    assert lease_holder(a, "host-1") == "worker-a/host-1"
    assert lease_holder(None, "host-1") == "host-1"  # no tokens: the worker's own id


def test_only_the_principal_granted_a_lease_may_report_it():
    a, b = Principal("worker-a", WORKER, targets=("x",)), Principal("worker-b", WORKER, targets=("x",))
    prefixed = Principal("worker", WORKER, targets=("x",))  # a name that is a prefix of another's
    run = leased_run(("worker-b/h", 7), ("worker-a/h", 12))
    assert holder_of_token(run, 12) == "worker-a/h" and holder_of_token(run, 7) == "worker-b/h"
    assert holder_of_token(run, 13) is None
    assert holder_denial(a, "j@1", 12, "worker-a/h") is None
    assert holder_denial(a, "j@1", 12, "worker-a/another-host") is None  # the principal, not the process
    assert "worker-b does not hold lease 12" in holder_denial(b, "j@1", 12, "worker-a/h")
    assert holder_denial(prefixed, "j@1", 12, "worker-a/h") is not None
    # Granted by a node of an earlier version (no principal recorded): bound to no one, as before.
    assert held_by(b, "host-1")


def test_a_worker_asking_for_one_owners_shell_jobs_gets_no_other_owners_even_after_a_move():
    import threading
    from types import SimpleNamespace

    from scheduler.leader.dispatch import Dispatcher
    from tests.unit.leader.test_budget import LeaderLog
    from tests.unit.observability.test_observability import T0, Cluster, S

    log = LeaderLog()
    cluster = Cluster(log)
    ops, fin = (
        JobSpec(
            id=f"{o}-job", schedule="* * * * * *", target_kind="shell", target=f"echo {o}", owner=o, jitter="pinned"
        )
        for o in ("ops", "finance")
    )
    cluster.jobs(ops, fin)
    slot = T0 + 10 * S
    cluster.at(slot + S)
    cluster.claim((ops.id, slot, slot + S), (fin.id, slot, slot + S))
    clock = SimpleNamespace(read=lambda: (cluster.now_us, cluster.now_us - T0), now_us=lambda: cluster.now_us)
    dispatcher = Dispatcher(
        SimpleNamespace(clock=clock, stopping=threading.Event(), epoch=cluster.epoch), log, 10 * S, 1.0
    )
    dispatcher._queue_live_runs()
    dispatcher.ready.set()
    # The ops job moves to finance while its run is queued under shell:ops.
    cluster.jobs(
        JobSpec(
            id=ops.id, schedule=ops.schedule, target_kind="shell", target="echo moved", owner="finance", jitter="pinned"
        ),
        request_id="r2",
    )
    assert dispatcher.lease("ops-w", ["shell:ops"], max_runs=5, wait_s=0) == []
    granted = dispatcher.lease("fin-w", ["shell:finance"], max_runs=5, wait_s=0)
    assert sorted(g.run.job_id for g in granted) == ["finance-job", "ops-job"]


def test_the_example_principals_file_parses_and_means_what_it_says():
    from pathlib import Path

    from scheduler.security.principals import Authenticator

    path = Path(__file__).resolve().parents[3] / "examples" / "principals.yaml"
    found = {p.name: p for p in Authenticator.from_file(path).principals}
    assert target_denial(found["finance-ci"], "j", "finance", "handler", "reports.daily") is None
    assert target_denial(found["finance-ci"], "j", "finance", "shell", "echo") is not None
    assert target_denial(found["ops-ci"], "j", "ops", "shell", "echo") is None
    assert lease_denial(found["ops-shell-workers"], ["shell:ops"]) is None
    assert lease_denial(found["ops-shell-workers"], ["shell"]) is not None
    assert not sees_details(found["grafana"], "finance") and sees_details(found["finance-analyst"], "finance")


@pytest.mark.parametrize("leading", [False, True], ids=["follower-barrier", "leader-read-index"])
def test_a_lease_a_lagging_replica_does_not_know_is_checked_after_a_read_barrier(leading):
    import contextlib
    from types import SimpleNamespace

    from scheduler.core.commands import ReadBarrier
    from scheduler.core.state import State
    from scheduler.rpc.convert import timestamp
    from scheduler.rpc.workers import WorkerServicer
    from scheduler.security.interceptor import _CALLER
    from worker.api.v1 import worker_pb2 as wpb

    lagging, caught_up = State(), State()
    caught_up.add_run(leased_run(("worker-a/h", 12)))
    log = SimpleNamespace(state=lagging, barriers=0)

    def submit(command, timeout_s):
        assert isinstance(command, ReadBarrier)
        log.barriers += 1
        log.state = caught_up  # once the barrier is applied here, so is every earlier grant

    def read_index(timeout_s):  # the leader catches up without a log entry
        log.barriers += 1
        log.state = caught_up
        return 1

    def no_barrier(command, timeout_s):
        raise AssertionError("the leader must not append a barrier")

    log.read, log.is_leader = (lambda: contextlib.nullcontext(log.state)), (lambda: leading)
    log.submit, log.read_index = (no_barrier, read_index) if leading else (submit, None)
    servicer = WorkerServicer.__new__(WorkerServicer)
    servicer._raftlog, servicer._clock_us, servicer._timeout_s = log, lambda: 0, 1.0
    ref = wpb.LeaseRef(job_id="j", scheduled_at=timestamp(1), fencing_token=12)
    guessed = wpb.LeaseRef(job_id="j", scheduled_at=timestamp(1), fencing_token=13)
    for principal, expected in (("worker-a", {}), ("worker-b", {0: wpb.FENCED})):
        log.state, log.barriers = lagging, 0
        token = _CALLER.set(Principal(principal, WORKER, targets=("*",)))
        try:
            assert {k: v[0] for k, v in servicer._refused([ref], None).items()} == expected
            assert log.barriers == 1
            assert servicer._refused([ref], None).keys() == expected.keys() and log.barriers == 1  # known now
            assert servicer._refused([guessed], None)[0][0] == wpb.NOT_FOUND  # never proposed unchecked
        finally:
            _CALLER.reset(token)
