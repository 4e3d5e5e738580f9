"""The core's part in several schedules and run limits: a claim records which schedule produced
its slot, `max_runs` is counted in apply (queued scheduled slots only) and ends the job's slots,
and every new field needs log format 3."""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core.commands import ApplyJobs, ClaimRuns, SlotClaim, TriggerRun
from scheduler.core.log_format import LOG_FORMAT, required_log_format
from scheduler.core.model import SECOND_US, ActiveWindow
from scheduler.replication.upgrades import proposal_refusal
from tests.fakes import T0_US, Core, spec, upsert

MINUTE_US = 60 * SECOND_US


def _core_with(job_spec, next_due_us: int) -> Core:
    core = Core()
    core.lead()
    core.advance(T0_US)
    assert core.apply_jobs((upsert(job_spec, next_due_us=next_due_us),)).accepted
    return core


def _claim(core: Core, scheduled_us: int, next_due_us: int, sources=UNSET):
    job = core.state.jobs["a"]
    core.advance(scheduled_us)
    claim = SlotClaim("a", scheduled_us, next_due_us, job.version)
    return core.apply(ClaimRuns(core.state.now_us, core.state.epoch, (claim,), schedule_indexes=sources))


def test_a_claim_records_the_schedule_that_produced_its_slot() -> None:
    core = _core_with(spec("a", "", schedules=("0 * * * *", "30 * * * *")), T0_US + MINUTE_US)
    assert _claim(core, T0_US + MINUTE_US, T0_US + 2 * MINUTE_US, sources=(1,)).accepted
    run = core.state.get_run("a", T0_US + MINUTE_US)
    assert run is not None and run.schedule_index == 1
    assert _claim(core, T0_US + 2 * MINUTE_US, 0).accepted
    assert core.state.get_run("a", T0_US + 2 * MINUTE_US).schedule_index is UNSET


def test_schedule_indexes_must_match_the_claims_one_for_one() -> None:
    core = _core_with(spec("a", "", schedules=("0 * * * *",)), T0_US + MINUTE_US)
    result = _claim(core, T0_US + MINUTE_US, 0, sources=(0, 0))
    assert result.rejection.code == "invalid"


def test_max_runs_counts_queued_scheduled_slots_and_then_ends_the_slots() -> None:
    core = _core_with(spec("a", "", every_us=MINUTE_US, max_runs=2), T0_US + MINUTE_US)
    assert core.state.jobs["a"].counted_runs == 0
    _claim(core, T0_US + MINUTE_US, T0_US + 2 * MINUTE_US)
    assert core.state.jobs["a"].counted_runs == 1
    assert core.state.jobs["a"].next_due_us == T0_US + 2 * MINUTE_US
    _claim(core, T0_US + 2 * MINUTE_US, T0_US + 3 * MINUTE_US)
    job = core.state.jobs["a"]
    assert job.counted_runs == 2 and job.next_due_us == 0  # the proposer's next slot is not owed


def test_a_skipped_slot_and_a_manual_run_do_not_count() -> None:
    core = _core_with(spec("a", "", every_us=MINUTE_US, max_runs=1), T0_US + MINUTE_US)
    core.pause("a")
    _claim(core, T0_US + MINUTE_US, T0_US + 2 * MINUTE_US)
    assert core.state.get_run("a", T0_US + MINUTE_US).status == "skipped"
    assert core.state.jobs["a"].counted_runs == 0
    core.pause("a", paused=False)
    assert core.apply(TriggerRun(core.state.now_us, "a", "alice", "")).accepted
    assert core.state.jobs["a"].counted_runs == 0 and core.state.jobs["a"].next_due_us == T0_US + 2 * MINUTE_US


def test_the_count_survives_spec_changes_and_a_reached_limit_owes_nothing_on_reapply() -> None:
    job_spec = spec("a", "", every_us=MINUTE_US, max_runs=1)
    core = _core_with(job_spec, T0_US + MINUTE_US)
    _claim(core, T0_US + MINUTE_US, T0_US + 2 * MINUTE_US)
    changed = spec("a", "", every_us=MINUTE_US, max_runs=1, owner="ops")
    # Whatever the proposer planned, a reached limit owes no slot.
    assert core.apply_jobs((upsert(changed, 1, next_due_us=core.state.now_us + MINUTE_US),)).accepted
    assert core.state.jobs["a"].counted_runs == 1 and core.state.jobs["a"].next_due_us == 0
    raised = spec("a", "", every_us=MINUTE_US, max_runs=3, owner="ops")
    assert core.apply_jobs((upsert(raised, 2, next_due_us=core.state.now_us + MINUTE_US),)).accepted
    assert core.state.jobs["a"].counted_runs == 1 and core.state.jobs["a"].next_due_us > 0
    unlimited = spec("a", "", every_us=MINUTE_US, owner="ops")
    assert core.apply_jobs((upsert(unlimited, 3, next_due_us=core.state.now_us + MINUTE_US),)).accepted
    assert core.state.jobs["a"].counted_runs is UNSET


def test_every_new_field_and_a_manual_only_job_need_log_format_3() -> None:
    assert LOG_FORMAT == 3
    plain = ApplyJobs(T0_US, "alice", "", (upsert(spec("a")),))
    assert required_log_format(plain) == 1
    for fields in (
        {"schedule": "", "schedules": ("* * * * *",)},
        {"schedule": "", "every_us": MINUTE_US},
        {"schedule": "", "every_us": MINUTE_US, "anchor_us": T0_US},
        {"schedule": "", "at_us": T0_US},
        {"active": ActiveWindow(T0_US, 0)},
        {"max_runs": 5},
        {"schedule": ""},  # manual-only
    ):
        command = ApplyJobs(T0_US, "alice", "", (upsert(spec("a")), upsert(spec("b", **fields))))
        assert required_log_format(command) == 3, fields
    claims = (SlotClaim("a", T0_US, 0, 1),)
    assert required_log_format(ClaimRuns(T0_US, 1, claims)) == 1
    assert required_log_format(ClaimRuns(T0_US, 1, claims, schedule_indexes=(0,))) == 3


def test_a_format_3_apply_on_a_format_2_cluster_is_refused_naming_the_node_to_upgrade() -> None:
    command = ApplyJobs(T0_US, "alice", "", (upsert(spec("a", "", every_us=MINUTE_US)),))
    message = proposal_refusal(
        command, required_log_format(command), 2, ["n1", "n2", "n3"], {"n1": 3, "n2": 3, "n3": 2}
    )
    assert message == "the cluster runs log format 2; upgrade n3 (advertises 2) before using ApplyJobs (log format 3)"
