"""One seeded simulation: faulty steps, then a calm quiesce, then the end-state checks.

Every step: time advances, faults strike (depositions, crashes and snapshot restores, clock
jumps, outages), the acting leaders, workers and clients propose, ready proposals commit in
a shuffled order, nodes replicate; the oracle checks each entry and then the whole state.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from tests.sim.actors import Worker, clients, leader_loops, setup
from tests.sim.oracle import SECOND_US, Violation, period_of
from tests.sim.world import Faults, World

QUIESCE_DISPATCH_US = 10 * SECOND_US  # calm, still leasing
QUIESCE_DRAIN_US = 15 * SECOND_US  # calm, no new leases: every lease must end (TTL, max runtime)
# A leader whose wall clock is behind replicated time (a faster-clocked leader came before)
# cannot expire or fire anything until its clock catches up: the drain waits that out, up to this.
MAX_CLOCK_STALL_US = 600 * SECOND_US


class SimulationFailure(AssertionError):
    def __init__(self, seed: int, step: int, message: str) -> None:
        super().__init__(
            f"simulation seed {seed} failed at step {step}: {message} (rerun: python -m tests.sim --seed {seed})"
        )
        self.seed, self.step, self.message = seed, step, message


@dataclass
class Outcome:
    seed: int
    steps: int
    entries: int
    stats: dict
    seen: dict  # what the log's answers were, by kind (see Oracle.seen)
    elapsed_s: float


# Whole-state checks (encoding every replica, scanning every run) every few steps: a replica
# that diverged or a broken record stays so, and is caught a few steps later with the same seed.
WHOLE_STATE_EVERY = 6


def step(world: World, quiet: bool = False, fast: bool = False) -> None:
    world.step_no += 1
    world.advance_time(fast)
    if not quiet:
        world.inject_faults()
    for view in world.acting_leaders():
        leader_loops(world, view, prompt=quiet)
    for worker in world.workers:
        worker.act(world, quiet)
    if not quiet:
        setup(world)
        clients(world)
    world.commit_ready()
    whole = world.step_no % WHOLE_STATE_EVERY == 0
    world.replicate(compare=whole)
    if whole:
        world.oracle.check_state()


def quiesce(world: World) -> None:
    world.faults = world.faults.calm()
    world.deposed = []
    if world.leader is None or world.leader.epoch is None:
        world.elect()
    start_us = world.t_us
    while world.t_us < start_us + QUIESCE_DISPATCH_US:
        _calm_step(world)
    world.dispatching = False
    drain_us, drain_from_us = world.t_us, world.oracle.state.now_us
    while world.t_us < drain_us + QUIESCE_DRAIN_US or _planning_now(world) < drain_from_us + QUIESCE_DRAIN_US:
        if world.t_us > drain_us + MAX_CLOCK_STALL_US:
            raise Violation(
                f"the leader's clock never caught up with replicated time ({_planning_now(world)} "
                f"< {drain_from_us} + {QUIESCE_DRAIN_US})"
            )
        world.count("drain_steps")
        _calm_step(world, fast=world.t_us > drain_us + QUIESCE_DRAIN_US)
    settle_us = world.t_us
    while world.t_us < settle_us + 3 * SECOND_US:  # a few ordinary steps after any fast-forward
        _calm_step(world)
    for proposal in world.inflight:
        proposal.ready_step = world.step_no
    world.commit_ready()
    world.replicate()  # lag is off: every node catches up and is compared with the oracle
    world.oracle.check_state()
    _check_end(world)


def _planning_now(world: World) -> int:
    view = world.leader
    return view.clock.read()[0] if view is not None and view.epoch is not None else 0


def _calm_step(world: World, fast: bool = False) -> None:
    step(world, quiet=True, fast=fast)
    if world.leader.epoch is None and world.step_no % 5 == 0:
        world.claim_leadership(world.leader)


def _check_end(world: World) -> None:
    state = world.oracle.state
    lagging = [n.node_id for n in world.nodes if n.state.applied_index != state.applied_index]
    if lagging:
        raise Violation(f"nodes {lagging} never caught up")
    leased = [(j, r.scheduled_us) for j, runs in state.runs.items() for r in runs if r.status == "leased"]
    if leased:
        raise Violation(
            f"leases still held after every worker stopped and {QUIESCE_DRAIN_US // SECOND_US}s: "
            f"{leased[:3]} (nothing may hang)"
        )
    # Slots are claimable once both the leader's clock and replicated time reached them.
    due_by_us = min(_planning_now(world), state.now_us)
    for job_id, job in sorted(state.jobs.items()):
        if job.body.after:
            continue  # no slots of its own: its runs follow its parents' (the oracle checks each)
        behind_us = due_by_us - job.cursor_us
        if behind_us > (period_of(job.spec) + 1) * SECOND_US:
            raise Violation(
                f"{job_id}: its cursor is {behind_us / SECOND_US:.1f}s behind the leader's clock "
                "and replicated time after a calm period (slots not accounted for)"
            )


def simulate(seed: int, steps: int = 300, nodes: int = 3, workers: int = 3, faults: Faults | None = None) -> Outcome:
    started = time.perf_counter()
    world = World(seed, nodes, faults)
    world.workers = [Worker(f"w{i}") for i in range(workers)]
    world.dispatching = True
    try:
        for _ in range(steps):
            step(world)
        quiesce(world)
    except Violation as exc:
        raise SimulationFailure(seed, world.step_no, str(exc)) from exc
    return Outcome(
        seed, world.step_no, len(world.log), world.stats, dict(world.oracle.seen), time.perf_counter() - started
    )
