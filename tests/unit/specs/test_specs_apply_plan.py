"""Planning an apply without a server: what a prune removes, what the caller may touch, what a dry
run reports. Each plan is then applied to the replica it was made from, as a node would."""

from __future__ import annotations

import itertools

from scheduler.core import results as ev
from scheduler.core.model import Resource
from scheduler.planning.jobs import first_due_after
from scheduler.security.principals import ADMIN, SUBMITTER, Principal
from scheduler.specs import validate_resource, validate_spec
from scheduler.specs.apply_plan import PlannedChange, apply_problems, apply_refusal, plan_apply, preview_changes
from tests.fakes import Core, spec

FINANCE_CI = Principal("fin-ci", SUBMITTER, owners=("finance",), targets=("handler:jobs.*",))
NO_OWNERS = Principal("empty-ci", SUBMITTER)
ROOT = Principal("root", ADMIN)
DB = Resource("db", 4, 0)
CHANGE_NAMES = {ev.JobAdded: "added", ev.JobChanged: "changed", ev.JobUnchanged: "unchanged", ev.JobRemoved: "removed"}
_REQUEST_IDS = (f"r{n}" for n in itertools.count(1))  # a replica answers a repeated id with its first result


def plan(core: Core, specs=(), resources=(), prune: bool = False, caller: Principal | None = None):
    return plan_apply(
        core.state,
        list(specs),
        list(resources),
        prune=prune,
        caller=caller,
        author="alice",
        request_id=next(_REQUEST_IDS),
    )


def replica(*specs, resources=()) -> Core:
    """A led replica holding `specs` and `resources`, applied without authentication."""
    core = Core()
    core.lead()
    result = core.apply(plan(core, specs, resources))
    assert result.accepted, result.rejection
    return core


def three_owners() -> Core:
    return replica(spec("mine", owner="finance"), spec("theirs", owner="analytics"), spec("nobodys"), resources=[DB])


# -- the command ---------------------------------------------------------------------------------


def test_a_new_job_is_planned_at_version_0_due_at_its_first_slot_in_replicated_time():
    core = replica()
    command = plan(core, [spec("a")])
    (upsert,) = command.upserts
    assert (command.issued_at_us, command.author) == (core.state.now_us, "alice")
    assert upsert.expected_version == 0
    assert upsert.next_due_us == first_due_after(upsert.spec, core.state.now_us) > core.state.now_us
    assert core.apply(command).accepted


def test_a_job_applied_again_keeps_its_version_and_next_due():
    core = replica(spec("a"))
    job = core.state.jobs["a"]
    (upsert,) = plan(core, [spec("a")]).upserts
    assert (upsert.expected_version, upsert.next_due_us) == (job.version, job.next_due_us)


def test_only_changed_resources_are_declared_again():
    core = replica(resources=[DB])
    assert plan(core, resources=[DB]).resources == ()
    assert plan(core, resources=[Resource("db", 8, 0)]).resources == (Resource("db", 8, 0),)


# -- prune ---------------------------------------------------------------------------------------


def test_without_prune_nothing_is_removed_or_dropped():
    command = plan(three_owners(), [spec("mine", owner="finance")], caller=ROOT)
    assert (command.removals, command.resource_removals) == ((), ())


def test_prune_without_authentication_removes_every_job_left_out_and_drops_undeclared_resources():
    core = three_owners()
    command = plan(core, [spec("mine", owner="finance")], prune=True)
    assert (command.removals, command.resource_removals) == (("nobodys", "theirs"), ("db",))
    assert core.apply(command).accepted
    assert set(core.state.jobs) == {"mine"} and not core.state.resources


def test_prune_by_an_admin_removes_every_job_and_drops_resources():
    command = plan(three_owners(), prune=True, caller=ROOT)
    assert (command.removals, command.resource_removals) == (("mine", "nobodys", "theirs"), ("db",))


def test_prune_by_a_submitter_removes_only_jobs_of_its_owners_and_never_drops_a_budget():
    core = three_owners()
    command = plan(core, prune=True, caller=FINANCE_CI)
    assert (command.removals, command.resource_removals) == (("mine",), ())
    assert apply_refusal(core.state, command, FINANCE_CI) is None
    assert core.apply(command).accepted
    assert set(core.state.jobs) == {"nobodys", "theirs"} and set(core.state.resources) == {"db"}


def test_prune_by_a_caller_with_no_owners_removes_nothing():
    command = plan(three_owners(), prune=True, caller=NO_OWNERS)
    assert command.removals == ()


# -- what the caller may touch -------------------------------------------------------------------


def test_nothing_is_refused_without_authentication():
    core = three_owners()
    command = plan(core, [spec("theirs", owner="finance", target="billing.run")], [Resource("db", 8, 0)], prune=True)
    assert apply_refusal(core.state, command, None) is None


def test_removing_a_job_of_an_owner_the_caller_may_not_touch_is_refused():
    core = three_owners()
    command = plan(core, [spec("mine", owner="finance")], prune=True)  # planned for a caller who may
    assert "theirs" in command.removals
    assert apply_refusal(core.state, command, FINANCE_CI) == (
        "fin-ci may change jobs of owners ['finance'], not job 'nobodys' of owner ''"
    )


def test_taking_over_a_job_of_another_owner_is_refused():
    core = three_owners()
    command = plan(core, [spec("theirs", owner="finance")], caller=FINANCE_CI)
    assert apply_refusal(core.state, command, FINANCE_CI) == (
        "fin-ci may change jobs of owners ['finance'], not job 'theirs' of owner 'analytics'"
    )
    assert apply_refusal(core.state, command, ROOT) is None


def test_changing_a_shared_budget_needs_an_admin():
    core = replica(resources=[DB])
    command = plan(core, [spec("a", owner="finance", uses=("db",))], [Resource("db", 8, 0)], caller=FINANCE_CI)
    assert (
        apply_refusal(core.state, command, FINANCE_CI) == "fin-ci may not change shared resources ['db']: needs admin"
    )
    assert apply_refusal(core.state, command, ROOT) is None
    unchanged = plan(core, [spec("a", owner="finance", uses=("db",))], [DB], caller=FINANCE_CI)
    assert apply_refusal(core.state, unchanged, FINANCE_CI) is None


def test_a_job_added_or_changed_must_run_a_target_the_caller_may_use():
    core = replica()
    command = plan(core, [spec("a", owner="finance", target="billing.run")], caller=FINANCE_CI)
    assert apply_refusal(core.state, command, FINANCE_CI) == (
        "fin-ci may not use target 'handler:billing.run' for job 'a': its targets are ['handler:jobs.*']"
    )


def test_a_job_applied_again_unchanged_grants_nothing_new_so_its_target_is_not_checked():
    core = replica(spec("a", owner="finance", target="billing.run"))
    command = plan(core, [spec("a", owner="finance", target="billing.run")], caller=FINANCE_CI)
    assert apply_refusal(core.state, command, FINANCE_CI) is None


# -- dry run -------------------------------------------------------------------------------------


def test_a_dry_run_reports_what_the_apply_does_without_doing_it():
    core = replica(spec("same", owner="finance"), spec("edit", owner="finance"), spec("gone", owner="finance"))
    wanted = [spec("same", owner="finance"), spec("edit", owner="finance", priority=5), spec("new", owner="finance")]
    command = plan(core, wanted, prune=True, caller=FINANCE_CI)
    changes = preview_changes(core.state, command)
    assert changes == [
        PlannedChange("same", "unchanged", 1),
        PlannedChange("edit", "changed", 2),
        PlannedChange("new", "added", 1),
        PlannedChange("gone", "removed", 1),
    ]
    assert set(core.state.jobs) == {"same", "edit", "gone"}
    result = core.apply(command)
    applied = [
        PlannedChange(e.job_id, CHANGE_NAMES[type(e)], e.version) for e in result.events if type(e) in CHANGE_NAMES
    ]
    assert applied == changes


# -- the set as a whole --------------------------------------------------------------------------


def test_every_problem_of_every_spec_and_resource_is_listed_then_repeated_ids():
    bad_spec, bad_resource = spec("b", priority=5000), Resource("bad name", 1, 0)
    problems = apply_problems([spec("a"), bad_spec, spec("a")], [bad_resource])
    assert problems == [
        *map(str, validate_spec(bad_spec)),
        *map(str, validate_resource(bad_resource)),
        "job 'a': listed twice",
    ]
    assert problems[0] == "job 'b' field 'priority': must be between -1000 and 1000, got 5000"
    assert apply_problems([spec("a"), spec("b")], [DB]) == []
