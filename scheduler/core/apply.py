"""apply(state, command, index) -> Result: the only way replicated state changes.

Pure and deterministic. Bad input yields a rejection, never an exception: an
exception inside a replicated method would wedge every replica that applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scheduler.core import results as ev
from scheduler.core.claims import claim_runs
from scheduler.core.clock import advance_epoch_clock, clock_reading, open_epoch_clock, restore_clock
from scheduler.core.commands import (
    EPOCH_COMMANDS,
    AddMember,
    AdvanceTime,
    ApplyJobs,
    BackfillRuns,
    CancelRun,
    ClaimLeadership,
    ClaimRuns,
    Command,
    CompleteRuns,
    ExpireLeases,
    ExtendLeases,
    GrantLeases,
    KillClass,
    MarkAlertsDelivered,
    ReadBarrier,
    RemoveMember,
    ReviveClass,
    SetClusterVersion,
    SetJobPaused,
    TriggerRun,
)
from scheduler.core.deadlines import check_deadlines
from scheduler.core.dependencies import settle_dependents
from scheduler.core.execution import (
    cancel_run,
    complete_runs,
    expire_leases,
    extend_all_live_leases,
    extend_leases,
    grant_leases,
)
from scheduler.core.jobs import apply_jobs, set_job_paused
from scheduler.core.log_format import LOG_FORMAT
from scheduler.core.manual import backfill_runs, trigger_run
from scheduler.core.membership import add_member, remove_member
from scheduler.core.ops import kill_class, mark_alerts_delivered, revive_class
from scheduler.core.results import Result, rejected
from scheduler.core.retention import sweep_histories
from scheduler.core.state import State
from scheduler.core.vocabulary import RejectionCode

# Each handler takes the command type HANDLERS keys it by: no Callable type can say that, hence Any.
Handler = Callable[[State, Any, int], Result]


def _claim_leadership(state: State, cmd: ClaimLeadership, index: int) -> Result:
    if cmd.term < state.leader_term:
        return rejected(index, RejectionCode.STALE_TERM, f"term {cmd.term} is older than {state.leader_term}")
    state.epoch += 1
    state.leader_id = cmd.node_id
    state.leader_term = cmd.term
    open_epoch_clock(state, cmd.issued_at_us, cmd.monotonic_us)
    extend_all_live_leases(state)
    return Result(index=index, events=(ev.LeadershipClaimed(cmd.node_id, state.epoch, cmd.term),))


def _no_change(state: State, cmd: ReadBarrier, index: int) -> Result:
    return Result(index=index)


def _advance_time(state: State, cmd: AdvanceTime, index: int) -> Result:
    """Time moved (in apply, before this handler): histories age out with it."""
    sweep_histories(state)
    return Result(index=index)


def _set_cluster_version(state: State, cmd: SetClusterVersion, index: int) -> Result:
    """The cluster version only rises. A node that does not read `cmd.version` never gets here:
    its decoder refuses the entry and the node halts (log_format.required_log_format)."""
    if cmd.version < state.cluster_version:
        return rejected(
            index,
            RejectionCode.STALE_CLUSTER_VERSION,
            f"cluster version {cmd.version} is below the current {state.cluster_version}",
        )
    if cmd.version > LOG_FORMAT:
        return rejected(
            index, RejectionCode.UNSUPPORTED_CLUSTER_VERSION, f"cluster version {cmd.version} is above {LOG_FORMAT}"
        )
    if cmd.version == state.cluster_version:
        return Result(index=index)
    previous, state.cluster_version = state.cluster_version, cmd.version
    return Result(index=index, events=(ev.ClusterVersionRaised(cmd.version, previous),))


def _with_request_memory(handler: Handler) -> Handler:
    """A retried client write (same request id) returns the first result and changes nothing."""

    def wrapped(state: State, cmd, index: int) -> Result:
        first = state.request_results.get(cmd.request_id) if cmd.request_id else None
        if first is not None:
            return first
        result = handler(state, cmd, index)
        if result.rejection is None or not result.rejection.retryable:
            # A retryable rejection is not remembered: the retry must get a fresh chance.
            state.remember_request(cmd.request_id, result)
        return result

    return wrapped


HANDLERS: dict[type, Handler] = {
    ClaimLeadership: _claim_leadership,
    ApplyJobs: _with_request_memory(apply_jobs),
    SetJobPaused: _with_request_memory(set_job_paused),
    ClaimRuns: claim_runs,
    ReadBarrier: _no_change,
    AdvanceTime: _advance_time,
    KillClass: _with_request_memory(kill_class),
    ReviveClass: _with_request_memory(revive_class),
    MarkAlertsDelivered: mark_alerts_delivered,
    GrantLeases: grant_leases,
    ExtendLeases: extend_leases,
    CompleteRuns: complete_runs,
    ExpireLeases: expire_leases,
    TriggerRun: _with_request_memory(trigger_run),
    BackfillRuns: _with_request_memory(backfill_runs),
    AddMember: _with_request_memory(add_member),
    RemoveMember: _with_request_memory(remove_member),
    SetClusterVersion: _set_cluster_version,
    CancelRun: _with_request_memory(cancel_run),
}


def apply(state: State, command: Command, index: int) -> Result:
    """Apply one committed command at Raft log `index` (the fencing token source)."""
    if index <= state.applied_index:
        return rejected(index, RejectionCode.INDEX_NOT_INCREASING, f"index {index} <= applied {state.applied_index}")
    handler = HANDLERS.get(type(command))
    if handler is None:
        return rejected(index, RejectionCode.UNKNOWN_COMMAND, f"no handler for {type(command).__name__}")
    state.applied_index = index
    if isinstance(command, EPOCH_COMMANDS):
        if command.epoch != state.epoch or command.epoch < 1:
            return rejected(index, RejectionCode.STALE_EPOCH, f"epoch {command.epoch} is not the current {state.epoch}")
        before = clock_reading(state)
        advance_epoch_clock(state, command.issued_at_us, command.monotonic_us)
        result = handler(state, command, index)
        if not result.accepted:
            restore_clock(state, before)
        else:
            check_deadlines(state)  # time moved: runs past their `deadline:` raise their alert
    else:
        result = handler(state, command, index)
    if state.settling:
        # Parent runs ended in this entry: their children's slots are decided in it too.
        result = settle_dependents(state, result, index) if result.accepted else result
        state.settling.clear()
    return result
