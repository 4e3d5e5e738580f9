"""The oracle's reading of this release's operator rules, from its own bookkeeping, not from
scheduler/core/execution.py or alerts.py (docs/design/simulated-operations.md).

As read here:
- cancel: a cancelled run stays cancelled; no heartbeat, completion or expiry of its lease is
  accepted again, and one with its current token is fenced `cancelled`. CancelRun is accepted
  exactly when the run was queued or leased.
- final failures: an accepted failure completion marked `final`, or whose exit code is one of
  the job's `retry.final_exit_codes`, ends the run `failed`; it is never granted again.
- pause_after_failures N (cluster version 3 on): runs ending `failed` or `timed_out` count, in
  entry and event order; a success and an operator's resume reset the count. The run that brings
  the count to N or more while the job is not paused pauses it (by "raftcron"), with one `paused`
  alert for that run; nothing else pauses a job outside SetJobPaused.
- overlap at grant (cluster version 3 on): a run whose overlap (its own, else its job's) is
  `forbid` or `queue` is never granted while another run of its job is leased.
"""

from __future__ import annotations

from collections import Counter

from msgspec import UNSET

from scheduler.core import commands as cmds
from scheduler.core import results as ev
from scheduler.core.log_format import OVERLAP_AT_GRANT_FORMAT, STREAK_ALERTS_FORMAT
from scheduler.core.state import State

AUTO_PAUSER = "raftcron"
PAUSED_ALERT = "paused"
COUNTED = ("failed", "timed_out")
EXCLUSIVE = ("forbid", "queue")
ACCEPTED_LEASE_EVENTS = (ev.LeaseExtended, ev.RunSucceeded, ev.RunRetryScheduled, ev.RunEnded)


class OperationsViolation(AssertionError):
    """An operator rule broke; the oracle reports it as its own Violation."""


def _lease_items(command) -> list[cmds.LeaseRef]:
    if isinstance(command, cmds.ExtendLeases):
        return list(command.leases)
    if isinstance(command, cmds.CompleteRuns):
        return [c.lease for c in command.completions]
    if isinstance(command, cmds.ExpireLeases):
        return [e.lease for e in command.expiries]
    return []


def _named_keys(command) -> set[tuple[str, int]]:
    """The runs an entry names: the only ones whose status it may change once they have ended."""
    keys = {(lease.job_id, lease.scheduled_us) for lease in _lease_items(command)}
    if isinstance(command, cmds.GrantLeases):
        keys |= {(ref.job_id, ref.scheduled_us) for ref in command.grants}
    elif isinstance(command, cmds.BackfillRuns):
        keys |= {(command.job_id, slot) for slot in command.slots}
    elif isinstance(command, cmds.CancelRun):
        keys.add((command.job_id, command.scheduled_us))
    return keys


def _is_final(item: cmds.Completion, state: State) -> bool:
    if item.outcome != "failure":
        return False
    if item.final is True:
        return True
    job = state.jobs.get(item.lease.job_id)
    codes = job.body.retry.final_exit_codes if job is not None else UNSET
    return codes is not UNSET and item.exit_code in codes


class OperationsWatch:
    def __init__(self, seen: Counter) -> None:
        self.cancelled: set[tuple[str, int]] = set()
        self.ended_final: set[tuple[str, int]] = set()
        self.streaks: dict[str, int] = {}
        self.alerts_read = 0
        self.seen = seen

    def before(self, state: State, command) -> dict:
        """What the checks need from the state before the entry."""
        paused = {job_id: job.pause is not None for job_id, job in state.jobs.items()}
        leased: dict[str, set[int]] = {}
        if isinstance(command, cmds.GrantLeases) and state.cluster_version >= OVERLAP_AT_GRANT_FORMAT:
            for ref in command.grants:
                leased[ref.job_id] = {r.scheduled_us for r in state.live(ref.job_id) if r.status == "leased"}
        cancel_status = None
        if isinstance(command, cmds.CancelRun):
            run = state.get_run(command.job_id, command.scheduled_us)
            cancel_status = None if run is None else run.status
        return {"paused": paused, "leased": leased, "cancel_status": cancel_status}

    def check(self, where: str, state: State, command, result, before: dict) -> None:
        """After an applied entry (not a remembered answer, not a stale epoch's)."""
        self._cancels(where, state, command, result, before)
        self._finals(where, state, command, result)
        self._grants(where, state, command, result, before["leased"])
        self._pauses(where, state, command, result, before["paused"])

    def _cancels(self, where: str, state: State, command, result, before: dict) -> None:
        if isinstance(command, cmds.CancelRun):
            live = before["cancel_status"] in ("queued", "leased")
            if result.accepted != live:
                raise OperationsViolation(
                    f"{where}: cancel of {command.job_id}@{command.scheduled_us} "
                    f"{'accepted' if result.accepted else 'refused'} while the run was {before['cancel_status']}"
                )
            if not result.accepted:
                self.seen[f"cancel_refused:{result.rejection.code}"] += 1
        for lease, event in zip(_lease_items(command), result.events):
            key = (lease.job_id, lease.scheduled_us)
            if key not in self.cancelled:
                continue
            run = state.get_run(*key)
            if isinstance(event, ACCEPTED_LEASE_EVENTS):
                raise OperationsViolation(
                    f"{where}: {type(event).__name__} for token {lease.fencing_token} of cancelled run {key}"
                )
            if run is not None and run.fencing_token == lease.fencing_token:
                if getattr(event, "reason", "") != "cancelled":
                    raise OperationsViolation(f"{where}: the current lease of cancelled run {key} answered {event}")
                self.seen["cancelled_lease_fenced"] += 1
        self.check_cancelled(where, state, _named_keys(command))
        for event in result.events:
            if isinstance(event, ev.RunEnded) and event.status == "cancelled":
                self.cancelled.add((event.job_id, event.scheduled_us))
                if isinstance(command, cmds.CancelRun):
                    self.seen["cancel:accepted"] += 1

    def check_cancelled(self, where: str, state: State, keys=None) -> None:
        """The cancelled runs among `keys` (all of them by default) are still cancelled; a pruned
        one is forgotten."""
        for key in sorted(self.cancelled if keys is None else self.cancelled.intersection(keys)):
            run = state.get_run(*key)
            if run is None:
                self.cancelled.discard(key)
            elif run.status != "cancelled":
                raise OperationsViolation(f"{where}: cancelled run {key} became {run.status}")

    def _finals(self, where: str, state: State, command, result) -> None:
        if not isinstance(command, cmds.CompleteRuns):
            return
        for item, event in zip(command.completions, result.events):
            if not isinstance(event, (ev.RunSucceeded, ev.RunRetryScheduled, ev.RunEnded)) or not _is_final(
                item, state
            ):
                continue
            key = (item.lease.job_id, item.lease.scheduled_us)
            if not (isinstance(event, ev.RunEnded) and event.status == "failed"):
                raise OperationsViolation(f"{where}: final failure of {key} answered {event}, not the run ended failed")
            self.ended_final.add(key)
            self.seen["final_failure:ended"] += 1

    def _grants(self, where: str, state: State, command, result, leased_before: dict[str, set[int]]) -> None:
        if not isinstance(command, cmds.GrantLeases):
            return
        leased = {job_id: set(slots) for job_id, slots in leased_before.items()}
        for event in result.events:
            if not isinstance(event, ev.LeaseGranted):
                continue
            key = (event.job_id, event.scheduled_us)
            if key in self.ended_final:
                raise OperationsViolation(f"{where}: {key} ended by a final failure, granted another attempt")
            run, job = state.get_run(*key), state.jobs.get(event.job_id)
            own = run.overlap if run is not None else UNSET
            overlap = own if own is not UNSET else (job.body.overlap if job is not None else "")
            others = leased.setdefault(event.job_id, set()) - {event.scheduled_us}
            if state.cluster_version >= OVERLAP_AT_GRANT_FORMAT and overlap in EXCLUSIVE:
                if others:
                    raise OperationsViolation(
                        f"{where}: {key} (overlap {overlap}{'' if own is UNSET else ', its own'}) granted "
                        f"while {event.job_id}@{sorted(others)} is leased"
                    )
                self.seen[f"exclusive_grant:{'own' if own is not UNSET else 'job'}"] += 1
            leased[event.job_id].add(event.scheduled_us)

    def _pauses(self, where: str, state: State, command, result, paused_before: dict[str, bool]) -> None:
        paused = dict(paused_before)
        owed: set[tuple[str, int]] = set()
        counting = state.cluster_version >= STREAK_ALERTS_FORMAT
        for event in result.events:
            if isinstance(event, ev.RunSucceeded):
                self.streaks.pop(event.job_id, None)
            elif isinstance(event, ev.RunEnded) and event.status in COUNTED and counting:
                streak = self.streaks[event.job_id] = self.streaks.get(event.job_id, 0) + 1
                job = state.jobs.get(event.job_id)
                limit = job.body.pause_after_failures if job is not None else UNSET
                if limit is not UNSET and streak >= limit and not paused.get(event.job_id, False):
                    paused[event.job_id] = True
                    owed.add((event.job_id, event.scheduled_us))
        if isinstance(command, cmds.SetJobPaused) and result.accepted:
            paused[command.job_id] = command.paused
            if not command.paused:
                self.streaks.pop(command.job_id, None)
        raised = set()
        for alert_id in state.alert_order[self.alerts_read :]:
            alert = state.alerts[alert_id]
            if alert.kind == PAUSED_ALERT:
                raised.add((alert.job_id, alert.scheduled_us))
        self.alerts_read = len(state.alert_order)
        if raised != owed:
            raise OperationsViolation(
                f"{where}: paused alerts raised for {sorted(raised - owed)} not owed, owed for "
                f"{sorted(owed - raised)} not raised (failing streaks {self.streaks})"
            )
        if isinstance(command, cmds.ApplyJobs):
            return  # a new or changed job: its pause is the spec's business, not a streak's
        for job_id, job in state.jobs.items():
            if (job.pause is not None) != paused.get(job_id, False):
                raise OperationsViolation(
                    f"{where}: {job_id} is {'paused' if job.pause else 'not paused'} with a failing streak of "
                    f"{self.streaks.get(job_id, 0)} (pause_after_failures {job.body.pause_after_failures})"
                )
        for job_id, scheduled_us in owed:
            pause = state.jobs[job_id].pause
            if pause is None or pause.by != AUTO_PAUSER:
                raise OperationsViolation(f"{where}: {job_id} paused by {pause} at {scheduled_us}, not by raftcron")
        if owed:
            self.seen["paused_after_failures"] += len(owed)
