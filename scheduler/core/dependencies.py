"""Job dependencies (`after: [JOB...]`): a child's run of a slot is decided by its parents' runs.

A child job has no schedule of its own; its slots are its parents' (docs/design/job-dependencies.md).
When a parent's run of slot S reaches a final status, the child's run key (child, S) is decided in
the same entry: queued (kind `dependency`) once every parent's run of S succeeded, or skipped,
naming the first parent (in `after:` order) whose run of S did not. A run key is claimed once, so
a repeated or replayed completion decides nothing twice, and a cascade (a skipped child skips its
own children) follows in the same entry.

The State keeps two derived fields, never in a snapshot: `dependents` (parent -> children, rebuilt
from the specs) and `settling` (parent runs that became final during this entry, appended by
State.add_run / set_status only while some job has children, so a cluster without dependencies
pays one truthiness test per status change).
"""

from __future__ import annotations

from msgspec import UNSET

from scheduler.core import results as ev
from scheduler.core.alerts import close_streaks
from scheduler.core.commands import ApplyJobs
from scheduler.core.model import FINAL_STATUSES, QUEUED, SKIPPED, SUCCEEDED, Job, JobSpec, Run, format_run_key
from scheduler.core.results import Result, rejected
from scheduler.core.retention import horizon_us, prune_history
from scheduler.core.sharing import share_last
from scheduler.core.state import State
from scheduler.core.vocabulary import Overlap, RejectionCode, RunKind, SkipReason

# The spec fields that decide which instants are a job's slots: parents of one child must agree
# on all of them, so that "the same slot" is one instant every parent has (or none has).
SLOT_FIELDS = (
    "schedule", "timezone", "dst_gap", "dst_repeat", "schedules", "every_us", "anchor_us", "at_us", "active", "max_runs",
)  # fmt: skip
# How many levels a chain may have: bounds the checks at apply and every cascade.
MAX_DEPTH = 32
MAX_PARENTS = 16


def has_own_schedule(spec: JobSpec) -> bool:
    return bool(spec.schedule) or any(getattr(spec, name) is not UNSET for name in ("schedules", "every_us", "at_us"))


def parent_decision(parent_runs: list[tuple[str, Run | None]]) -> tuple[str, str] | None:
    """(status, reason) of a child's slot from its parents' runs of that slot, in `after:` order,
    or None while it cannot be decided yet. Pure: the rule the core and the simulation's oracle
    share. A parent without a run of the slot (not claimed yet) or with a live one is pending; a
    manual run is not a run of the slot (its key is the trigger's instant, not a schedule's)."""
    pending = False
    for parent_id, run in parent_runs:
        if run is None or run.kind == RunKind.MANUAL or run.status not in FINAL_STATUSES:
            pending = True
        elif run.status != SUCCEEDED:
            return SKIPPED, f"{SkipReason.PARENT} {format_run_key(parent_id, run.scheduled_us)} {run.status}"
    return None if pending else (QUEUED, "")


def _claim_child(state: State, child: Job, slot_us: int, index: int) -> ev.AnyEvent | None:
    if state.get_run(child.id, slot_us) is not None or slot_us <= horizon_us(state, child.id):
        return None  # decided before (a repeated completion, or another parent's final run)
    after = child.body.after
    assert after is not UNSET  # only children are in state.dependents
    decision = parent_decision([(p, state.get_run(p, slot_us)) for p in after])
    if decision is None:
        return None
    status, why = decision
    kill = state.kill_of(child.body.job_class)
    if status == QUEUED and child.paused:
        status, why = SKIPPED, SkipReason.PAUSED
    elif status == QUEUED and kill is not None:
        status, why = SKIPPED, f"{SkipReason.KILLED}: {kill.reason} (by {kill.author})"
    elif status == QUEUED and state.live_runs.get(child.id):
        if child.body.overlap == Overlap.FORBID:
            live_key = format_run_key(child.id, state.live_runs[child.id][0])
            status, why = SKIPPED, f"{SkipReason.OVERLAP_FORBID}: run {live_key} still live"
        elif child.body.overlap == Overlap.REPLACE:
            from scheduler.core.execution import cancel_live_runs  # execution -> retry -> here

            cancel_live_runs(state, child.id, f"replaced by the run of {slot_us}")
    run = Run(
        job_id=child.id,
        scheduled_us=slot_us,
        status=status,
        kind=RunKind.DEPENDENCY,
        reason=why,
        effective_us=slot_us,
        claimed_us=state.now_us,
        claim_index=index,
        spec_version=child.version,
    )
    state.add_run(run)  # a skipped child with children of its own joins `settling`: the cascade
    if slot_us >= child.last.scheduled_us:
        child.last = share_last(status, slot_us)
    if status == QUEUED:
        close_streaks(state, child.id)
    prune_history(state, child.id)
    return ev.RunClaimed(child.id, slot_us, status, index)


def settle_dependents(state: State, result: Result, index: int) -> Result:
    """Decide the children's slots of every parent run that ended in this entry."""
    follow_ups: list[ev.AnyEvent] = []
    settling = state.settling
    while settling:
        run = settling.pop(0)
        if run.status not in FINAL_STATUSES or run.kind == RunKind.MANUAL:
            continue  # a backfill made it live again, or a trigger's run: no slot of the chain
        for child_id in state.dependents.get(run.job_id, ()):
            child = state.jobs.get(child_id)
            event = _claim_child(state, child, run.scheduled_us, index) if child is not None else None
            if event is not None:
                follow_ups.append(event)
    if not follow_ups:
        return result
    return Result(index=result.index, events=result.events, rejection=result.rejection, follow_ups=tuple(follow_ups))


# -- ApplyJobs: what may depend on what --------------------------------------------------------------


def _slot_source(spec_of, job_id: str, depth: int = 0) -> tuple | None:
    """What decides the instants of `job_id`'s slots: its own schedule's fields, or its first
    parent's source (every parent agrees, checked separately). None for an unknown job or a cycle."""
    spec = spec_of(job_id)
    if spec is None or depth > MAX_DEPTH:
        return None
    if spec.after is not UNSET and spec.after:
        return _slot_source(spec_of, spec.after[0], depth + 1)
    return tuple(getattr(spec, name) for name in SLOT_FIELDS)


def _cycle_from(spec_of, start: str) -> list[str] | None:
    """A path start -> ... -> start along `after:` links, or None."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen: set[str] = set()
    while stack:
        job_id, path = stack.pop()
        spec = spec_of(job_id)
        for parent in spec.after if spec is not None and spec.after is not UNSET else ():
            if parent == start:
                return [*path, parent]
            if parent not in seen and len(path) <= MAX_DEPTH:
                seen.add(parent)
                stack.append((parent, [*path, parent]))
    return None


def dependency_problem(state: State, cmd: ApplyJobs) -> str:
    """Why the job graph after `cmd` cannot be scheduled, or ''. Costs nothing for an apply that
    neither declares `after:` nor touches a job others run after."""
    upserted = {u.spec.id: u.spec for u in cmd.upserts}
    declaring = [spec for spec in upserted.values() if spec.after is not UNSET]
    touched_parents = [job_id for job_id in (*upserted, *cmd.removals) if job_id in state.dependents]
    if not declaring and not touched_parents:
        return ""
    removed = set(cmd.removals)

    def spec_of(job_id: str) -> JobSpec | None:
        if job_id in upserted:
            return upserted[job_id]
        job = state.jobs.get(job_id)
        return job.body if job is not None and job_id not in removed else None

    for parent in (p for p in cmd.removals if p in state.dependents):
        for child_id in state.dependents[parent]:
            child = spec_of(child_id)
            if child is not None and child.after is not UNSET and parent in child.after:
                return f"job {parent!r} cannot be removed: {child_id!r} runs after it (remove or change it too)"
    # The children to check: the declaring specs, and every job below a touched parent.
    to_check, queue = {spec.id for spec in declaring}, list(touched_parents)
    while queue:
        for child_id in state.dependents.get(queue.pop(), ()):
            if child_id not in to_check and child_id not in removed:
                to_check.add(child_id)
                queue.append(child_id)
    checked = sorted(to_check)
    # Cycles first: every other check follows `after:` links, and a cycle is the root cause.
    for child_id in checked:
        spec = spec_of(child_id)
        if spec is not None and spec.after is not UNSET and child_id in spec.after:
            return f"job {child_id!r} cannot run after itself"
        cycle = _cycle_from(spec_of, child_id)
        if cycle:
            return f"job {child_id!r}: after: makes a cycle ({' -> '.join(cycle)})"
    for child_id in checked:
        problem = _child_problem(spec_of, child_id)
        if problem:
            return problem
    return ""


def _child_problem(spec_of, child_id: str) -> str:
    spec = spec_of(child_id)
    if spec is None or spec.after is UNSET:
        return ""
    after = spec.after
    if not after or len(after) > MAX_PARENTS or len(set(after)) != len(after):
        return f"job {child_id!r}: after: lists 1 to {MAX_PARENTS} different jobs"
    if has_own_schedule(spec):
        return f"job {child_id!r} has after: and a schedule of its own; a child runs on its parents' slots only"
    for parent in after:
        if parent == child_id:
            return f"job {child_id!r} cannot run after itself"
        parent_spec = spec_of(parent)
        if parent_spec is None:
            return f"job {child_id!r}: after: names {parent!r}, which does not exist"
        if parent_spec.after is UNSET and not has_own_schedule(parent_spec):
            return f"job {child_id!r}: after: names {parent!r}, which has no schedule (a manual-only job has no slots)"
    sources = [(parent, _slot_source(spec_of, parent)) for parent in after]
    first_parent, first_source = sources[0]
    for parent, source in sources[1:]:
        if source != first_source:
            return (
                f"job {child_id!r}: parents {first_parent!r} and {parent!r} have different schedules; "
                "the parents of one job must declare the same schedule, time zone and window"
            )
    if _depth(spec_of, child_id, {}) > MAX_DEPTH:
        return f"job {child_id!r}: a chain of after: is at most {MAX_DEPTH} jobs deep"
    return ""


def _depth(spec_of, job_id: str, memo: dict[str, int], level: int = 0) -> int:
    """How many `after:` links lie above `job_id` on its longest chain (bounded past MAX_DEPTH)."""
    if job_id in memo:
        return memo[job_id]
    spec = spec_of(job_id)
    if spec is None or spec.after is UNSET or level > MAX_DEPTH:
        return 0
    memo[job_id] = depth = 1 + max(_depth(spec_of, parent, memo, level + 1) for parent in spec.after)
    return depth


def check_dependencies(state: State, cmd: ApplyJobs, index: int) -> Result | None:
    problem = dependency_problem(state, cmd)
    return rejected(index, RejectionCode.INVALID, problem) if problem else None


def update_dependents(state: State, old: JobSpec | None, new: JobSpec | None, job_id: str) -> None:
    """Keep the parent -> children index in step with one job's `after:` (None: no such job)."""
    before = () if old is None or old.after is UNSET else old.after
    after = () if new is None or new.after is UNSET else new.after
    if before == after:
        return
    for parent in set(before) - set(after):
        kept = tuple(c for c in state.dependents.get(parent, ()) if c != job_id)
        if kept:
            state.dependents[parent] = kept
        else:
            state.dependents.pop(parent, None)
    for parent in set(after) - set(before):
        state.dependents[parent] = tuple(sorted((*state.dependents.get(parent, ()), job_id)))
