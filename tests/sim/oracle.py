"""The simulation's reference replica: it applies every committed entry and checks the
invariants of DESIGN.md around each one, from its own arithmetic, not the planner's.

Slots: every simulated job fires every k seconds with k dividing 60, as `*/k * * * * *` in UTC,
as `every: ks` (anchored at the epoch: the same instants), or as `schedules:` whose union is
`*/k`, so its next slot after an instant is plain arithmetic.
"""

from __future__ import annotations

from collections import Counter

from msgspec import UNSET

from scheduler.core import State, apply
from scheduler.core import commands as cmds
from scheduler.core import results as ev
from tests.sim.deadline_oracle import DeadlineViolation, DeadlineWatch
from tests.sim.operations_oracle import OperationsViolation, OperationsWatch

SECOND_US = 1_000_000
ACCEPTING = (ev.RunSucceeded, ev.RunRetryScheduled, ev.RunEnded)


class Violation(AssertionError):
    """An invariant broke; the message names the entry and what happened."""


def period_s(schedule: str) -> int:
    seconds = schedule.split()[0]
    return 1 if seconds == "*" else int(seconds.removeprefix("*/"))


def period_of(spec) -> int:
    """The job's period in seconds, whichever of the three shapes it has (a child's: its parents')."""
    if spec.schedule:
        return period_s(spec.schedule)
    if isinstance(spec.every_us, int):
        return spec.every_us // SECOND_US
    return min(period_s(expr) for expr in spec.schedules)  # the union of */k and */2k is */k


def _parents(spec) -> tuple[str, ...]:
    return () if spec.after is UNSET else spec.after


def next_slot(period: int, after_us: int) -> int:
    step = period * SECOND_US
    return (after_us // step + 1) * step


def _refs(command) -> list[tuple[str, int]]:
    """The run keys a command names, in item order."""
    if isinstance(command, cmds.GrantLeases):
        return [(r.job_id, r.scheduled_us) for r in command.grants]
    if isinstance(command, cmds.ExtendLeases):
        return [(r.job_id, r.scheduled_us) for r in command.leases]
    if isinstance(command, cmds.CompleteRuns):
        return [(c.lease.job_id, c.lease.scheduled_us) for c in command.completions]
    if isinstance(command, cmds.ExpireLeases):
        return [(e.lease.job_id, e.lease.scheduled_us) for e in command.expiries]
    if isinstance(command, cmds.BackfillRuns):
        return [(command.job_id, slot) for slot in command.slots]
    return []


class Oracle:
    def __init__(self) -> None:
        self.state = State()
        self.expected_next: dict[str, int] = {}  # job -> the slot its next claim must be
        self.claimed: set[tuple[str, int]] = set()
        self.manual_requests: dict[str, tuple[str, int]] = {}
        self.highest_token: dict[tuple[str, int], int] = {}
        self.starts: dict[str, list[int]] = {}  # resource -> replicated instants of lease starts
        self.seen: Counter = Counter()  # event and rejection kinds, to show what a run exercised
        self.deadlines = DeadlineWatch(self.seen)
        self.operations = OperationsWatch(self.seen)

    def apply(self, index: int, command) -> object:
        try:
            result = self._apply_checked(index, command)
            time_moved = isinstance(command, cmds.EPOCH_COMMANDS) and result.accepted
            self.deadlines.check(f"entry {index} ({type(command).__name__})", self.state, time_moved)
        except (DeadlineViolation, OperationsViolation) as exc:
            raise Violation(str(exc)) from exc
        return result

    def _apply_checked(self, index: int, command) -> object:
        before = {}
        for key in _refs(command):
            run = self.state.get_run(*key)
            if run is not None:
                before[key] = (run.status, run.fencing_token, run.lease_expires_us, run.deadline_us)
        epoch, now_us = self.state.epoch, self.state.now_us
        parent_live = self._parent_live_keys()
        operations_before = self.operations.before(self.state, command)
        result = apply(self.state, command, index)
        self.seen.update(f"{type(e).__name__}:{getattr(e, 'reason', '')}" for e in result.events)
        if not result.accepted:
            self.seen[f"rejected:{result.rejection.code}"] += 1
        where = f"entry {index} ({type(command).__name__})"
        if self.state.now_us < now_us:
            raise Violation(f"{where}: replicated time went back from {now_us} to {self.state.now_us}")
        if isinstance(command, cmds.EPOCH_COMMANDS) and command.epoch != epoch:
            if result.accepted:
                raise Violation(f"{where}: epoch {command.epoch} accepted while the epoch is {epoch}")
            return result
        if result.index != index:
            return result  # a remembered answer to a repeated request id: nothing was applied
        if isinstance(command, cmds.ClaimLeadership) and result.accepted and self.state.epoch != epoch + 1:
            raise Violation(f"{where}: leadership claimed but the epoch went {epoch} -> {self.state.epoch}")
        self._check_events(where, index, command, result, before)
        if result.accepted:
            self._check_dependencies(where, result, parent_live)
        self.operations.check(where, self.state, command, result, operations_before)
        return result

    # -- job dependencies (`after:`), from the oracle's own reading of the rule ---------------------
    def _children(self) -> dict[str, list[str]]:
        children: dict[str, list[str]] = {}
        for job_id, job in self.state.jobs.items():
            for parent in _parents(job.body):
                children.setdefault(parent, []).append(job_id)
        return children

    def _parent_live_keys(self) -> set[tuple[str, int]]:
        live = self.state.live_runs
        return {(p, s) for p in self._children() for s in live.get(p, ())}

    def _slot_of_parent(self, parent: str, slot_us: int) -> str:
        """'succeeded', 'ended' (any other final status) or 'pending' (no run of the slot yet: not
        claimed, live, pruned, or a manual run that only shares the instant)."""
        run = self.state.get_run(parent, slot_us)
        if run is None or run.kind == "manual" or run.status in ("queued", "leased"):
            return "pending"
        return "succeeded" if run.status == "succeeded" else "ended"

    def _check_dependencies(self, where: str, result, parent_live: set[tuple[str, int]]) -> None:
        follow_ups = () if result.follow_ups is UNSET else result.follow_ups
        for event in follow_ups:
            self.seen[f"follow_up:{event.status}"] += 1
            self._claimed_child(where, event)
        ended = {key for key in parent_live if self.state.get_run(*key) is None or self._final(key)}
        ended |= {
            (e.job_id, e.scheduled_us)
            for e in result.events
            if isinstance(e, ev.RunClaimed) and e.status in ("skipped", "missed")
        }
        for parent, slot_us in sorted(ended):
            if self._slot_of_parent(parent, slot_us) == "pending":
                continue
            for child in self._children().get(parent, []):
                fates = [self._slot_of_parent(p, slot_us) for p in _parents(self.state.jobs[child].body)]
                decided = "ended" in fates or all(f == "succeeded" for f in fates)
                horizon = self.state.history.get(child)
                pruned = horizon is not None and slot_us <= horizon.horizon_us
                if decided and not pruned and self.state.get_run(child, slot_us) is None:
                    raise Violation(f"{where}: {parent}@{slot_us} ended, its child {child} has no run of the slot")

    def _final(self, key: tuple[str, int]) -> bool:
        run = self.state.get_run(*key)
        return run is not None and run.status not in ("queued", "leased")

    def _claimed_child(self, where: str, event) -> None:
        key = (event.job_id, event.scheduled_us)
        if key in self.claimed:
            raise Violation(f"{where}: run key {key} claimed a second time (by a parent's end)")
        self.claimed.add(key)
        run, job = self.state.get_run(*key), self.state.jobs.get(event.job_id)
        if run is None or job is None or run.kind != "dependency":
            raise Violation(f"{where}: follow-up {key} is not a dependency run of a job")
        parents = _parents(job.body)
        fates = {p: self._slot_of_parent(p, event.scheduled_us) for p in parents}
        if run.reason.startswith("parent "):
            named = run.reason.split()[1].rsplit("@", 1)[0]
            if run.status != "skipped" or fates.get(named) != "ended":
                raise Violation(f"{where}: {key} {run.status} naming {named}, whose run of the slot {fates.get(named)}")
        elif any(f != "succeeded" for f in fates.values()):
            raise Violation(f"{where}: {key} claimed {run.status} ({run.reason!r}) while its parents are {fates}")

    def _check_events(self, where: str, index: int, command, result, before: dict) -> None:
        items = _refs(command)
        per_item = isinstance(command, (cmds.GrantLeases, cmds.ExtendLeases, cmds.CompleteRuns, cmds.ExpireLeases))
        if per_item and result.accepted and len(result.events) != len(items):
            raise Violation(f"{where}: {len(items)} items answered by {len(result.events)} events")
        for position, event in enumerate(result.events):
            if isinstance(event, ev.RunClaimed):
                self._claimed(where, command, event, before)
            elif isinstance(event, ev.LeaseGranted):
                self._granted(where, index, event, before)
            elif isinstance(event, ev.LeaseExtended):
                self._current(where, "heartbeat", event.job_id, event.scheduled_us, event.fencing_token, before)
            elif isinstance(event, (ev.JobAdded, ev.JobChanged)):
                self._job_changed(where, event)
            elif isinstance(event, ev.JobRemoved):
                self.expected_next.pop(event.job_id, None)
            if per_item and isinstance(event, ACCEPTING):
                self._ended(where, command, command_item(command, position), event, before)

    def _claimed(self, where: str, command, event: ev.RunClaimed, before: dict) -> None:
        key = (event.job_id, event.scheduled_us)
        reclaimable = isinstance(command, cmds.BackfillRuns) and before.get(key, ("",))[0] in ("skipped", "missed")
        if key in self.claimed and not reclaimable:
            raise Violation(f"{where}: run key {key} claimed a second time")
        self.claimed.add(key)
        run = self.state.get_run(*key)
        if event.status in ("skipped", "missed") and not run.reason:
            raise Violation(f"{where}: {key} {event.status} without a reason")
        if isinstance(command, cmds.ClaimRuns):
            expected = self.expected_next.get(event.job_id)
            if expected is not None and event.scheduled_us != expected:
                raise Violation(
                    f"{where}: {event.job_id} claimed slot {event.scheduled_us}, its next slot is {expected}"
                )
            if event.scheduled_us > self.state.now_us:
                raise Violation(f"{where}: {key} claimed before it was due (now {self.state.now_us})")
            job = self.state.jobs[event.job_id]
            self.expected_next[event.job_id] = next_slot(period_of(job.spec), event.scheduled_us)
            self.deadlines.claimed(where, self.state, event.job_id, event.scheduled_us, event.status)
        if isinstance(command, cmds.TriggerRun):
            first = self.manual_requests.setdefault(command.request_id, key)
            if first != key:
                raise Violation(f"{where}: request {command.request_id} created runs {first} and {key}")

    def _granted(self, where: str, index: int, event: ev.LeaseGranted, before: dict) -> None:
        key = (event.job_id, event.scheduled_us)
        status, token, _, _ = before.get(key, ("missing", 0, 0, 0))
        if status != "queued":
            raise Violation(
                f"{where}: lease {event.fencing_token} granted on {key} while it was {status} "
                f"(token {token}): two valid leases"
            )
        if event.fencing_token != index or event.fencing_token <= self.highest_token.get(key, 0):
            raise Violation(f"{where}: {key} granted token {event.fencing_token}, not a fresh log index")
        self.highest_token[key] = event.fencing_token
        for name in self.state.get_run(*key).resources:
            resource = self.state.resources.get(name)
            starts = self.starts.setdefault(name, [])
            starts.append(self.state.now_us)
            recent = [t for t in starts if t > self.state.now_us - SECOND_US]
            self.starts[name] = recent
            if resource is not None and resource.max_starts_per_s and len(recent) > resource.max_starts_per_s:
                raise Violation(
                    f"{where}: {len(recent)} leases of {name} started within a second "
                    f"(budget {resource.max_starts_per_s})"
                )

    def _current(self, where: str, what: str, job_id: str, scheduled_us: int, token: int, before: dict) -> None:
        status, current, _, _ = before.get((job_id, scheduled_us), ("missing", 0, 0, 0))
        if status != "leased" or token != current:
            raise Violation(
                f"{where}: {what} with token {token} accepted on ({job_id}, {scheduled_us}) "
                f"while it was {status} with token {current}"
            )

    def _ended(self, where: str, command, item, event, before: dict) -> None:
        lease = item.lease
        self._current(where, type(command).__name__, lease.job_id, lease.scheduled_us, lease.fencing_token, before)
        if isinstance(command, cmds.ExpireLeases):
            _, _, expires_us, deadline_us = before[(lease.job_id, lease.scheduled_us)]
            due_us = deadline_us if item.reason == "timed_out" else expires_us
            if due_us > self.state.now_us:
                raise Violation(f"{where}: lease {lease.fencing_token} ended at {self.state.now_us}, due at {due_us}")

    def _job_changed(self, where: str, event) -> None:
        job = self.state.jobs[event.job_id]
        if _parents(job.body):
            if job.next_due_us:
                raise Violation(f"{where}: {event.job_id} runs after {_parents(job.body)} but owes slots of its own")
            return
        if job.cursor_us > self.state.now_us:
            raise Violation(
                f"{where}: {event.job_id} starts owing slots from {job.cursor_us}, after replicated "
                f"time {self.state.now_us}: the slots in between would vanish"
            )
        # Added, or changed (a new schedule owes its own slots from the cursor on, not the old
        # schedule's next one): either way the next slot is the first one after the cursor.
        expected = next_slot(period_of(job.spec), job.cursor_us)
        if job.next_due_us != expected:
            raise Violation(
                f"{where}: {event.job_id} starts at {job.next_due_us}, first slot after its "
                f"cursor {job.cursor_us} is {expected}"
            )
        self.expected_next[event.job_id] = expected

    def check_state(self) -> None:
        """Whole-state invariants: the live index matches the runs; one live lease per run."""
        state = self.state
        try:
            self.operations.check_cancelled("whole-state check", state)
        except OperationsViolation as exc:
            raise Violation(str(exc)) from exc
        derived = {}
        for job_id in sorted(state.runs):
            live = [r.scheduled_us for r in state.runs[job_id] if r.status in ("queued", "leased")]
            if live:
                derived[job_id] = live
        if derived != state.live_runs:
            raise Violation(f"live-run index {state.live_runs} disagrees with the runs {derived}")
        leased: Counter = Counter()
        for job_id, runs in state.runs.items():
            for run in runs:
                if run.status == "leased":
                    leased.update(run.resources)
                tokens = [a.fencing_token for a in run.attempts]
                if any(b <= a for a, b in zip(tokens, tokens[1:])):
                    raise Violation(f"({job_id}, {run.scheduled_us}): attempt tokens {tokens} do not grow")
                if any(not a.outcome for a in run.attempts[:-1]):
                    raise Violation(f"({job_id}, {run.scheduled_us}): an earlier attempt never ended")
                if run.status == "leased" and (run.attempts[-1].outcome or run.fencing_token != tokens[-1]):
                    raise Violation(f"({job_id}, {run.scheduled_us}): leased without its live attempt")
        counted = {name: count for name, count in state.resource_leased.items() if count}
        if counted != dict(leased):
            raise Violation(f"resource use counted {counted}, leased runs use {dict(leased)}")
        for name, count in leased.items():
            resource = state.resources.get(name)
            if resource is not None and resource.max_concurrent and count > resource.max_concurrent:
                raise Violation(f"{count} leased runs use {name}, budget {resource.max_concurrent}")


def command_item(command, position: int):
    if isinstance(command, cmds.CompleteRuns):
        return command.completions[position]
    if isinstance(command, cmds.ExpireLeases):
        return command.expiries[position]
    return None
