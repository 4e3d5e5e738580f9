"""ClaimLeadership: epochs only grow, stale Raft terms are refused, stale epochs fence commands."""

from __future__ import annotations

from scheduler.core.commands import ClaimLeadership
from scheduler.core.results import LeadershipClaimed
from tests.fakes import Core, claim, spec, upsert


def test_first_claim_opens_epoch_one() -> None:
    core = Core()
    result = core.lead("n1", term=1)
    assert result.accepted
    assert result.events == (LeadershipClaimed(node_id="n1", epoch=1, term=1),)
    assert result.index == core.index
    assert (core.state.epoch, core.state.leader_id, core.state.leader_term) == (1, "n1", 1)


def test_each_accepted_claim_bumps_the_epoch() -> None:
    core = Core()
    core.lead("n1", term=1)
    assert core.lead("n2", term=4).events == (LeadershipClaimed(node_id="n2", epoch=2, term=4),)
    # The same term again (a retried proposal) still opens a new epoch: it only fences more.
    assert core.lead("n2", term=4).events == (LeadershipClaimed(node_id="n2", epoch=3, term=4),)
    assert (core.state.epoch, core.state.leader_id, core.state.leader_term) == (3, "n2", 4)


def test_stale_term_is_rejected_and_changes_nothing_but_the_log_position() -> None:
    core = Core()
    core.lead("n2", term=5)
    result = core.lead("n1", term=4)
    assert not result.accepted
    assert result.rejection.code == "stale_term"
    assert not result.rejection.retryable
    assert result.index == core.index
    assert (core.state.epoch, core.state.leader_id, core.state.leader_term) == (1, "n2", 5)
    # The entry was consumed: the log position moved on.
    assert core.state.applied_index == core.index


def test_claim_at_term_zero_on_fresh_state_is_accepted() -> None:
    core = Core()
    result = core.apply(ClaimLeadership(issued_at_us=core.clock.tick(), node_id="n1", term=0))
    assert result.accepted and core.state.epoch == 1


def test_claims_under_an_old_epoch_are_fenced_after_a_new_leader() -> None:
    core = Core()
    core.lead("n1", term=1)
    first_due = core.clock.now_us + 10_000_000
    core.apply_jobs((upsert(spec("a"), next_due_us=first_due),))
    old_epoch = core.state.epoch
    core.lead("n2", term=2)
    result = core.claim_runs(claim("a", first_due, first_due + 10_000_000), epoch=old_epoch)
    assert result.rejection is not None and result.rejection.code == "stale_epoch"
    assert result.events == ()
    assert core.state.runs == {}
    assert core.state.jobs["a"].next_due_us == first_due
    # The new leader's epoch goes through.
    assert core.claim_runs(claim("a", first_due, first_due + 10_000_000)).accepted
