"""Property tests of the core: determinism, snapshot restore equivalence, apply never raises.

Commands are generated against a live state so that many of them are plausible
(claims of the job's real next slot, the current epoch and versions) and the
interesting paths run, mixed with stale, duplicate, out-of-order and malformed ones.
"""

from __future__ import annotations

import os
import typing

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.core import (
    CodecError,
    State,
    apply,
    decode_command,
    decode_snapshot,
    encode_command,
    encode_snapshot,
    state_digest,
)
from scheduler.core.commands import (
    AdvanceTime,
    ApplyJobs,
    ClaimLeadership,
    ClaimRuns,
    Command,
    CompleteRuns,
    Completion,
    ExpireLeases,
    Expiry,
    ExtendLeases,
    GrantLeases,
    JobUpsert,
    LeaseRef,
    ReadBarrier,
    RunRef,
    SetJobPaused,
    SlotClaim,
)
from scheduler.core.model import SECOND_US, JobSpec, MisfirePolicy, RetryPolicy
from tests.fakes import T0_US, apply_checking_time, spec

TEN_S = 10 * SECOND_US
JOB_IDS = ("a", "b", "c")
REQUEST_IDS = ("", "r1", "r2", "r3")
NODES = ("n1", "n2", "n3")
SCHEDULES = ("*/10 * * * * *", "*/20 * * * * *")
CLAIM_STATUSES = ("queued", "queued", "skipped", "missed", "leased")
OVERLAPS = ("allow", "forbid", "replace", "queue")
# Policies a validated spec can carry (validation bounds the multiplier to [1, 10]).
RETRIES = (RetryPolicy(), RetryPolicy(max_attempts=1), RetryPolicy(max_attempts=2, within_us=60 * SECOND_US))
TIMEOUTS = (3600 * SECOND_US, 20 * SECOND_US)
OUTCOMES = ("success", "failure", "retry_later", "success", "bogus")
EXPIRY_REASONS = ("lease_expired", "timed_out", "bogus")

# Soak runs: RAFTCRON_PROPERTY_SCALE=20 runs twenty times as many examples.
SCALE = int(os.environ.get("RAFTCRON_PROPERTY_SCALE", "1"))

PROPERTY_SETTINGS = settings(
    max_examples=100 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)


def _slot_after(instant_us: int) -> int:
    """The first 10-second slot strictly after `instant_us`."""
    return T0_US + ((instant_us - T0_US) // TEN_S + 1) * TEN_S


# How far a follower's, a worker's or a client's clock is off the leader's.
SKEWS = (0, 0, -30 * SECOND_US, 45 * SECOND_US, 3600 * SECOND_US)
# A step of the leader's wall clock that its monotonic clock does not see.
JUMPS = (0, 0, 0, 0, 600 * SECOND_US, -600 * SECOND_US)


class Generator:
    """Draws the next command for `state`.

    The leader has a wall clock that may be stepped back and forth and jump, and a
    monotonic clock that only moves on; its epoch commands carry both. Commands from
    followers, workers and clients carry their own, skewed, clocks; job changes are mostly
    stamped with a replica's view of replicated time, as the API servicer stamps them.
    """

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.clock_us = T0_US
        self.mono_us = 5 * SECOND_US  # its own origin: unrelated to the wall clock

    def draw(self, strategy, label: str = ""):
        return self.data.draw(strategy, label=label or None)

    def preamble(self, state: State) -> list[Command]:
        """Usually start from a leader and three jobs, so that most claims can succeed."""
        if not self.draw(st.integers(0, 3), label="preamble"):
            return []
        self.clock_us += SECOND_US
        # Planned from replicated time, which the leadership claim just opened at the leader's clock.
        jobs = ApplyJobs(
            issued_at_us=self.clock_us,
            author="setup",
            request_id="",
            upserts=tuple(JobUpsert(spec(job_id), 0, _slot_after(self.clock_us)) for job_id in JOB_IDS),
        )
        return [ClaimLeadership(issued_at_us=self.clock_us, node_id="n1", term=1, monotonic_us=self.mono_us), jobs]

    def next_index(self, state: State) -> int:
        if self.draw(st.integers(0, 19)) == 0:
            return state.applied_index - self.draw(st.integers(0, 1))  # not increasing
        return state.applied_index + self.draw(st.integers(1, 3))

    def command(self, state: State) -> Command:
        step_us = self.draw(st.integers(-30, 40)) * SECOND_US
        self.clock_us += step_us + self.draw(st.sampled_from(JUMPS), label="wall jump")
        self.mono_us += max(step_us, 0)
        issued = self.clock_us
        kind = self.draw(
            st.sampled_from(
                ("claim", "claim", "claim", "jobs", "jobs", "pause", "lead", "barrier", "tick")
                + ("grant", "grant", "extend", "complete", "complete", "expire")
            )
        )
        if kind == "lead":
            term = max(0, state.leader_term + self.draw(st.integers(-1, 2)))
            if term >= state.leader_term and self.draw(st.booleans()):
                self.mono_us = self.draw(st.sampled_from((0, 3600 * SECOND_US)))  # another node's origin
            node = self.draw(st.sampled_from(NODES))
            return ClaimLeadership(issued_at_us=issued, node_id=node, term=term, monotonic_us=self.mono_us)
        if kind == "tick":
            return AdvanceTime(issued_at_us=issued, epoch=self.epoch(state), monotonic_us=self.mono_us)
        # Everything below but claims, grants and expiries comes from a node other than the leader.
        skewed = issued + self.draw(st.sampled_from(SKEWS), label="skew")
        if kind == "barrier":
            return ReadBarrier(issued_at_us=skewed)
        if kind == "pause":
            return SetJobPaused(
                issued_at_us=skewed,
                job_id=self.draw(st.sampled_from(JOB_IDS + ("ghost",))),
                paused=self.draw(st.booleans()),
                author="op",
                reason=self.draw(st.sampled_from(("", "maintenance"))),
                request_id=self.draw(st.sampled_from(REQUEST_IDS)),
            )
        if kind == "jobs":
            # The API servicer stamps its replica's view of replicated time (lagging at times);
            # other proposers, their own clocks (refused as stale plans when they start slots).
            view = state.now_us - self.draw(st.sampled_from((0, 0, SECOND_US, 45 * SECOND_US)), label="lag")
            return self.apply_jobs(state, self.draw(st.sampled_from((view, view, skewed)), label="stamp"))
        if kind == "grant":
            return self.grant_leases(state, issued)
        if kind == "extend":
            return ExtendLeases(issued_at_us=skewed, leases=tuple(self.lease_refs(state)))
        if kind == "complete":
            return self.complete_runs(state, skewed)
        if kind == "expire":
            return self.expire_leases(state, issued)
        return self.claim_runs(state, issued)

    def epoch(self, state: State) -> int:
        return state.epoch if self.draw(st.integers(0, 7)) else state.epoch + self.draw(st.sampled_from((-1, 1)))

    def runs_with(self, state: State, statuses: tuple[str, ...]) -> list:
        return [run for job_id in sorted(state.runs) for run in state.runs[job_id] if run.status in statuses]

    def pick(self, likely: list, unlikely: list, max_size: int = 3) -> list:
        """Mostly items from `likely` (when there are any), sometimes from `unlikely`."""
        picked = []
        for _ in range(self.draw(st.integers(0 if not likely else 1, max_size))):
            pool = likely if likely and self.draw(st.integers(0, 5)) else unlikely
            picked.append(self.draw(st.sampled_from(pool)))
        return picked

    def grant_leases(self, state: State, issued: int) -> GrantLeases:
        queued = [RunRef(run.job_id, run.scheduled_us) for run in self.runs_with(state, ("queued",))]
        refs = self.pick(queued, [RunRef("a", _slot_after(issued)), RunRef("ghost", T0_US)])
        ttl = self.draw(st.sampled_from((30 * SECOND_US, 30 * SECOND_US, 5 * SECOND_US, 0)))
        worker = self.draw(st.sampled_from(("w1", "w2")))
        return GrantLeases(
            issued_at_us=issued,
            epoch=self.epoch(state),
            worker_id=worker,
            lease_ttl_us=ttl,
            grants=tuple(refs),
            monotonic_us=self.mono_us,
        )

    def lease_refs(self, state: State) -> list[LeaseRef]:
        current = [
            LeaseRef(run.job_id, run.scheduled_us, run.fencing_token) for run in self.runs_with(state, ("leased",))
        ]
        others = [
            LeaseRef(run.job_id, run.scheduled_us, run.fencing_token - self.draw(st.sampled_from((0, 1))))
            for run in self.runs_with(state, ("queued", "succeeded", "failed", "cancelled", "timed_out"))[:4]
        ]
        return self.pick(current, others + [LeaseRef("ghost", T0_US, 1)])

    def complete_runs(self, state: State, issued: int) -> CompleteRuns:
        completions = []
        for ref in self.lease_refs(state):
            completions.append(
                Completion(
                    lease=ref,
                    worker_id=self.draw(st.sampled_from(("w1", "w2"))),
                    outcome=self.draw(st.sampled_from(OUTCOMES)),
                    exit_code=self.draw(st.sampled_from((0, 1))),
                    error=self.draw(st.sampled_from(("", "boom"))),
                    retry_after_us=self.draw(st.sampled_from((0, 0, 45 * SECOND_US))),
                    jitter_ppm=self.draw(st.sampled_from((0, 500_000, 999_999, -5, 2_000_000))),
                )
            )
        return CompleteRuns(issued_at_us=issued, completions=tuple(completions))

    def expire_leases(self, state: State, issued: int) -> ExpireLeases:
        expiries = [
            Expiry(ref, self.draw(st.sampled_from(EXPIRY_REASONS)), self.draw(st.sampled_from((0, 999_999))))
            for ref in self.lease_refs(state)
        ]
        return ExpireLeases(
            issued_at_us=issued, epoch=self.epoch(state), expiries=tuple(expiries), monotonic_us=self.mono_us
        )

    def apply_jobs(self, state: State, issued: int) -> ApplyJobs:
        upserts = []
        for job_id in self.draw(st.lists(st.sampled_from(JOB_IDS), max_size=3, unique=True)):
            current = state.jobs.get(job_id)
            job_spec = spec(
                job_id,
                schedule=self.draw(st.sampled_from(SCHEDULES)),
                owner=self.draw(st.sampled_from(("", "ops"))),
                paused=self.draw(st.booleans()),
                overlap=self.draw(st.sampled_from(OVERLAPS)),
                retry=self.draw(st.sampled_from(RETRIES)),
                timeout_us=self.draw(st.sampled_from(TIMEOUTS)),
            )
            if self.draw(st.integers(0, 4)):
                expected = current.version if current else 0
            else:
                expected = self.draw(st.integers(0, 3))
            start = min(issued, state.now_us)  # where the core restarts the job's slots
            cursor = max(current.cursor_us, start) if current else start
            next_due = self.draw(st.sampled_from((_slot_after(cursor), _slot_after(cursor), 0, cursor, -1)))
            upserts.append(JobUpsert(spec=job_spec, expected_version=expected, next_due_us=next_due))
        removals: list[str] = []
        if not upserts or not self.draw(st.integers(0, 3)):
            removals = self.draw(st.lists(st.sampled_from(JOB_IDS + ("ghost",)), max_size=2))
        return ApplyJobs(
            issued_at_us=issued,
            author=self.draw(st.sampled_from(("alice", "bob"))),
            request_id=self.draw(st.sampled_from(REQUEST_IDS)),
            upserts=tuple(upserts),
            removals=tuple(removals),
        )

    def claim_runs(self, state: State, issued: int) -> ClaimRuns:
        planned = {job_id: (job.next_due_us, job.version) for job_id, job in state.jobs.items()}
        claims = []
        for _ in range(self.draw(st.integers(1, 6))):
            if planned and self.draw(st.integers(0, 5)):
                job_id = self.draw(st.sampled_from(sorted(planned)))
            else:
                job_id = self.draw(st.sampled_from(JOB_IDS + ("ghost",)))
            due, version = planned.get(job_id, (_slot_after(issued), 1))
            if not self.draw(st.integers(0, 5)):
                due += self.draw(st.sampled_from((-TEN_S, -1, TEN_S)))  # off plan
            if not self.draw(st.integers(0, 7)):
                version += self.draw(st.sampled_from((-1, 1)))  # stale spec
            next_due = self.draw(st.sampled_from((due + TEN_S, due + TEN_S, due + 2 * TEN_S, 0, due)))
            status = self.draw(st.sampled_from(CLAIM_STATUSES))
            reason = "" if status == "queued" else "policy"
            effective = self.draw(st.sampled_from((0, 0, due + 7)))
            claims.append(SlotClaim(job_id, due, next_due, version, status, reason, effective))
            if job_id in planned:
                planned[job_id] = (next_due, version)
        latest_us = max(claim.scheduled_us for claim in claims)
        if latest_us > issued and self.draw(st.booleans()):
            # The leader waits until its plan is due: both of its clocks move on.
            self.mono_us += latest_us - issued
            self.clock_us = issued = latest_us
        return ClaimRuns(issued_at_us=issued, epoch=self.epoch(state), claims=tuple(claims), monotonic_us=self.mono_us)


@PROPERTY_SETTINGS
@given(st.data())
def test_replicas_applying_the_same_log_agree(data: st.DataObject) -> None:
    gen = Generator(data)
    leader_view = State()
    log: list[tuple[bytes, int]] = []
    results = []
    preamble = gen.preamble(leader_view)
    for step in range(len(preamble) + data.draw(st.integers(1, 40), label="steps")):
        command = preamble[step] if step < len(preamble) else gen.command(leader_view)
        index = leader_view.applied_index + 1 if step < len(preamble) else gen.next_index(leader_view)
        entry = encode_command(command)
        assert decode_command(entry) == command
        log.append((entry, index))
        results.append(apply_checking_time(leader_view, command, index))
    follower = State()
    for (entry, index), expected in zip(log, results):
        assert apply(follower, decode_command(entry), index) == expected
    assert state_digest(follower) == state_digest(leader_view)
    assert follower.run_count == sum(len(runs) for runs in follower.runs.values())
    live = {
        job_id: [r.scheduled_us for r in runs if r.status in ("queued", "leased")]
        for job_id, runs in follower.runs.items()
    }
    assert follower.live_runs == {job_id: keys for job_id, keys in live.items() if keys}


@PROPERTY_SETTINGS
@given(st.data())
def test_restored_snapshot_behaves_identically(data: st.DataObject) -> None:
    gen = Generator(data)
    original = State()
    for index, command in enumerate(gen.preamble(original), start=1):
        apply(original, command, index)
    for _ in range(data.draw(st.integers(0, 30), label="prefix")):
        command = gen.command(original)
        apply(original, command, gen.next_index(original))
    blob = encode_snapshot(original)
    restored = decode_snapshot(blob)
    assert state_digest(restored) == state_digest(original)
    assert encode_snapshot(restored) == blob
    for _ in range(data.draw(st.integers(1, 30), label="suffix")):
        command = gen.command(original)
        index = gen.next_index(original)
        assert apply(restored, command, index) == apply(original, command, index)
        assert state_digest(restored) == state_digest(original)
    # A snapshot of the restored replica is the snapshot of the original.
    assert encode_snapshot(restored) == encode_snapshot(original)


# -- apply never raises for any decodable command ---------------------------------------

ints = st.integers(-(2**63), 2**64 - 1)
small_ints = st.integers(-3, 3)
texts = st.text(max_size=12)
statuses = st.sampled_from(("queued", "skipped", "missed", "leased", "succeeded", "")) | texts

retry_policies = st.builds(
    RetryPolicy,
    max_attempts=ints,
    backoff_initial_us=ints,
    backoff_max_us=ints,
    backoff_multiplier=st.floats(allow_nan=True, allow_infinity=True),
    within_us=ints,
)
misfire_policies = st.builds(MisfirePolicy, policy=texts, grace_us=ints, max_catch_up=ints)
job_ids = st.sampled_from(JOB_IDS + ("",)) | texts
job_specs = st.builds(
    JobSpec,
    id=job_ids,
    schedule=texts,
    target_kind=texts,
    target=texts,
    timezone=texts,
    owner=texts,
    job_class=texts,
    timeout_us=ints,
    retry=retry_policies,
    priority=ints,
    payload_json=texts,
    misfire=misfire_policies,
    dst_gap=texts,
    dst_repeat=texts,
    jitter=texts,
    overlap=texts,
    paused=st.booleans(),
)
instants = ints | st.sampled_from((0, T0_US, T0_US + TEN_S, T0_US + 2 * TEN_S))
slot_claims = st.builds(
    SlotClaim,
    job_id=job_ids,
    scheduled_us=instants,
    next_due_us=instants,
    spec_version=small_ints | ints,
    status=statuses,
    reason=texts,
    effective_us=instants,
)
lease_refs = st.builds(LeaseRef, job_id=job_ids, scheduled_us=instants, fencing_token=small_ints | ints)
arbitrary_commands = st.one_of(
    st.builds(ClaimLeadership, issued_at_us=instants, node_id=texts, term=small_ints | ints, monotonic_us=instants),
    st.builds(AdvanceTime, issued_at_us=instants, epoch=small_ints | ints, monotonic_us=instants),
    st.builds(
        ApplyJobs,
        issued_at_us=instants,
        author=texts,
        request_id=st.sampled_from(REQUEST_IDS) | texts,
        upserts=st.lists(
            st.builds(JobUpsert, spec=job_specs, expected_version=small_ints | ints, next_due_us=instants), max_size=3
        ).map(tuple),
        removals=st.lists(job_ids, max_size=3).map(tuple),
    ),
    st.builds(
        SetJobPaused,
        issued_at_us=instants,
        job_id=job_ids,
        paused=st.booleans(),
        author=texts,
        reason=texts,
        request_id=st.sampled_from(REQUEST_IDS) | texts,
    ),
    st.builds(
        ClaimRuns,
        issued_at_us=instants,
        epoch=small_ints | ints,
        claims=st.lists(slot_claims, max_size=4).map(tuple),
        monotonic_us=instants,
    ),
    st.builds(ReadBarrier, issued_at_us=instants),
    st.builds(
        GrantLeases,
        issued_at_us=instants,
        epoch=small_ints | ints,
        worker_id=texts,
        lease_ttl_us=instants,
        grants=st.lists(st.builds(RunRef, job_id=job_ids, scheduled_us=instants), max_size=3).map(tuple),
        monotonic_us=instants,
    ),
    st.builds(ExtendLeases, issued_at_us=instants, leases=st.lists(lease_refs, max_size=3).map(tuple)),
    st.builds(
        CompleteRuns,
        issued_at_us=instants,
        completions=st.lists(
            st.builds(
                Completion,
                lease=lease_refs,
                worker_id=texts,
                outcome=st.sampled_from(OUTCOMES) | texts,
                exit_code=ints,
                error=texts,
                output_tail=texts,
                retry_after_us=ints,
                jitter_ppm=ints,
            ),
            max_size=3,
        ).map(tuple),
    ),
    st.builds(
        ExpireLeases,
        issued_at_us=instants,
        epoch=small_ints | ints,
        expiries=st.lists(
            st.builds(Expiry, lease=lease_refs, reason=st.sampled_from(EXPIRY_REASONS) | texts, jitter_ppm=ints),
            max_size=3,
        ).map(tuple),
        monotonic_us=instants,
    ),
)


def _seeded_state(data: st.DataObject) -> State:
    gen = Generator(data)
    state = State()
    for index, command in enumerate(gen.preamble(state), start=1):
        apply(state, command, index)
    for _ in range(data.draw(st.integers(0, 12), label="seed steps")):
        apply(state, gen.command(state), gen.next_index(state))
    return state


@settings(max_examples=300 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.lists(st.tuples(arbitrary_commands, st.integers(-2, 2**63)), min_size=1, max_size=8))
def test_apply_never_raises_for_a_decodable_command(data: st.DataObject, entries) -> None:
    state = _seeded_state(data)
    for command, index in entries:
        decoded = decode_command(encode_command(command))
        result = apply_checking_time(state, decoded, index)
        # Its own index, or the index of the first answer to a repeated request id.
        assert result.index == index or result.index in {r.index for r in state.request_results.values()}
        # Whatever it accepted, the state still encodes and restores.
        assert state_digest(decode_snapshot(encode_snapshot(state))) == state_digest(state)


@st.composite
def mutated_entries(draw) -> bytes:
    entry = bytearray(encode_command(draw(arbitrary_commands)))
    for _ in range(draw(st.integers(1, 4))):
        action = draw(st.sampled_from(("flip", "cut", "insert", "delete")))
        position = draw(st.integers(0, len(entry)))
        if action == "flip" and position < len(entry):
            entry[position] = draw(st.integers(0, 255))
        elif action == "cut":
            del entry[position:]
        elif action == "insert":
            entry[position:position] = draw(st.binary(min_size=1, max_size=4))
        elif action == "delete" and position < len(entry):
            del entry[position]
    return bytes(entry)


@settings(max_examples=400 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.one_of(mutated_entries(), st.binary(max_size=64)))
def test_any_bytes_either_fail_to_decode_with_codec_error_or_apply_cleanly(data: st.DataObject, entry: bytes) -> None:
    # The adapter catches CodecError only: anything else raised here would wedge every replica.
    try:
        command = decode_command(entry)
    except CodecError:
        return
    state = _seeded_state(data)
    apply(state, command, state.applied_index + 1)
    assert isinstance(command, typing.get_args(Command))


@settings(max_examples=200 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.integers(0, 10_000), st.binary(min_size=1, max_size=4))
def test_damaged_snapshot_raises_codec_error_or_decodes(data: st.DataObject, position: int, junk: bytes) -> None:
    blob = bytearray(encode_snapshot(_seeded_state(data)))
    position %= len(blob)
    damaged = [bytes(blob[:position]), bytes(blob[:position] + junk + blob[position + 1 :])]
    for candidate in damaged:
        try:
            state = decode_snapshot(candidate)
        except CodecError:
            continue
        assert isinstance(state, State)
        msgspec.msgpack.encode(state)


@pytest.mark.parametrize("multiplier", [float("nan"), float("inf"), 1e308])
def test_apply_never_raises_for_extreme_retry_policies(multiplier: float) -> None:
    # Validation at the API bounds the multiplier to [1, 10]; the core must not rely on it.
    state = State()
    index = 0

    def run(command: Command):
        nonlocal index
        index += 1
        return apply_checking_time(state, command, index)

    # The leader's monotonic clock reads the same as its wall clock: no reading is clamped.
    run(ClaimLeadership(issued_at_us=T0_US, node_id="n1", term=1, monotonic_us=T0_US))
    policy = RetryPolicy(max_attempts=5, backoff_multiplier=multiplier)
    run(
        ApplyJobs(
            issued_at_us=T0_US,
            author="a",
            request_id="",
            upserts=(JobUpsert(spec("a", retry=policy), 0, T0_US + TEN_S),),
        )
    )
    claimed = run(
        ClaimRuns(
            issued_at_us=T0_US + TEN_S,
            epoch=1,
            claims=(SlotClaim("a", T0_US + TEN_S, T0_US + 2 * TEN_S, 1),),
            monotonic_us=T0_US + TEN_S,
        )
    )
    assert claimed.events[0].__class__.__name__ == "RunClaimed", claimed
    for attempt in range(1, 4):
        run_record = state.get_run("a", T0_US + TEN_S)
        # The leader's clock ticks past the retry's backoff before it grants again.
        at = max(state.now_us + 1, run_record.not_before_us)
        assert run(AdvanceTime(issued_at_us=at, epoch=1, monotonic_us=at)).accepted
        assert state.now_us == at
        granted = run(
            GrantLeases(
                issued_at_us=at,
                epoch=1,
                worker_id="w",
                lease_ttl_us=30 * SECOND_US,
                grants=(RunRef("a", T0_US + TEN_S),),
                monotonic_us=at,
            )
        )
        assert granted.events[0].__class__.__name__ == "LeaseGranted", (attempt, granted)
        token = granted.events[0].fencing_token
        failed = CompleteRuns(
            issued_at_us=at + 1, completions=(Completion(LeaseRef("a", T0_US + TEN_S, token), "w", "failure"),)
        )
        result = run(failed)  # must return, never raise
        assert result.accepted, attempt
