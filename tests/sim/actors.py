"""Who proposes in the simulation, built like the real proposers: the leader's trigger,
dispatcher, reaper and clock tick (scheduler/leader/), workers heartbeating and completing
(scheduler/rpc/workers.py), and clients writing jobs and manual runs (scheduler/rpc/jobs.py).
Each reads its own node's replica, which may be stale, exactly as the real loops do."""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import msgspec
from msgspec import UNSET

from scheduler.core import commands as cmds
from scheduler.core import results as ev
from scheduler.core.jobs import restarted_cursor
from scheduler.core.log_format import LOG_FORMAT
from scheduler.core.model import JobSpec, MisfirePolicy, Resource, RetryPolicy
from scheduler.leader.planner import plan_job_slots
from scheduler.leader.reaper import overdue
from scheduler.planning.jobs import first_due_after
from tests.sim.oracle import SECOND_US, period_of
from tests.sim.world import LeaderView, World

LEASE_TTL_US = 2 * SECOND_US
JOB_IDS = [f"j{i}" for i in range(6)]
CLASSES = ("default", "batch")
PERIODS = (1, 2, 3, 5, 10)
# A dependency budget some jobs use: at most 2 leased runs at once, at most 3 lease starts a second.
DB = Resource("db", max_concurrent=2, max_starts_per_s=3)


# -- the leader's loops -----------------------------------------------------------
def _deposed_on_stale_epoch(world: World, view: LeaderView):
    """Like the real loops: a stale_epoch answer ends the epoch, and the lifecycle claims anew."""

    def answered(result) -> None:
        if not result.accepted and result.rejection.code == "stale_epoch" and view.epoch is not None:
            view.epoch = None
            if world.leader is view:
                world.claim_leadership(view)

    return answered


def leader_loops(world: World, view: LeaderView, prompt: bool = False) -> None:
    """One pass of the leader's loops; `prompt`: the trigger runs every step (a calm cluster's
    trigger sleeps exactly until the next due slot), else only now and then."""
    rng = world.rng
    node = world.leader_node(view)
    state = node.state
    now_us, mono_us = view.clock.read()
    on_stale = _deposed_on_stale_epoch(world, view)
    if deadline_seed(world.seed) and state.cluster_version < LOG_FORMAT:
        # Like the real leader once every voter reads the current format: until its replica shows it.
        world.propose(
            cmds.SetClusterVersion(now_us, version=LOG_FORMAT, epoch=view.epoch, monotonic_us=mono_us), on_stale
        )
    if prompt or rng.random() < 0.6:  # trigger: every due slot, in batches
        claims, sources = [], []
        for job_id in sorted(state.jobs):
            job_claims, job_sources = plan_job_slots(state.jobs[job_id], now_us, 50)
            claims += job_claims
            sources += job_sources if job_sources is not None else [cmds.NO_SCHEDULE_INDEX] * len(job_claims)
        size = rng.randint(1, 8)
        for start in range(0, len(claims), size):
            batch_sources = tuple(sources[start : start + size])
            indexes = batch_sources if any(s != cmds.NO_SCHEDULE_INDEX for s in batch_sources) else UNSET
            command = cmds.ClaimRuns(now_us, view.epoch, tuple(claims[start : start + size]), mono_us, indexes)
            world.propose(command, on_stale)
    if rng.random() < 0.5:  # reaper
        expiries = [cmds.Expiry(e.lease, e.reason, rng.randrange(1_000_000)) for e in overdue(state, now_us)[0]]
        if expiries:
            world.propose(cmds.ExpireLeases(now_us, view.epoch, tuple(expiries[:200]), mono_us), on_stale)
    if rng.random() < 0.2:
        world.propose(cmds.AdvanceTime(now_us, view.epoch, mono_us), on_stale)
    for worker in world.workers:
        if world.dispatching and rng.random() < 0.4:
            dispatch(world, view, worker, now_us, mono_us)


def dispatch(world: World, view: LeaderView, worker: Worker, now_us: int, mono_us: int) -> None:
    """Pick ready queued runs (now and then a leased one, as a stale queue would) and grant them."""
    rng, state = world.rng, world.leader_node(view).state
    ready = []
    for job_id in sorted(state.live_runs):
        for scheduled_us in state.live_runs[job_id]:
            run = state.get_run(job_id, scheduled_us)
            if run.status == "queued" and max(run.not_before_us, run.effective_us) <= now_us:
                ready.append(cmds.RunRef(job_id, scheduled_us))
            elif run.status == "leased" and rng.random() < 0.05:
                ready.append(cmds.RunRef(job_id, scheduled_us))
    if not ready:
        return
    picked = tuple(rng.sample(ready, min(len(ready), rng.randint(1, 4))))

    on_stale = _deposed_on_stale_epoch(world, view)

    def answered(result) -> None:
        on_stale(result)
        if result.accepted and rng.random() > 0.1:  # else the answer was lost on its way back
            for event in result.events:
                if isinstance(event, ev.LeaseGranted):
                    worker.take(world, event)

    world.propose(cmds.GrantLeases(now_us, view.epoch, worker.worker_id, LEASE_TTL_US, picked, mono_us), answered)


# -- workers ---------------------------------------------------------------------
@dataclass
class Held:
    lease: cmds.LeaseRef
    done_at_us: int
    last_ok_us: int
    zombie: bool  # a paused process: no heartbeats, completes long after its lease ended


@dataclass
class Worker:
    worker_id: str
    held: dict[tuple, Held] = field(default_factory=dict)

    def take(self, world: World, event: ev.LeaseGranted) -> None:
        lease = cmds.LeaseRef(event.job_id, event.scheduled_us, event.fencing_token)
        zombie = world.rng.random() < 0.1
        hold_us = world.rng.randrange(0, 3 * SECOND_US // 2) + (3 * LEASE_TTL_US if zombie else 0)
        self.held[(lease.job_id, lease.scheduled_us, lease.fencing_token)] = Held(
            lease, world.t_us + hold_us, world.t_us, zombie
        )

    def act(self, world: World, quiet: bool = False) -> None:
        rng = world.rng
        beats = []
        for key, held in list(self.held.items()):
            if not held.zombie and world.t_us - held.last_ok_us > LEASE_TTL_US:
                del self.held[key]  # no heartbeat accepted for a whole TTL: the SDK gives the run up
            elif world.t_us >= held.done_at_us or (quiet and not held.zombie):
                del self.held[key]
                self._complete(world, held)
            elif rng.random() < 0.01 and not quiet:
                del self.held[key]  # abandoned: only the reaper ends it
            elif not held.zombie and rng.random() < 0.5:
                beats.append(key)
        if beats:
            self._heartbeat(world, beats)

    def _heartbeat(self, world: World, keys: list[tuple]) -> None:
        node = world.rng.choice(world.nodes)  # any node coalesces heartbeats into one entry
        leases = tuple(self.held[k].lease for k in keys)

        def answered(result) -> None:
            if not result.accepted:
                return
            for key, event in zip(keys, result.events):
                if key in self.held:
                    if isinstance(event, ev.LeaseExtended):
                        self.held[key].last_ok_us = world.t_us
                    else:
                        del self.held[key]

        world.propose(cmds.ExtendLeases(node.wall(world.t_us), leases), answered, max_delay=2)

    def _complete(self, world: World, held: Held) -> None:
        rng = world.rng
        outcome = rng.choices(("success", "failure", "retry_later"), (0.7, 0.15, 0.15))[0]
        completion = cmds.Completion(
            held.lease,
            self.worker_id,
            outcome,
            error="" if outcome == "success" else "boom",
            retry_after_us=rng.choice((0, 500_000)),
            jitter_ppm=rng.randrange(1_000_000),
        )
        node = rng.choice(world.nodes)
        if outcome == "failure" and deadline_seed(world.seed) and node.state.cluster_version >= LOG_FORMAT:
            completion = _maybe_final(world, completion)
        command = cmds.CompleteRuns(node.wall(world.t_us), (completion,))
        world.propose(command, max_delay=10)
        if rng.random() < 0.1:
            world.propose(command, max_delay=10)  # the worker retries: same token, same outcome


def _maybe_final(world: World, completion: cmds.Completion) -> cmds.Completion:
    """A failure the handler declares final (FinalFailure), or a shell job's exit code that may be
    one of its job's `retry.final_exit_codes`, or an ordinary failure."""
    kind = world.rng.choices(("final", "exit_code", "plain"), (0.25, 0.25, 0.5))[0]
    if kind == "final":
        return msgspec.structs.replace(completion, final=True)
    if kind == "exit_code":
        return msgspec.structs.replace(completion, exit_code=world.rng.choice(FINAL_EXIT_CODES + (1,)))
    return completion


# -- clients ---------------------------------------------------------------------
def _shape(job_id: str, period: int) -> dict:
    """A cron expression, an interval or a union of schedules: the same slots every `period` s.

    Chosen from the job id, not the seed's generator, so adding shapes left every seed's
    sequence of faults as it was."""
    expr = "* * * * * *" if period == 1 else f"*/{period} * * * * *"
    shape = zlib.crc32(f"{job_id}/{period}".encode()) % 5
    if shape < 3:
        return {"schedule": expr}
    if shape == 3:
        return {"schedule": "", "every_us": period * SECOND_US}
    doubled = [f"*/{2 * period} * * * * *"] if 60 % (2 * period) == 0 else []
    return {"schedule": "", "schedules": (*doubled, expr)}


# The seeds at the current log format, whose jobs may have a `deadline:` (and then a spread now
# and then, which moves the instant the deadline counts from); the other seeds stay at format 1
# and keep the sequences they had before deadlines existed.
DEADLINE_SEEDS_EVERY = 3
DEADLINES_S = (0, 1, 4, 10, 20)  # 0: none; short, so a run both meets and misses them
SPREAD = "2s"


def deadline_seed(seed: int) -> bool:
    return seed % DEADLINE_SEEDS_EVERY == 1


def _deadline(job_id: str, period: int) -> dict:
    """A deadline and a jitter chosen from the job id and period (not the seed's generator): a
    client's new spec for the job may change both, as a person editing the file would."""
    pick = zlib.crc32(f"{job_id}/{period}/deadline".encode())
    deadline_s = DEADLINES_S[pick % len(DEADLINES_S)]
    if not deadline_s:
        return {"jitter": "pinned"}
    return {"deadline_us": deadline_s * SECOND_US, "jitter": SPREAD if pick // 8 % 2 else "pinned"}


# Operator settings of the format-3 seeds, from the job id and period like the deadline.
PAUSE_AFTER_FAILURES = (0, 0, 2, 3)  # 0: none
FINAL_EXIT_CODES = (3, 4)


def _operations(job_id: str, period: int) -> tuple[dict, dict]:
    """The spec's `pause_after_failures` and the retry policy's `final_exit_codes`, or neither."""
    pick = zlib.crc32(f"{job_id}/{period}/operations".encode())
    pause_after = PAUSE_AFTER_FAILURES[pick % len(PAUSE_AFTER_FAILURES)]
    spec = {"pause_after_failures": pause_after} if pause_after else {}
    retry = {"final_exit_codes": FINAL_EXIT_CODES} if pick // 4 % 2 else {}
    return spec, retry


def random_spec(world: World, job_id: str, period: int) -> JobSpec:
    rng = world.rng
    spec_ops, retry_ops = _operations(job_id, period) if deadline_seed(world.seed) else ({}, {})
    return JobSpec(
        id=job_id,
        **_shape(job_id, period),
        target_kind="handler",
        target="sim",
        job_class=rng.choice(CLASSES),
        timeout_us=rng.randrange(1, 10) * SECOND_US,
        retry=RetryPolicy(
            max_attempts=rng.randint(1, 4),
            backoff_initial_us=rng.choice((0, 200_000, 1_000_000)),
            backoff_max_us=2 * SECOND_US,
            backoff_multiplier=2.0,
            **retry_ops,
        ),
        misfire=MisfirePolicy(
            rng.choice(("fire_late", "skip", "catch_up")), rng.randrange(0, 20) * SECOND_US, rng.randint(0, 5)
        ),
        overlap=rng.choice(("allow", "forbid", "queue", "replace")),
        payload_json=f'{{"v": {rng.randrange(100)}}}',
        uses=("db",) if rng.random() < 0.5 else (),
        **(_deadline(job_id, period) if deadline_seed(world.seed) else {"jitter": "pinned"}),
        **spec_ops,
    )


def apply_jobs(
    world: World, node, specs: list[JobSpec], removals: tuple[str, ...], request_id: str, resources: tuple = ()
):
    """Plan like JobServicer: versions, first slots and the stamp from this node's (maybe stale)
    replica, in replicated time; None before any epoch (the servicer answers UNAVAILABLE)."""
    state = node.state
    if state.epoch == 0:
        return None
    issued_us = state.now_us
    upserts = []
    for spec in specs:
        current = state.jobs.get(spec.id)
        upsert = cmds.JobUpsert(spec, current.version if current else 0, 0)
        after_us = restarted_cursor(state, current, upsert, issued_us)
        next_due_us = first_due_after(spec, after_us) if after_us is not None else current.next_due_us
        upserts.append(cmds.JobUpsert(spec, upsert.expected_version, next_due_us))
    return cmds.ApplyJobs(issued_us, "sim", request_id, tuple(upserts), removals, resources)


# The seeds with dependency chains: every one would add ~40% more log entries to each seed's run
# (CI time), and the other seeds keep the sequences they had before the chains existed.
DEPENDENCY_SEEDS_EVERY = 4


def _fixed_spec(job_id: str, **fields) -> JobSpec:
    """A job of the dependency chains: fixed fields, so they take nothing from the seed's generator."""
    fields.setdefault("retry", RetryPolicy(max_attempts=2, backoff_initial_us=200_000, backoff_max_us=SECOND_US))
    return JobSpec(id=job_id, target_kind="handler", target="sim", timeout_us=3 * SECOND_US, **fields)


def dependency_specs() -> list[JobSpec]:
    """A chain below j0 (c0 after j0, c1 after c0: a failure cascades) and a fan-in: f2 after f0
    and f1, which share one schedule. The clients change and remove j0 (a removal is refused
    while c0 runs after it; a new period moves the chain's slots along)."""
    return [
        _fixed_spec("c0", schedule="", after=("j0",)),
        _fixed_spec("c1", schedule="", after=("c0",), overlap="forbid"),
        _fixed_spec("f0", schedule="*/10 * * * * *"),
        _fixed_spec("f1", schedule="*/10 * * * * *", retry=RetryPolicy(max_attempts=1)),
        _fixed_spec("f2", schedule="", after=("f0", "f1")),
    ]


def setup(world: World, jobs: int = 4) -> None:
    """A few jobs, the dependency chains and the budget they use, once the first leader's epoch is
    open (never lost)."""
    if world.setup_done or world.leader is None or world.leader.epoch is None:
        return
    node = world.leader_node(world.leader)
    specs = [random_spec(world, job_id, world.rng.choice(PERIODS)) for job_id in JOB_IDS[:jobs]]
    if world.seed % DEPENDENCY_SEEDS_EVERY == 0:
        specs += dependency_specs()
    command = apply_jobs(world, node, specs, (), "setup", resources=(DB,))
    if command is not None:
        world.propose(command, max_delay=0, reliable=True)
        world.setup_done = True


def clients(world: World) -> None:
    rng = world.rng
    # Writes reach the leader, which plans from its own replica; now and then a stale node plans.
    leader = world.leader_node(world.leader) if world.leader is not None and rng.random() < 0.8 else None
    node = leader or rng.choice(world.nodes)
    state, issued_us = node.state, node.wall(world.t_us)
    job_id = rng.choice(JOB_IDS)
    request_id = f"r{world.step_no}-{rng.randrange(1 << 30)}"
    job = state.jobs.get(job_id)
    command = None
    roll = rng.random()
    if roll < 0.04:
        if job is None:
            command = apply_jobs(world, node, [random_spec(world, job_id, rng.choice(PERIODS))], (), request_id)
        elif rng.random() < 0.5:
            period = period_of(job.spec)
            command = apply_jobs(world, node, [random_spec(world, job_id, period)], (), request_id)
        else:
            command = apply_jobs(world, node, [], (job_id,), request_id)
    elif roll < 0.06 and job is not None:
        command = cmds.SetJobPaused(issued_us, job_id, rng.random() < 0.5, "sim", "maintenance", request_id)
    elif roll < 0.12 and job is not None:
        command = cmds.TriggerRun(issued_us, job_id, "sim", request_id, **_own_run_fields(world, node))
    elif roll < 0.13 and job is not None and job.cursor_us:
        period = period_of(job.spec)
        slots = tuple(range(job.cursor_us - 5 * period * SECOND_US, job.cursor_us + 1, period * SECOND_US))
        slots = tuple(s for s in slots if s % (period * SECOND_US) == 0)
        interval_us = rng.randrange(0, SECOND_US)
        own = _own_run_fields(world, node)
        command = cmds.BackfillRuns(issued_us, job_id, "sim", request_id, slots, interval_us, **own)
    elif roll < 0.135 and hasattr(cmds, "KillClass"):
        job_class = rng.choice(CLASSES)
        if rng.random() < 0.5:
            until_us = state.now_us + rng.randrange(1, 30) * SECOND_US if rng.random() < 0.5 else 0
            command = cmds.KillClass(issued_us, job_class, "drill", "sim", request_id, until_us, rng.random() < 0.5)
        else:
            command = cmds.ReviveClass(issued_us, job_class, "sim", request_id)
    elif roll < 0.175 and job is not None and _operations_now(world, node):
        command = _cancel(world, node, job_id, issued_us, request_id)
    if command is not None:
        world.propose(command)
        if rng.random() < 0.15:
            world.propose(command, max_delay=8)  # a client retry with the same request id


def _operations_now(world: World, node) -> bool:
    """A format-3 seed whose proposing node reads format 3 (the servicers refuse format-3
    requests before the cluster version is raised)."""
    return deadline_seed(world.seed) and node.state.cluster_version >= LOG_FORMAT


def _own_run_fields(world: World, node) -> dict:
    """A trigger's or backfill's own overlap (and payload) now and then, in the format-3 seeds."""
    if not _operations_now(world, node) or world.rng.random() < 0.5:
        return {}
    overlap = world.rng.choice(("allow", "forbid", "queue", "replace"))
    return {"overlap": overlap, "payload_json": f'{{"own": "{overlap}"}}'}


def _cancel(world: World, node, job_id: str, issued_us: int, request_id: str) -> cmds.CancelRun | None:
    """An operator cancels a run of the job as this node's replica shows it: mostly a live one,
    now and then one that already ended (refused), as a stale dashboard would."""
    runs = node.state.runs.get(job_id, [])
    live = [r.scheduled_us for r in runs if r.status in ("queued", "leased")]
    pool = live if live and world.rng.random() < 0.8 else [r.scheduled_us for r in runs[-5:]]
    if not pool:
        return None
    scheduled_us = world.rng.choice(pool)
    return cmds.CancelRun(issued_us, job_id, scheduled_us, "sim", "drill", request_id)
