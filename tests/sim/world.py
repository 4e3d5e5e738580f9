"""A seeded, deterministic world: nodes with skewed clocks, one committed log, proposals in flight.

Raft is reduced to what the core can observe: a single committed sequence of entries, each
applied with its index. Proposals travel before they commit: delayed, reordered, lost or
duplicated. Nodes apply the log at their own pace, crash and come back from their last
snapshot, and compare digests with the reference replica (the Oracle) at equal indexes.
Leaders are elected, deposed mid-step, and keep proposing with their stale epoch a while.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from scheduler.core import State, apply, decode_command, decode_snapshot, encode_command, encode_snapshot, state_digest
from scheduler.core.commands import ClaimLeadership
from scheduler.core.results import LeadershipClaimed
from scheduler.leader.clock import LeaderClock
from tests.sim.oracle import Oracle, Violation

SECOND_US = 1_000_000
T0_US = 1_780_000_000 * SECOND_US


@dataclass
class Faults:
    """Per-step (or per-proposal) probabilities; `calm()` switches them all off."""

    lost: float = 0.04
    duplicated: float = 0.05
    max_delay_steps: int = 3
    depose: float = 0.02
    crash: float = 0.01
    snapshot: float = 0.04
    clock_jump: float = 0.01
    lag: float = 0.3
    outage: float = 0.01

    def calm(self) -> Faults:
        return Faults(0, 0, 0, 0, 0, self.snapshot, 0, 0, 0)


@dataclass
class Node:
    node_id: str
    wall_offset_us: int
    mono_offset_us: int
    state: State = field(default_factory=State)
    snapshot: bytes | None = None

    def wall(self, t_us: int) -> int:
        return t_us + self.wall_offset_us

    def mono(self, t_us: int) -> int:
        return t_us - T0_US + self.mono_offset_us


@dataclass
class LeaderView:
    node_id: str
    term: int
    epoch: int | None = None
    clock: LeaderClock | None = None
    stale_steps: int = 0  # once deposed: steps it still acts before noticing


@dataclass
class Proposal:
    data: bytes
    ready_step: int
    on_applied: Callable | None = None


class World:
    def __init__(self, seed: int, nodes: int = 3, faults: Faults | None = None) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults or Faults()
        self.step_no = 0
        self.t_us = T0_US + self.rng.randrange(3600) * SECOND_US
        self.nodes = [
            Node(f"n{i + 1}", self.rng.randrange(-90, 91) * SECOND_US, self.rng.randrange(1, 10**6) * SECOND_US)
            for i in range(nodes)
        ]
        self.log: list[bytes] = []
        self.inflight: list[Proposal] = []
        self.oracle = Oracle()
        self.term = 0
        self.leader: LeaderView | None = None
        self.deposed: list[LeaderView] = []
        self.stats: dict[str, int] = {}
        self.setup_done = False

    # -- proposals and the log -------------------------------------------------
    def count(self, name: str) -> None:
        self.stats[name] = self.stats.get(name, 0) + 1

    def propose(
        self, command, on_applied: Callable | None = None, max_delay: int | None = None, reliable: bool = False
    ) -> None:
        """Send `command` towards the log: maybe lost, maybe delayed, maybe duplicated."""
        faults, rng = self.faults, self.rng
        if not reliable and rng.random() < faults.lost:
            self.count("lost")
            return
        data = encode_command(command)
        delay = rng.randint(0, faults.max_delay_steps if max_delay is None else max_delay)
        self.inflight.append(Proposal(data, self.step_no + delay, on_applied))
        if not reliable and rng.random() < faults.duplicated:
            self.count("duplicated")
            self.inflight.append(Proposal(data, self.step_no + delay + rng.randint(0, 3)))

    def commit_ready(self) -> None:
        ready = [p for p in self.inflight if p.ready_step <= self.step_no]
        self.inflight = [p for p in self.inflight if p.ready_step > self.step_no]
        self.rng.shuffle(ready)
        for proposal in ready:
            self.log.append(proposal.data)
            result = self.oracle.apply(len(self.log), decode_command(proposal.data))
            if proposal.on_applied is not None:
                proposal.on_applied(result)

    def replicate(self, compare: bool = True) -> None:
        """Nodes apply the log (followers may lag); with `compare`, a caught-up node's encoded
        state must be byte for byte the oracle's."""
        expected = None
        for node in self.nodes:
            leader_node = self.leader is not None and node.node_id == self.leader.node_id
            if not leader_node and self.rng.random() < self.faults.lag:
                continue
            for index in range(node.state.applied_index + 1, len(self.log) + 1):
                apply(node.state, decode_command(self.log[index - 1]), index)
            if compare and node.state.applied_index == len(self.log) == self.oracle.state.applied_index:
                expected = expected or encode_snapshot(self.oracle.state)
                if encode_snapshot(node.state) != expected:
                    raise Violation(
                        f"{node.node_id} differs from the reference replica at index {len(self.log)}: "
                        f"digest {state_digest(node.state)[:12]} != {state_digest(self.oracle.state)[:12]}"
                    )

    # -- leadership --------------------------------------------------------------
    def leader_node(self, view: LeaderView) -> Node:
        return next(n for n in self.nodes if n.node_id == view.node_id)

    def elect(self) -> None:
        """A new Raft term on some node; the old leader keeps acting, stale, for a few steps."""
        if self.leader is not None:
            self.leader.stale_steps = self.rng.randint(1, 6)
            self.deposed.append(self.leader)
        self.term += 1
        node = self.rng.choice(self.nodes)
        view = self.leader = LeaderView(node.node_id, self.term)
        self.count("elections")
        self.claim_leadership(view)

    def claim_leadership(self, view: LeaderView) -> None:
        node = self.leader_node(view)

        def opened(result) -> None:
            claimed = [e for e in result.events if isinstance(e, LeadershipClaimed)]
            if result.accepted and claimed and self.leader is view and view.epoch is None:
                state = self.oracle.state  # the leader has applied up to its own entry: same state
                view.epoch = claimed[0].epoch
                # Built like LeaderLifecycle's: it follows the core's current anchor in its own replica.
                view.clock = LeaderClock(
                    state.clock_anchor_now_us,
                    state.clock_anchor_mono_us,
                    lambda: node.wall(self.t_us),
                    lambda: node.mono(self.t_us),
                    lambda: (node.state.clock_anchor_now_us, node.state.clock_anchor_mono_us),
                )

        self.propose(ClaimLeadership(node.wall(self.t_us), node.node_id, view.term, node.mono(self.t_us)), opened)

    def acting_leaders(self) -> list[LeaderView]:
        """The current leader once its epoch is open, and deposed ones that have not noticed yet."""
        views = [v for v in self.deposed if v.stale_steps > 0 and v.epoch is not None]
        if self.leader is not None and self.leader.epoch is not None:
            views.append(self.leader)
        return views

    # -- faults --------------------------------------------------------------------
    def inject_faults(self) -> None:
        faults, rng = self.faults, self.rng
        for view in self.deposed:
            view.stale_steps -= 1
        self.deposed = [v for v in self.deposed if v.stale_steps > 0]
        if self.leader is None or rng.random() < faults.depose:
            self.elect()
        elif self.leader.epoch is None and rng.random() < 0.2:
            self.claim_leadership(self.leader)  # the lifecycle retries a claim that never answered
        for node in self.nodes:
            if rng.random() < faults.snapshot:
                node.snapshot = encode_snapshot(node.state)
        if rng.random() < faults.crash:
            node = rng.choice(self.nodes)
            node.state = decode_snapshot(node.snapshot) if node.snapshot else State()
            self.count("crashes")
            if self.leader is not None and self.leader.node_id == node.node_id:
                self.elect()
        if rng.random() < faults.clock_jump:
            node = rng.choice(self.nodes)
            node.wall_offset_us += rng.choice((-1, 1)) * rng.randrange(1, 120) * SECOND_US
            self.count("clock_jumps")

    def advance_time(self, fast: bool = False) -> None:
        if fast:
            self.t_us += self.rng.randrange(1, 3) * SECOND_US
        elif self.rng.random() < self.faults.outage:
            self.t_us += self.rng.randrange(2, 20) * SECOND_US
        else:
            self.t_us += self.rng.randrange(20_000, 600_000)
